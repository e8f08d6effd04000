// flatten (minibatch packing with position ids, like HF DataCollatorWithFlattening): a minibatch's
// examples side by side in one row of exactly their total length, attention restarting at each.
#include "data/packing/batch_builder.h"
#include "data/packing/batch_sizing.h"
#include "data/packing/ordered_packer.h"
#include "data/packing/strategies.h"

namespace pt {
namespace {

class FlattenPacker final : public OrderedPacker {
 public:
  using OrderedPacker::OrderedPacker;

  std::optional<Batch> next() override {
    if (done()) return std::nullopt;
    int64_t end = minibatch_end(split_, order_, next_, options_, BudgetCost::kRealTokens);
    int64_t total = 0;
    for (int64_t i = next_; i < end; ++i) total += split_.length(order_[i]);
    BatchBuilder builder(options_.pad_id, total);
    for (; next_ < end; ++next_) {
      Example example = split_.example(order_[next_]);
      builder.append(example, 0, std::ssize(example.tokens), true);
    }
    builder.end_row(static_cast<int32_t>(total), PadTail::kOwnSegment);
    return builder.finish();
  }
};

}  // namespace

std::unique_ptr<Packer> make_flatten_packer(const DatasetSplit& split, const PackingOptions& options,
                                            int64_t epoch) {
  return std::make_unique<FlattenPacker>(split, options, epoch);
}

}  // namespace pt
