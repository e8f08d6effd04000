// Packing strategies: one interface, one file per strategy. A packer walks one epoch of a dataset
// split in a seeded shuffled order and yields batches; the same (seed, epoch) gives the same batches.
// Every non-empty example appears exactly once per epoch (empty ones carry nothing and are skipped).
#pragma once

#include "data/dataset.h"
#include "data/mlm/masking.h"
#include "data/packing/batch.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pt {

enum class Strategy {
  kPadding,      // each example its own row, padded to the minibatch's longest
  kConcat,       // examples streamed into rows of row_len; attention spans the row (fixed-length packing)
  kConcatPosId,  // the same rows; attention and position ids restart at every example piece
  kFlatten,      // a minibatch's examples side by side in one unpadded row (HF DataCollatorWithFlattening)
  kBfd,          // whole examples best-fit into rows of row_len, a window at a time (bfd.cpp)
};

inline constexpr Strategy kAllStrategies[] = {Strategy::kPadding, Strategy::kConcat, Strategy::kConcatPosId,
                                              Strategy::kFlatten, Strategy::kBfd};

std::string_view strategy_name(Strategy s);      // "padding", "concat", "concat-posid", "flatten", "bfd"
Strategy parse_strategy(std::string_view name);  // throws pt::Error listing the valid names

struct PackingOptions {
  Strategy strategy = Strategy::kFlatten;
  // A batch is either a number of examples or a token budget (exactly one of the two is > 0).
  // Examples: padding and flatten take N examples; the fixed-row strategies take
  // max(1, round(N * mean_length / row_len)) rows, about N examples.
  // Tokens: padding takes examples while rows * longest fits, flatten while their sum fits; the
  // fixed-row strategies take budget / row_len rows.
  int32_t examples_per_batch = 0;
  int64_t tokens_per_batch = 0;
  // Row length of the fixed-row strategies (concat, concat-posid, bfd). concat cuts longer examples
  // across rows; bfd never cuts one, so a longer example is an error there (prepare with --max-len).
  int32_t row_len = 2048;
  int32_t pad_id = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  // kMaskedLm: every batch is masked (masked_lm.h) with these settings, keyed by (seed, epoch, example).
  Objective objective = Objective::kCausalLm;
  MlmSettings mlm;
  std::shared_ptr<const MlmVocab> mlm_vocab;  // required for kMaskedLm: MlmVocab::from_tokenizer
};

class Packer {
 public:
  virtual ~Packer() = default;
  // The next batch of the epoch, or nullopt when the epoch is done. A final partial batch is kept.
  virtual std::optional<Batch> next() = 0;
  // Fraction of the epoch's examples consumed so far, for progress bars.
  virtual double progress() const = 0;
};

// Validates options against the split (throws pt::Error with what to change).
std::unique_ptr<Packer> make_packer(const DatasetSplit& split, const PackingOptions& options, int64_t epoch);

// The example order of one epoch: a permutation of [0, split.size()) from (seed, epoch), or identity.
std::vector<int64_t> epoch_order(int64_t num_examples, uint64_t seed, int64_t epoch, bool shuffle);

}  // namespace pt
