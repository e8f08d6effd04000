#include "distributed/balance.h"

#include "core/error.h"

#include <algorithm>
#include <numeric>
#include <queue>

namespace pt::dist {

int64_t TokenBalance::max_tokens() const {
  return tokens.empty() ? 0 : *std::max_element(tokens.begin(), tokens.end());
}

double TokenBalance::mean_tokens() const {
  if (tokens.empty()) return 0;
  return static_cast<double>(std::reduce(tokens.begin(), tokens.end(), int64_t{0})) /
         static_cast<double>(tokens.size());
}

double TokenBalance::imbalance() const {
  const double mean = mean_tokens();
  return mean > 0 ? static_cast<double>(max_tokens()) / mean : 1.0;
}

std::vector<int64_t> TokenBalance::share(int rank) const {
  std::vector<int64_t> positions;
  for (size_t i = 0; i < rank_of.size(); ++i)
    if (rank_of[i] == rank) positions.push_back(static_cast<int64_t>(i));
  return positions;
}

TokenBalance balance_by_tokens(std::span<const int64_t> lengths, int world_size) {
  if (world_size < 1) fail("balance_by_tokens: world size must be at least 1, got {}", world_size);
  TokenBalance b;
  b.rank_of.assign(lengths.size(), 0);
  b.tokens.assign(static_cast<size_t>(world_size), 0);
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return lengths[a] > lengths[c]; });
  // Min-heap of (load, rank): the least-loaded rank, the lower one on ties.
  using Load = std::pair<int64_t, int>;
  std::priority_queue<Load, std::vector<Load>, std::greater<>> ranks;
  for (int r = 0; r < world_size; ++r) ranks.emplace(0, r);
  for (int64_t i : order) {
    if (lengths[i] < 0) fail("balance_by_tokens: example {} has negative length {}", i, lengths[i]);
    auto [load, rank] = ranks.top();
    ranks.pop();
    b.rank_of[static_cast<size_t>(i)] = rank;
    b.tokens[static_cast<size_t>(rank)] = load + lengths[i];
    ranks.emplace(load + lengths[i], rank);
  }
  return b;
}

}  // namespace pt::dist
