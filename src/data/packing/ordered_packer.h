// The state every packer that walks one epoch's example order shares: the split, the options, the
// order, and the position in it (which is also the progress).
#pragma once

#include "data/packing/batch_sizing.h"
#include "data/packing/packer.h"

#include <vector>

namespace pt {

class OrderedPacker : public Packer {
 public:
  OrderedPacker(const DatasetSplit& split, const PackingOptions& options, int64_t epoch)
      : split_(split), options_(options), order_(packing_order(split, options, epoch)) {}

  double progress() const override {
    return order_.empty() ? 1.0 : static_cast<double>(next_) / static_cast<double>(order_.size());
  }

 protected:
  bool done() const { return next_ == std::ssize(order_); }

  DatasetSplit split_;
  PackingOptions options_;
  std::vector<int64_t> order_;
  int64_t next_ = 0;  // position in order_ of the next example to consume
};

}  // namespace pt
