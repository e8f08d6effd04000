// What the sm_90a (wgmma) attention kernels share: tiles of one head of a [T, heads, D] tensor copied into
// the 128-byte swizzled shared layout of ops/cuda/wgmma.cuh, and register fragments stored into it.
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

// Stores a warpgroup's 64 x 64 register-A fragments (to_a_fragments of a 64 x 64 accumulator) as rows
// first_row .. first_row + 63 of a swizzled 64-column tile of `rows` rows, for a later MN-major read
// (the backward's dS^T). Fragment [kk][r] of thread (warp w, g, t) is row 16 w + g + 8 (r % 2), columns
// 16 kk + 8 (r / 2) + 2 t and + 1: chunk 2 kk + r / 2, bytes 4 t of it. The eight rows of a quad group
// fall into distinct swizzled chunks, so a warp's 32 stores hit 32 banks.
__device__ inline void store_a_fragments(uint32_t tile, int rows, int first_row, const uint32_t (&f)[4][4]) {
  const int warp = static_cast<int>(threadIdx.x) / 32 % 4, lane = static_cast<int>(threadIdx.x) % 32;
  const int row = first_row + 16 * warp + lane / 4;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t at =
          tile + sm90::swizzled_offset(row + 8 * (r % 2), 2 * kk + r / 2, rows) + 4 * (lane % 4);
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(f[kk][r]) : "memory");
    }
}

#endif  // PT_SM90A

}  // namespace pt::ops::cuda::attn
