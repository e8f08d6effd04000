#include "data/packing/batch_sizing.h"

#include <algorithm>
#include <cmath>

namespace pt {

std::vector<int64_t> packing_order(const DatasetSplit& split, const PackingOptions& options, int64_t epoch) {
  auto order = epoch_order(split.size(), options.seed, epoch, options.shuffle);
  std::erase_if(order, [&](int64_t i) { return split.length(i) == 0; });
  return order;
}

int64_t minibatch_end(const DatasetSplit& split, std::span<const int64_t> order, int64_t begin,
                      const PackingOptions& options, BudgetCost cost) {
  auto n = static_cast<int64_t>(order.size());
  if (options.examples_per_batch > 0) return std::min(n, begin + options.examples_per_batch);
  int64_t end = begin, longest = 0, total = 0;
  for (; end < n; ++end) {
    int64_t length = split.length(order[end]);
    int64_t after =
        cost == BudgetCost::kPaddedRows ? (end - begin + 1) * std::max(longest, length) : total + length;
    if (after > options.tokens_per_batch && end > begin) break;
    longest = std::max(longest, length);
    total += length;
  }
  return end;
}

int32_t fixed_rows_per_batch(const DatasetSplit& split, const PackingOptions& options) {
  if (options.tokens_per_batch > 0) return static_cast<int32_t>(options.tokens_per_batch / options.row_len);
  double mean =
      split.size() > 0 ? static_cast<double>(split.num_tokens()) / static_cast<double>(split.size()) : 0;
  double rows = std::round(options.examples_per_batch * mean / options.row_len);
  return std::max(1, static_cast<int32_t>(rows));
}

int64_t longest_example(const DatasetSplit& split) {
  int64_t longest = 0;
  for (int64_t i = 0; i < split.size(); ++i) longest = std::max(longest, split.length(i));
  return longest;
}

}  // namespace pt
