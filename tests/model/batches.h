// Batches for the model tests: random examples with masked prompts, packed by any strategy, for causal or
// masked-LM training.
#pragma once

#include "data/dataset.h"
#include "data/packing/packer.h"

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace pt::testing {

// Examples with random ids below `vocab` and a masked prompt prefix of random length.
inline DatasetSplit random_split(const std::vector<int64_t>& lengths, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> mask;
  std::vector<uint64_t> offsets = {0};
  for (int64_t len : lengths) {
    const int64_t prompt = static_cast<int64_t>(rng() % static_cast<uint64_t>(len));
    for (int64_t i = 0; i < len; ++i) {
      tokens.push_back(static_cast<uint32_t>(rng() % static_cast<uint64_t>(vocab)));
      mask.push_back(i >= prompt ? 1 : 0);
    }
    offsets.push_back(tokens.size());
  }
  return DatasetSplit::from_vectors(std::move(tokens), std::move(mask), std::move(offsets));
}

// A masked-LM vocabulary of `vocab` ids for the tests: ids 0 and 1 are special, 1 the mask token.
inline std::shared_ptr<const MlmVocab> test_mlm_vocab(int32_t vocab) {
  std::vector<TokenRole> roles(static_cast<size_t>(vocab), TokenRole::kWordStart);
  roles[0] = roles[1] = TokenRole::kSpecial;
  return std::make_shared<const MlmVocab>(std::move(roles), 1);
}

// Every batch of one unshuffled pass over the split. Masked LM (for a model of `vocab` ids) chooses 60% of
// the tokens, so that short examples get targets too, and so that the last layer's output gradients (zero
// but at the targets) hold groups of four tokens with more than two nonzero rows for MVUE to prune.
inline std::vector<Batch> packed_batches(const DatasetSplit& split, Strategy strategy, int32_t row_len,
                                         int32_t examples_per_batch,
                                         Objective objective = Objective::kCausalLm, int32_t vocab = 0) {
  PackingOptions o;
  o.strategy = strategy, o.examples_per_batch = examples_per_batch, o.row_len = row_len, o.shuffle = false;
  if (objective == Objective::kMaskedLm) {
    o.objective = objective, o.mlm.mask_prob = 0.6, o.mlm_vocab = test_mlm_vocab(vocab);
  }
  std::vector<Batch> batches;
  for (auto packer = make_packer(split, o, 0); auto b = packer->next();) batches.push_back(std::move(*b));
  return batches;
}

inline int64_t max_batch_tokens(const std::vector<Batch>& batches) {
  int64_t most = 0;
  for (const auto& b : batches) most = std::max(most, b.num_tokens());
  return most;
}

}  // namespace pt::testing
