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

namespace {

// Calls fn(param, b, e) for each piece [b, e) of a tensor inside [begin, end), in flat order; with
// cut_at_grid, pieces are cut after the first quantization grid line inside them, so that each piece's
// blocks (counted from its start) are grid cells.
template <class Fn>
void for_each_piece(std::span<const ParamInfo> params, int64_t begin, int64_t end, bool cut_at_grid,
                    Fn&& fn) {
  for (const ParamInfo& p : params) {
    int64_t b = std::max(begin, p.offset);
    const int64_t e = std::min(end, p.offset + p.numel);
    if (b >= e) continue;
    const int64_t grid = (b + ops::kQuantBlock - 1) / ops::kQuantBlock * ops::kQuantBlock;
    if (cut_at_grid && b < grid && grid < e) {
      fn(p, b, grid);
      b = grid;
    }
    fn(p, b, e);
  }
}

}  // namespace

int64_t range_quant_blocks(std::span<const ParamInfo> params, int64_t begin, int64_t end) {
  int64_t blocks = 0;
  for_each_piece(params, begin, end, true,
                 [&](const ParamInfo&, int64_t b, int64_t e) { blocks += ops::quant_blocks(e - b); });
  return blocks;
}

std::vector<ops::AdamWTensor> adamw_range(std::span<const ParamInfo> params, int64_t begin, int64_t end,
                                          const Tensor& masters, const Tensor& flat_grads,
                                          const RangeMoments& moments) {
  if (masters.numel() < end - begin || moments.m.numel() < end - begin || moments.v.numel() < end - begin)
    fail("adamw_range: masters and moments of {}, {} and {} elements cannot hold the range [{}, {})",
         masters.numel(), moments.m.numel(), moments.v.numel(), begin, end);
  const bool q8 = ops::moment_format_of(moments.m.dtype) == ops::MomentFormat::q8;
  if (q8 &&
      (begin % ops::kQuantBlock != 0 || moments.m_absmax.numel() < range_quant_blocks(params, begin, end) ||
       moments.v_absmax.numel() < range_quant_blocks(params, begin, end)))
    fail(
        "adamw_range: 8-bit moments of the range [{}, {}) need it to start on the {}-element grid and {} "
        "absmax values each",
        begin, end, ops::kQuantBlock, range_quant_blocks(params, begin, end));
  std::vector<ops::AdamWTensor> out;
  int64_t block = 0;
  for_each_piece(params, begin, end, q8, [&](const ParamInfo& p, int64_t b, int64_t e) {
    if (!flat_grads.empty() && e > flat_grads.numel())
      fail("adamw_range: parameter {} ends at {}, past the flat gradients {}", p.name, e, flat_grads.str());
    ops::AdamWTensor t{
        masters.elements(b - begin, e - b), flat_grads.empty() ? Tensor() : flat_grads.elements(b, e - b),
        moments.m.elements(b - begin, e - b), moments.v.elements(b - begin, e - b), p.weight_decay()};
    if (q8) {
      const int64_t blocks = ops::quant_blocks(e - b);
      t.m_absmax = moments.m_absmax.elements(block, blocks);
      t.v_absmax = moments.v_absmax.elements(block, blocks);
      block += blocks;
    }
    t.offset = b;
    out.push_back(t);
  });
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
