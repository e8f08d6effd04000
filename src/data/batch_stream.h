// An endless stream of batches over epochs of one split: epoch e uses the packer for (seed, e). Its
// position (epoch, batches taken in that epoch) is what a checkpoint records to resume exactly.
#pragma once

#include "data/dataset.h"
#include "data/packing/packer.h"

#include <cstdint>
#include <memory>

namespace pt {

class BatchStream {
 public:
  // Starts at (epoch, batches_in_epoch), replaying the packer up to there.
  BatchStream(DatasetSplit split, PackingOptions options, int64_t epoch = 0, int64_t batches_in_epoch = 0);

  Batch next();
  int64_t epoch() const { return epoch_; }
  int64_t batches_in_epoch() const { return batches_in_epoch_; }
  double epoch_progress() const { return packer_->progress(); }

 private:
  DatasetSplit split_;
  PackingOptions options_;
  int64_t epoch_, batches_in_epoch_ = 0;
  std::unique_ptr<Packer> packer_;
};

}  // namespace pt
