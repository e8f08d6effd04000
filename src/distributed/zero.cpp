#include "distributed/zero.h"

#include "core/error.h"

#include <algorithm>

namespace pt::dist {

int64_t ShardLayout::real_count(int rank) const { return std::clamp<int64_t>(total - begin(rank), 0, shard); }

std::vector<int64_t> ShardLayout::counts_in(int64_t b, int64_t e) const {
  std::vector<int64_t> counts(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r)
    counts[static_cast<size_t>(r)] =
        std::max<int64_t>(0, std::min(e, begin(r) + shard) - std::max(b, begin(r)));
  return counts;
}

ShardLayout make_shard_layout(int64_t total, int world_size) {
  if (world_size < 1) fail("shard layout: world size must be at least 1, got {}", world_size);
  if (total < 0) fail("shard layout: negative element count {}", total);
  const int64_t per_rank = (total + world_size - 1) / world_size;
  return {total, world_size,
          std::max<int64_t>(kShardAlign, (per_rank + kShardAlign - 1) / kShardAlign * kShardAlign)};
}

std::vector<ops::AdamWTensor> adamw_range(std::span<const ParamInfo> params, int64_t begin, int64_t end,
                                          const Tensor& masters, const Tensor& flat_grads, const Tensor& m,
                                          const Tensor& v) {
  if (masters.numel() < end - begin || m.numel() < end - begin || v.numel() < end - begin)
    fail("adamw_range: masters and moments of {}, {} and {} elements cannot hold the range [{}, {})",
         masters.numel(), m.numel(), v.numel(), begin, end);
  auto at = [](const Tensor& t, int64_t offset, int64_t n) {
    return Tensor(t.ptr<float>() + offset, DType::f32, {n}, t.device);
  };
  std::vector<ops::AdamWTensor> out;
  for (const ParamInfo& p : params) {
    const int64_t b = std::max(begin, p.offset), e = std::min(end, p.offset + p.numel);
    if (b >= e) continue;
    if (e > flat_grads.numel())
      fail("adamw_range: parameter {} ends at {}, past the flat gradients {}", p.name, e, flat_grads.str());
    out.push_back({at(masters, b - begin, e - b), at(flat_grads, b, e - b), at(m, b - begin, e - b),
                   at(v, b - begin, e - b), p.weight_decay()});
  }
  return out;
}

std::vector<float> slice_shard(std::span<const float> full, const ShardLayout& layout, int rank) {
  if (std::ssize(full) != layout.total)
    fail("checkpoint buffer has {} elements, the model {}; it belongs to another model", full.size(),
         layout.total);
  std::vector<float> shard(static_cast<size_t>(layout.shard), 0.0f);
  const auto first = full.begin() + layout.begin(rank);
  std::copy(first, first + layout.real_count(rank), shard.begin());
  return shard;
}

std::vector<float> join_shards(std::span<const std::vector<float>> shards, const ShardLayout& layout) {
  if (std::ssize(shards) != layout.world_size)
    fail("join_shards: {} shards for {} ranks", shards.size(), layout.world_size);
  std::vector<float> full(static_cast<size_t>(layout.total));
  for (int r = 0; r < layout.world_size; ++r) {
    const auto& s = shards[static_cast<size_t>(r)];
    if (std::ssize(s) != layout.shard)
      fail("join_shards: shard {} has {} elements, not {}", r, s.size(), layout.shard);
    std::copy(s.begin(), s.begin() + layout.real_count(r), full.begin() + layout.begin(r));
  }
  return full;
}

}  // namespace pt::dist
