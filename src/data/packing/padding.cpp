// padding: each example its own row, the rows of a minibatch padded to its longest example.
#include "data/packing/batch_builder.h"
#include "data/packing/batch_sizing.h"
#include "data/packing/ordered_packer.h"
#include "data/packing/strategies.h"

#include <algorithm>

namespace pt {
namespace {

class PaddingPacker final : public OrderedPacker {
 public:
  using OrderedPacker::OrderedPacker;

  std::optional<Batch> next() override {
    if (done()) return std::nullopt;
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
};

}  // namespace

std::unique_ptr<Packer> make_padding_packer(const DatasetSplit& split, const PackingOptions& options,
                                            int64_t epoch) {
  return std::make_unique<PaddingPacker>(split, options, epoch);
}

}  // namespace pt
