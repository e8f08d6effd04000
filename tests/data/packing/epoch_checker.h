// Checks every batch invariant of the packing contract (batch.h) against the split the batch came from,
// and at the end of an epoch that every real token appeared exactly once and that the batches' tokens,
// read in order, are the examples laid end to end (so split pieces join back). Needs a split from
// synthetic_split, whose token ids are global token index + 1.
#pragma once

#include "data/dataset.h"
#include "data/packing/batch.h"
#include "data/packing/packer.h"

#include <cstdint>
#include <vector>

namespace pt::testing {

class EpochChecker {
 public:
  EpochChecker(const DatasetSplit& split, Strategy strategy, int32_t pad_id);

  void check(const Batch& batch);  // gtest failures on any violation
  void check_epoch_complete() const;

  int64_t batches() const { return batches_; }
  int64_t examples() const { return examples_; }
  int64_t examples_split() const { return examples_split_; }

 private:
  int64_t example_of(int64_t token) const;  // global token index -> example
  int64_t start(int64_t example) const { return starts_[static_cast<size_t>(example)]; }
  int64_t end(int64_t example) const { return starts_[static_cast<size_t>(example) + 1]; }

  DatasetSplit split_;
  Strategy strategy_;
  int32_t pad_id_;
  std::vector<int64_t> starts_;  // examples + 1 global token offsets
  std::vector<uint8_t> mask_;    // loss mask by global token
  std::vector<uint8_t> seen_;    // by global token
  std::vector<int64_t> stream_;  // global tokens in batch, row, column order
  int64_t batches_ = 0, examples_ = 0, examples_split_ = 0;
};

}  // namespace pt::testing
