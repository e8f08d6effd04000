// Example-length statistics for metadata.json: a log2 histogram and exact percentiles. Counts are kept
// per distinct length (at most max_len of them), so memory does not grow with the number of examples.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>

namespace pt {

class LengthStats {
 public:
  void add(uint64_t length) { ++counts_[length]; }
  // Nearest-rank percentile (0 < p <= 100); 0 when empty.
  uint64_t percentile(double p) const;
  // {"histogram_log2": [{"min", "max", "count"}...], "p50", "p90", "p99", "max"}; bucket k holds
  // lengths in [2^k, 2^(k+1)).
  nlohmann::ordered_json to_json() const;

 private:
  std::map<uint64_t, int64_t> counts_;
};

}  // namespace pt
