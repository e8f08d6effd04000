// What the sm_90a (wgmma) attention kernels share: tiles of one head of a [T, heads, D] tensor copied into
// the 128-byte swizzled shared layout of ops/cuda/wgmma.cuh.
#pragma once

#include "ops/cuda/wgmma.cuh"

namespace pt::ops::cuda::attn {

#if PT_SM90A

// Starts copying rows [row0, row0 + kRows) of one head of a [T, heads, D] tensor, segment-relative to the
// token `start`, into the swizzled tile at shared address `tile` with all kThreads threads of the block;
// rows at or past `limit` (the segment's real tokens) become zeros, so that masked products never meet
// another segment's values or NaN.
template <int D, int kRows, int kThreads>
__device__ inline void load_tile(uint32_t tile, const __nv_bfloat16* src, int64_t start, int row0, int limit,
                                 int heads, int head) {
  constexpr int kChunks = D / 8;
  static_assert(kRows * kChunks % kThreads == 0);
#pragma unroll
  for (int i = 0; i < kRows * kChunks / kThreads; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads, r = c / kChunks, chunk = c % kChunks;
    const bool real = row0 + r < limit;
    const int64_t token = start + (real ? row0 + r : 0);  // a valid address even when nothing is read
    sm90::cp_async_16(tile + sm90::swizzled_offset(r, chunk, kRows),
                      src + (token * heads + head) * D + chunk * 8, real ? 16 : 0);
  }
}

#endif  // PT_SM90A

}  // namespace pt::ops::cuda::attn
