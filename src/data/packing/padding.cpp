// padding: each example its own row, the rows of a minibatch padded to its longest example.
#include "data/packing/batch_builder.h"
#include "data/packing/batch_sizing.h"
#include "data/packing/strategies.h"

#include <algorithm>

namespace pt {
namespace {

class PaddingPacker final : public Packer {
 public:
  PaddingPacker(const DatasetSplit& split, const PackingOptions& options, int64_t epoch)
      : split_(split), options_(options), order_(packing_order(split, options, epoch)) {}

  std::optional<Batch> next() override {
    if (next_ == std::ssize(order_)) return std::nullopt;
    int64_t end = minibatch_end(split_, order_, next_, options_, BudgetCost::kPaddedRows);
    int64_t longest = 0;
    for (int64_t i = next_; i < end; ++i) longest = std::max(longest, split_.length(order_[i]));
    BatchBuilder builder(options_.pad_id, (end - next_) * longest);
    for (; next_ < end; ++next_) {
      Example example = split_.example(order_[next_]);
      builder.append(example, 0, std::ssize(example.tokens), true);
      builder.end_row(static_cast<int32_t>(longest), PadTail::kContinueSegment);
    }
    return builder.finish();
  }

  double progress() const override {
    return order_.empty() ? 1.0 : static_cast<double>(next_) / static_cast<double>(order_.size());
  }

 private:
  DatasetSplit split_;
  PackingOptions options_;
  std::vector<int64_t> order_;
  int64_t next_ = 0;
};

}  // namespace

std::unique_ptr<Packer> make_padding_packer(const DatasetSplit& split, const PackingOptions& options,
                                            int64_t epoch) {
  return std::make_unique<PaddingPacker>(split, options, epoch);
}

}  // namespace pt
