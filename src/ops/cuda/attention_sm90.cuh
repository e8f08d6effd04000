// What the sm_90a (wgmma) attention kernels share: tiles of one head of a [T, heads, D] tensor copied into
// the 128-byte swizzled shared layout of ops/cuda/wgmma.cuh by a producer's TMA copies, and register
// fragments stored into it.
#pragma once

#include "ops/cuda/elements.cuh"
#include "ops/cuda/wgmma.cuh"

namespace pt::ops::cuda::attn {

#if PT_SM90A

// Copies rows token .. token + kRows - 1 of one head into the swizzled tile at `tile` with TMA (`map`: the
// tensor's head_tile_map of kRows-row boxes), one box per 64 columns; the copies complete on `bar`, whose
// transaction count the caller raised by kRows * D * 2 bytes. Rows past the tensor's end arrive as zeros;
// rows past the segment's real tokens hold whatever follows it, which the kernels mask.
template <int D, int kRows>
__device__ inline void tma_tile(uint32_t tile, const void* map, int token, int head, uint32_t bar) {
#pragma unroll
  for (int half = 0; half < D / 64; ++half)
    sm90::tma_load_3d(tile + static_cast<uint32_t>(half) * kRows * 128, map, 64 * half, head, token, bar);
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

// The epilogue's two halves: a warpgroup's 64 x D accumulator (m64nDk16 f32: acc[4 i + 2 h + e] is row
// 16 w + g + 8 h, column 8 i + 2 t + e), each row h times factor[h], goes to rows first_row .. first_row + 63
// of a swizzled tile of `rows` rows as bf16, and then leaves it for a [T, heads, D] tensor in whole 16-byte
// chunks, a warp's store two full rows. Stored straight from the fragments, a warp's store would be 4-byte
// pieces of eight rows, several times the memory transactions. The eight rows of a quad group fall into
// distinct swizzled chunks, so the fragment stores are conflict-free. `tid` is the thread's index in the
// block, passed in so that callers in a loop can hide it from the optimizer (hoisted offsets would spill).
template <int D>
__device__ inline void stage_accumulator(uint32_t tile, int rows, int first_row, const float (&acc)[D / 2],
                                         const float (&factor)[2], int tid) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = first_row + tid / 32 % 4 * 16 + tid % 32 / 4 + 8 * h;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const uint32_t at = tile + sm90::swizzled_offset(row, i, rows) + 4 * (tid % 4);
      const uint32_t x = pack_bf16(acc[4 * i + 2 * h] * factor[h], acc[4 * i + 2 * h + 1] * factor[h]);
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(x) : "memory");
    }
  }
}

// Copies rows first_row .. first_row + 63 of the tile (after a barrier over the threads that staged them) to
// tokens start + row0 + r of head `head`, for r < count; the warpgroup's 128 threads, tid as above.
template <int D>
__device__ inline void copy_rows_out(uint32_t tile, int rows, int first_row, __nv_bfloat16* dst,
                                     int64_t start, int count, int heads, int head, int tid) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int c = tid % 128; c < 64 * kChunks; c += 128) {
    const int r = c / kChunks, chunk = c % kChunks;
    if (r >= count) continue;
    uint4 x;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w)
                 : "r"(tile + sm90::swizzled_offset(first_row + r, chunk, rows))
                 : "memory");
    *reinterpret_cast<uint4*>(dst + ((start + r) * heads + head) * D + chunk * 8) = x;
  }
}

// Waits for the other threads of the calling warpgroup (named barriers 1 and 2; 0 is __syncthreads).
__device__ inline void warpgroup_barrier(int wg) {
  if (wg == 0)
    asm volatile("bar.sync 1, 128;\n" ::: "memory");
  else
    asm volatile("bar.sync 2, 128;\n" ::: "memory");
}

#endif  // PT_SM90A

}  // namespace pt::ops::cuda::attn
