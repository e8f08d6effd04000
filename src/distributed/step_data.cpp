#include "distributed/step_data.h"

#include "core/error.h"
#include "data/packing/batch_sizing.h"
#include "data/packing/masked_lm.h"

#include <numeric>

namespace pt::dist {
namespace {

bool fixed_rows(Strategy s) {
  return s == Strategy::kConcat || s == Strategy::kConcatPosId || s == Strategy::kBfd;
}

}  // namespace

StepSampler::StepSampler(DatasetSplit split, PackingOptions options, int world_size, int32_t grad_accum,
                         int64_t epoch, int64_t position)
    : split_(std::move(split)), options_(options), epoch_(epoch), position_(position) {
  if (world_size < 1) fail("step sampler: world size must be at least 1, got {}", world_size);
  if (grad_accum < 1) fail("--grad-accum must be positive (got {})", grad_accum);
  make_packer(split_, options_, 0);  // validates the options against the split
  const int64_t micro_batches = int64_t{world_size} * grad_accum;
  examples_per_step_ = int64_t{options_.examples_per_batch} * micro_batches;
  tokens_per_step_ = options_.tokens_per_batch * micro_batches;
  start_epoch();
  if (order_.empty()) fail("the training split has only empty examples; prepare more data");
  if (position_ < 0 || position_ > std::ssize(order_))
    fail("data position {} is outside epoch {}'s {} examples; the checkpoint does not match this dataset",
         position_, epoch_, order_.size());
}

void StepSampler::start_epoch() { order_ = packing_order(split_, options_, epoch_); }

std::vector<int64_t> StepSampler::next() {
  std::vector<int64_t> step;
  step_epochs_.clear();
  int64_t tokens = 0;
  for (;;) {
    if (position_ == std::ssize(order_)) {
      ++epoch_;
      position_ = 0;
      start_epoch();
    }
    const int64_t index = order_[static_cast<size_t>(position_)];
    if (examples_per_step_ > 0) {
      if (std::ssize(step) == examples_per_step_) break;
    } else if (!step.empty() && tokens + split_.length(index) > tokens_per_step_) {
      break;
    }
    step.push_back(index);
    step_epochs_.push_back(epoch_);
    tokens += split_.length(index);
    ++position_;
  }
  return step;
}

PackingOptions share_packing_options(const DatasetSplit& split, const PackingOptions& options) {
  PackingOptions o = options;
  o.shuffle = false;
  if (fixed_rows(o.strategy) && o.examples_per_batch > 0) {
    o.tokens_per_batch = int64_t{fixed_rows_per_batch(split, options)} * o.row_len;
    o.examples_per_batch = 0;
  }
  return o;
}

std::vector<Batch> pack_examples(const DatasetSplit& split, std::span<const int64_t> examples,
                                 const PackingOptions& share_options, std::span<const int64_t> epochs) {
  std::vector<Batch> batches;
  if (examples.empty()) return batches;
  const bool masked = share_options.objective == Objective::kMaskedLm;
  if (masked && epochs.size() != examples.size())
    fail("pack_examples: the masked-LM objective needs the epoch of each of the {} examples (got {})",
         examples.size(), epochs.size());
  // The packers walk a split, so the share becomes one: a copy of its tokens (small next to a step's
  // compute).
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> mask;
  std::vector<uint64_t> offsets{0};
  for (int64_t i : examples) {
    const Example e = split.example(i);
    tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
    mask.insert(mask.end(), e.loss_mask.begin(), e.loss_mask.end());
    offsets.push_back(tokens.size());
  }
  const DatasetSplit share =
      DatasetSplit::from_vectors(std::move(tokens), std::move(mask), std::move(offsets));
  // The share's examples are masked as the dataset's (seed, epoch, index), not as the share's own.
  PackingOptions causal = share_options;
  causal.objective = Objective::kCausalLm;
  auto packer = make_packer(share, causal, 0);
  auto key_of = [&](int64_t i) {
    const auto at = static_cast<size_t>(i);
    return MaskKey{share_options.seed, epochs[at], examples[at]};
  };
  while (auto batch = packer->next()) {
    if (masked) mask_batch(*batch, share, *share_options.mlm_vocab, share_options.mlm, key_of);
    for (ExamplePiece& piece : batch->pieces) piece.example = examples[static_cast<size_t>(piece.example)];
    batches.push_back(std::move(*batch));
  }
  return batches;
}

int64_t RankStep::real_tokens() const {
  int64_t n = 0;
  for (const Batch& b : micro) n += b.real_tokens;
  return n;
}

int64_t RankStep::global_real_tokens() const {
  return std::reduce(balance.tokens.begin(), balance.tokens.end(), int64_t{0});
}

RankStepStream::RankStepStream(DatasetSplit split, const PackingOptions& options, int32_t grad_accum,
                               int rank, int world_size, int64_t epoch, int64_t position)
    : split_(split),
      share_options_(share_packing_options(split, options)),
      rank_(rank),
      world_size_(world_size),
      sampler_(std::move(split), options, world_size, grad_accum, epoch, position) {
  if (rank < 0 || rank >= world_size) fail("rank {} is not a rank of {}", rank, world_size);
}

RankStep RankStepStream::next() {
  RankStep s;
  const std::vector<int64_t> step = sampler_.next();
  const std::vector<int64_t>& epochs = sampler_.step_epochs();
  std::vector<int64_t> lengths(step.size());
  for (size_t i = 0; i < step.size(); ++i) lengths[i] = split_.length(step[i]);
  s.balance = balance_by_tokens(lengths, world_size_);
  for (int64_t position : s.balance.share(rank_)) {
    s.examples.push_back(step[static_cast<size_t>(position)]);
    s.epochs.push_back(epochs[static_cast<size_t>(position)]);
  }
  s.micro = pack_examples(split_, s.examples, share_options_, s.epochs);
  return s;
}

}  // namespace pt::dist
