// ZeRO-1 shard math. The flat fp32 buffers in ParameterLayout order are cut into world_size contiguous
// shards of equal size (the last padded; the size a multiple of kShardAlign elements so every shard starts
// aligned and holds whole quantization blocks): rank r owns [r * shard, (r + 1) * shard) and keeps the fp32 master weights and the AdamW
// moments of that range only. The gradient buffer and the working copy of the weights in the compute dtype
// are allocated padded to world_size * shard elements (the padding stays zero), which is what
// reduce-scatter and all-gather need. A shard cuts tensors anywhere, so the per-shard
// AdamW entries are the parameters' pieces inside it, each with its tensor's decay flag.
//
// 8-bit AdamW moments (ops::MomentFormat::q8) are quantized in blocks that are the cells of a grid of
// ops::kQuantBlock elements over the flat buffer, cut at tensor boundaries: tensors and grid do not depend
// on the rank count, and shard boundaries lie on the grid, so any number of ranks (or none) quantizes the
// same blocks and computes the same numbers.
//
// Checkpoints hold full, unpadded buffers, so any number of ranks can load them: each rank slices its
// shard out on load (slice_shard) and the shards are gathered back for saving.
#pragma once

#include "core/tensor.h"
#include "model/parameters.h"
#include "ops/adamw.h"

#include <cstdint>
#include <span>
#include <vector>

namespace pt::dist {

inline constexpr int64_t kShardAlign = ops::kQuantBlock;  // elements: 1 KiB of f32

struct ShardLayout {
  int64_t total = 0;  // real elements (ParameterLayout::total())
  int world_size = 1;
  int64_t shard = 0;  // elements per rank, padding included

  int64_t padded_total() const { return shard * world_size; }
  int64_t begin(int rank) const { return shard * rank; }
  // Real (unpadded) elements of rank's shard: shard, less on the last ranks, possibly 0.
  int64_t real_count(int rank) const;
  // Per rank, how many elements of the flat range [begin, end) fall in its shard (they sum to end - begin).
  std::vector<int64_t> counts_in(int64_t begin, int64_t end) const;
};

ShardLayout make_shard_layout(int64_t total, int world_size);

// The AdamW moments of a flat range: m and v of its elements (f32, bf16 or u8), and with u8 codes the
// absmax of each quantization block (range_quant_blocks of them, in flat order).
struct RangeMoments {
  Tensor m, v, m_absmax{}, v_absmax{};
};

// Quantization blocks of the flat range [begin, end) (begin on the grid): the grid cells each tensor
// touches, summed.
int64_t range_quant_blocks(std::span<const ParamInfo> params, int64_t begin, int64_t end);

// AdamW entries for the flat range [begin, end) of the parameters: every tensor's piece inside it, with its
// decay flag; with 8-bit moments a piece is cut where the quantization grid crosses it, so each entry's
// blocks are grid cells. masters and moments hold the range only (element 0 is flat offset `begin`); grads
// is the flat buffer indexed by layout offset (empty: entries without gradients, set per step); each entry's
// offset is its flat offset. All on one device; grads f32, masters f32 or bf16 (no fp32 masters).
std::vector<ops::AdamWTensor> adamw_range(std::span<const ParamInfo> params, int64_t begin, int64_t end,
                                          const Tensor& masters, const Tensor& flat_grads,
                                          const RangeMoments& moments);

// Host-side resharding for checkpoints: rank's shard (shard elements, zero padding) out of a full buffer of
// `total` elements, and the full buffer back from every rank's shard.
std::vector<float> slice_shard(std::span<const float> full, const ShardLayout& layout, int rank);
std::vector<float> join_shards(std::span<const std::vector<float>> shards, const ShardLayout& layout);

}  // namespace pt::dist
