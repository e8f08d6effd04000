#include "data/prepare/length_stats.h"

#include <bit>
#include <cmath>

namespace pt {

uint64_t LengthStats::percentile(double p) const {
  int64_t total = 0;
  for (const auto& [length, n] : counts_) total += n;
  if (total == 0) return 0;
  auto rank = static_cast<int64_t>(std::ceil(p / 100.0 * static_cast<double>(total)));
  int64_t seen = 0;
  for (const auto& [length, n] : counts_) {
    seen += n;
    if (seen >= rank) return length;
  }
  return counts_.rbegin()->first;
}

nlohmann::ordered_json LengthStats::to_json() const {
  std::map<int, int64_t> buckets;
  for (const auto& [length, n] : counts_)
    buckets[length == 0 ? 0 : static_cast<int>(std::bit_width(length)) - 1] += n;
  auto histogram = nlohmann::ordered_json::array();
  for (const auto& [k, n] : buckets)
    histogram.push_back({{"min", uint64_t{1} << k}, {"max", (uint64_t{2} << k) - 1}, {"count", n}});
  return {{"histogram_log2", histogram},
          {"p50", percentile(50)},
          {"p90", percentile(90)},
          {"p99", percentile(99)},
          {"max", counts_.empty() ? 0 : counts_.rbegin()->first}};
}

}  // namespace pt
