// The data of a data-parallel step. Every rank draws the same global step's examples (the same seed and
// position, so no communication), splits them across ranks by real tokens (balance.h), and packs only
// its share into micro-batches with the run's packing strategy. The loss is normalised by the global
// count of loss tokens, which the trainer sums over ranks (Communicator::sum_host).
//
// A step is world_size * grad_accum micro-batches' worth of examples, the data-parallel convention (each
// rank does about grad_accum micro-batches): examples_per_batch examples each, or in token mode
// tokens_per_batch real tokens each (examples taken in order while they fit, at least one). The same
// global step with another world size is the same examples, so a W-rank run reproduces a 1-rank run with
// W times the grad_accum, up to the order of floating-point sums: exactly so for the strategies that keep
// example boundaries (padding, flatten, bfd, concat-posid); concat lets attention cross examples and cuts
// them at row ends, so its rows, and losses, depend on how the step is split.
//
// Steps run through the epochs' seeded orders back to back (a step may straddle an epoch's end). The
// position (epoch, examples of its order consumed) is what a checkpoint records; resuming is O(1).
#pragma once

#include "data/dataset.h"
#include "data/packing/batch.h"
#include "data/packing/packer.h"
#include "distributed/balance.h"

#include <cstdint>
#include <span>
#include <vector>

namespace pt::dist {

// The examples (dataset indices) of consecutive global steps.
class StepSampler {
 public:
  // Validates the packing options against the split (as make_packer does) and starts at (epoch, position).
  StepSampler(DatasetSplit split, PackingOptions options, int world_size, int32_t grad_accum,
              int64_t epoch = 0, int64_t position = 0);

  std::vector<int64_t> next();
  // The epoch each example of the last step was drawn in (a step may straddle epochs): masked-LM keys.
  const std::vector<int64_t>& step_epochs() const { return step_epochs_; }
  int64_t epoch() const { return epoch_; }
  int64_t position() const { return position_; }  // in epoch()'s order (empty examples excluded)

 private:
  void start_epoch();

  DatasetSplit split_;
  PackingOptions options_;
  int64_t examples_per_step_ = 0, tokens_per_step_ = 0;
  int64_t epoch_, position_;
  std::vector<int64_t> order_;
  std::vector<int64_t> step_epochs_;
};

// The options a rank packs its share with: in the given order (no shuffle), and for the fixed-row
// strategies in example mode the rows per micro-batch fixed from the whole split's mean length (a share's
// own mean would change it from step to step).
PackingOptions share_packing_options(const DatasetSplit& split, const PackingOptions& options);

// Packs `examples` (dataset indices, in this order) into micro-batches with share_packing_options; every
// example is in exactly one batch, and batch.pieces name dataset indices. Returns no batches for no
// examples. The masked-LM objective masks example i with the key (seed, epochs[i], examples[i]), as a
// single process does, so masks do not depend on the world size; it needs one epoch per example.
std::vector<Batch> pack_examples(const DatasetSplit& split, std::span<const int64_t> examples,
                                 const PackingOptions& share_options, std::span<const int64_t> epochs = {});

struct RankStep {
  std::vector<Batch> micro;  // this rank's micro-batches; none when the step has fewer examples than ranks
  TokenBalance balance;      // the step's split over ranks (the same on every rank): imbalance() for logs
  std::vector<int64_t> examples;  // this rank's share (dataset indices)
  std::vector<int64_t> epochs;    // the epoch each of them was drawn in
  int64_t real_tokens() const;    // of this rank
  int64_t global_real_tokens() const;
};

// StepSampler + balance_by_tokens + pack_examples for one rank.
class RankStepStream {
 public:
  RankStepStream(DatasetSplit split, const PackingOptions& options, int32_t grad_accum, int rank,
                 int world_size, int64_t epoch = 0, int64_t position = 0);

  RankStep next();
  int64_t epoch() const { return sampler_.epoch(); }
  int64_t position() const { return sampler_.position(); }

 private:
  DatasetSplit split_;
  PackingOptions share_options_;
  int rank_, world_size_;
  StepSampler sampler_;
};

}  // namespace pt::dist
