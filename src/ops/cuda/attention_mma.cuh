// Warp-level building blocks of the attention kernels: tensor-core mma.sync m16n8k16 (bf16 in, fp32
// accumulate), ldmatrix fragment loads from shared memory, cp.async tile loads, and the conversion of an
// accumulator tile into the A operand of the next product (the P of softmax(QK^T) V stays in registers).
//
// Fragment layout of m16n8k16 (PTX ISA), with g = lane / 4 and t = lane % 4:
//   A (16x16, 4 regs of 2 bf16): a0 (row g, k 2t..2t+1), a1 (row g+8, same k), a2 (row g, k 2t+8..),
//     a3 (row g+8, k 2t+8..).
//   B (16x8, 2 regs): b0 (k 2t..2t+1, col g), b1 (k 2t+8.., col g).
//   C (16x8 fp32, 4 regs): c0,c1 (row g, cols 2t, 2t+1), c2,c3 (row g+8, same cols).
// Every tile in shared memory is row-major with kLd = D + 8 elements per row: the 16-byte pad shifts
// consecutive rows across bank groups so that ldmatrix's eight row reads never conflict.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/cuda/fragments.cuh"

namespace pt::ops::cuda::attn {

constexpr int kTile = 64;  // rows per schedule item: query rows per forward block, and its key step
constexpr int kWarps = 4;  // each warp owns 16 of the tile's 64 rows
constexpr int kThreads = 32 * kWarps;

template <int D>
__host__ __device__ constexpr int ld() {
  return D + 8;
}

__device__ inline uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// Copies 16 bytes global -> shared without staging in registers; src_bytes 0 writes zeros instead.
__device__ inline void cp_async_16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Copies 4 bytes global -> shared (through L1); src_bytes 0 writes zeros instead.
__device__ inline void cp_async_4(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}

// Starts loading kRows rows of one head, rows [row0, row0 + kRows) of a segment beginning at token
// `start`, from a [T, heads, D] tensor into a kRows x ld<D>() shared tile, with the block's kBlockThreads
// threads; rows at or past `limit` (the segment's real tokens) become zeros, so masked products never meet
// stale or padded values.
template <int D, int kRows = kTile, int kBlockThreads = kThreads>
__device__ inline void load_tile_async(__nv_bfloat16* tile, const __nv_bfloat16* src, int64_t start, int row0,
                                       int limit, int heads, int head) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < kRows * kChunks; c += kBlockThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool real = row0 + r < limit;
    const int64_t token = start + (real ? row0 + r : 0);  // a valid address even when nothing is read
    cp_async_16(tile + r * ld<D>() + col, src + (token * heads + head) * D + col, real ? 16 : 0);
  }
}

// c[16 x 8N] += A * B^T with A the warp's 16 rows and B N*8 rows of row-major shared tiles, both K wide:
// the Q K^T shape, where both operands are stored with the contraction dimension contiguous.
template <int N, int K>
__device__ inline void gemm_abt(float (&c)[N][4], const __nv_bfloat16* a_rows, const __nv_bfloat16* b_rows,
                                int lda, int ldb) {
  static_assert(N % 2 == 0 && K % 16 == 0);
  const int lane = threadIdx.x % 32, m = lane / 8, r = lane % 8;
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t a[4];
    ldmatrix_x4(a, a_rows + (r + (m & 1) * 8) * lda + k0 + (m >> 1) * 8);
#pragma unroll
    for (int n = 0; n < N; n += 2) {
      uint32_t b[4];  // b[0], b[1]: cols 8n..8n+7; b[2], b[3]: cols 8n+8..8n+15
      ldmatrix_x4(b, b_rows + (n * 8 + r + (m >> 1) * 8) * ldb + k0 + (m & 1) * 8);
      mma_bf16(c[n], a, b[0], b[1]);
      mma_bf16(c[n + 1], a, b[2], b[3]);
    }
  }
}

// c[16 x 8N] += A * B with A in registers (K/16 fragments) and B a K x 8N row-major shared tile whose
// rows are the contraction dimension: the P V shape. ldmatrix.trans turns its rows into B's columns.
template <int N, int K>
__device__ inline void gemm_rb(float (&c)[N][4], const uint32_t (&a)[K / 16][4], const __nv_bfloat16* b_rows,
                               int ldb) {
  static_assert(N % 2 == 0 && K % 16 == 0);
  const int lane = threadIdx.x % 32, m = lane / 8, r = lane % 8;
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
#pragma unroll
    for (int n = 0; n < N; n += 2) {
      uint32_t b[4];  // b[0], b[1]: k halves of cols 8n..; b[2], b[3]: of cols 8n+8..
      ldmatrix_x4_trans(b, b_rows + (kk * 16 + r + (m & 1) * 8) * ldb + n * 8 + (m >> 1) * 8);
      mma_bf16(c[n], a[kk], b[0], b[1]);
      mma_bf16(c[n + 1], a[kk], b[2], b[3]);
    }
  }
}

// Rounds a 16 x K accumulator tile to bf16 A fragments: columns 16kk..16kk+15 are C tiles 2kk and 2kk+1.
template <int K>
__device__ inline void to_a_fragments(uint32_t (&a)[K / 16][4], const float (&c)[K / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    a[kk][0] = pack_bf16(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = pack_bf16(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = pack_bf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = pack_bf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

// Writes a warp's 16 x D accumulator rows as bf16 rows of a [T, heads, D] tensor, row half h (rows g and
// g + 8) times row_scale[h]: local row i (0..15) goes to token `token0 + i` when i < `rows`, as zeros when
// i >= `real` (pads, whose accumulators may hold anything).
template <int D>
__device__ inline void store_rows(__nv_bfloat16* dst, const float (&c)[D / 8][4], const float (&row_scale)[2],
                                  int64_t token0, int rows, int real, int heads, int head) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = g + 8 * half;
    if (i >= rows) continue;
    const bool keep = i < real;
    const float s = row_scale[half];
    __nv_bfloat16* row = dst + ((token0 + i) * heads + head) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(row + 8 * n) =
          __floats2bfloat162_rn(keep ? c[n][2 * half] * s : 0.0f, keep ? c[n][2 * half + 1] * s : 0.0f);
  }
}

}  // namespace pt::ops::cuda::attn
