#include "data/packing/masked_lm.h"

#include "core/error.h"

#include <algorithm>
#include <vector>

namespace pt {

void mask_batch(Batch& batch, const DatasetSplit& split, const MlmVocab& vocab, const MlmSettings& settings,
                const std::function<MaskKey(int64_t example)>& key_of) {
  std::vector<int32_t> inputs, targets;  // the current example's, reused by its next pieces (concat)
  int64_t masked = -1;
  for (const ExamplePiece& piece : batch.pieces) {
    if (piece.example != masked) {
      const Example example = split.example(piece.example);
      inputs.resize(example.tokens.size());
      targets.resize(example.tokens.size());
      mask_example(example.tokens, vocab, settings, key_of(piece.example), inputs, targets);
      masked = piece.example;
    }
    PT_ASSERT(piece.begin + piece.length <= std::ssize(inputs));
    std::copy_n(inputs.begin() + piece.begin, piece.length, batch.input_ids.begin() + piece.at);
    std::copy_n(targets.begin() + piece.begin, piece.length, batch.labels.begin() + piece.at);
  }
  batch.loss_tokens =
      std::ssize(batch.labels) - std::count(batch.labels.begin(), batch.labels.end(), kIgnoreLabel);
  batch.objective = Objective::kMaskedLm;
}

namespace {

class MaskedLmPacker final : public Packer {
 public:
  MaskedLmPacker(std::unique_ptr<Packer> packer, const DatasetSplit& split, const PackingOptions& options,
                 int64_t epoch)
      : packer_(std::move(packer)), split_(split), options_(options), epoch_(epoch) {}

  std::optional<Batch> next() override {
    std::optional<Batch> batch = packer_->next();
    if (batch)
      mask_batch(*batch, split_, *options_.mlm_vocab, options_.mlm, [this](int64_t example) {
        return MaskKey{options_.seed, epoch_, example};
      });
    return batch;
  }
  double progress() const override { return packer_->progress(); }

 private:
  std::unique_ptr<Packer> packer_;
  DatasetSplit split_;
  PackingOptions options_;
  int64_t epoch_;
};

}  // namespace

std::unique_ptr<Packer> masked_lm_packer(std::unique_ptr<Packer> packer, const DatasetSplit& split,
                                         const PackingOptions& options, int64_t epoch) {
  return std::make_unique<MaskedLmPacker>(std::move(packer), split, options, epoch);
}

}  // namespace pt
