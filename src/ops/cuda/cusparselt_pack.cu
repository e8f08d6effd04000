// cusparselt_pack24 (cusparselt_pack.h). A CTA packs a 64 x 32 tile of A; each thread takes rows r and
// r + 8 of it (r % 16 < 8) and 16 columns, so the two nibbles of every metadata byte (rows r and r + 8, the
// layout's lowest bit) are its own, and the thread holding the other 16 columns (lane ^ 1, the next bit)
// interleaves with it into 8 consecutive bytes.
#include "ops/cuda/cusparselt_pack.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "ops/cuda/check.h"
#include "ops/cuda/sparse24_encode.cuh"
#include "ops/cuda/stream.h"
#include "ops/sparse24_common.h"

namespace pt::ops::cuda {

namespace {

constexpr int kTileR = 64, kTileC = 32, kThreads = 64;
constexpr int kPitch = kTileR + 8;  // elements per row of the transposed tile (16-byte aligned rows)

__device__ inline void unpack8(uint4 q, uint16_t* v) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = static_cast<uint16_t>(w[k / 2] >> (16 * (k % 2)));
}

// v[h][j] holds g's token col0 + j of feature row + 8 h (A = g^T): each group of 4 tokens is replaced by its
// MVUE24 output, drawn and computed in fp32 as mvue_kernel (ops/cuda/sparse24.cu) does, rounded to bf16.
__device__ inline void mvue_tile_rows(uint16_t (&v)[2][16], uint64_t seed, int64_t row, int64_t col0) {
  const uint64_t seed_hash = sparse24::mvue_seed_hash(seed);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint64_t group_hash = sparse24::mvue_group_hash(seed_hash, col0 / 4 + q);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float in[4], out[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) in[i] = __uint_as_float(uint32_t{v[h][4 * q + i]} << 16);
      sparse24::mvue_group24(in, sparse24::mvue_uniform_at(group_hash, row + 8 * h), out);
#pragma unroll
      for (int i = 0; i < 4; ++i) v[h][4 * q + i] = __bfloat16_as_ushort(__float2bfloat16_rn(out[i]));
    }
  }
}

// kMvue (with kTranspose only): prune A's rows by MVUE24 before packing, drawing with `seed`.
template <bool kTranspose, bool kMvue>
__global__ void __launch_bounds__(kThreads)
    pack_kernel(const uint16_t* __restrict__ src, int64_t ld, int64_t R, int64_t C, uint64_t seed,
                uint4* __restrict__ values, uint2* __restrict__ meta) {
  static_assert(kTranspose || !kMvue, "MVUE prunes along the stored gradient's rows: A^T is stored");
  const int64_t tile_r = int64_t{blockIdx.y} * kTileR, tile_c = int64_t{blockIdx.x} * kTileC;
  const int half = threadIdx.x % 2;                              // columns 16 half .. of the tile
  const int r = threadIdx.x / 2 / 8 * 16 + threadIdx.x / 2 % 8;  // rows r and r + 8 of the tile
  uint16_t v[2][16];
  if constexpr (kTranspose) {
    // A's tile is src's [32 x 64] tile at (tile_c, tile_r), read in coalesced rows and turned in smem.
    __shared__ alignas(16) uint16_t tile[kTileC][kPitch];
    for (int i = threadIdx.x; i < kTileC * kTileR / 8; i += kThreads) {
      const int row = i / (kTileR / 8), col = i % (kTileR / 8) * 8;
      *reinterpret_cast<uint4*>(&tile[row][col]) =
          *reinterpret_cast<const uint4*>(src + (tile_c + row) * ld + tile_r + col);
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 16; ++j) v[h][j] = tile[16 * half + j][r + 8 * h];
    if constexpr (kMvue) mvue_tile_rows(v, seed, tile_r + r, tile_c + 16 * half);
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const auto* p = reinterpret_cast<const uint4*>(src + (tile_r + r + 8 * h) * ld + tile_c + 16 * half);
      unpack8(p[0], v[h]);
      unpack8(p[1], v[h] + 8);
    }
  }
  uint32_t bytes = 0;  // byte q: the nibbles of group q of row r (low) and of row r + 8 (high)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    unsigned bits = 0;
    int overfull = 0;  // the caller guarantees 2:4
    const uint4 packed = encode16(v[h], nonzero_bits16(v[h]), bits, overfull);
    values[((tile_r + r + 8 * h) * C + tile_c + 16 * half) / 16] = packed;  // 8 values per uint4
#pragma unroll
    for (int q = 0; q < 4; ++q) bytes |= (bits >> (4 * q) & 0xFu) << (8 * q + 4 * h);
  }
  const uint32_t other = __shfl_xor_sync(0xffffffffu, bytes, 1);
  if (half == 0) {
    const int64_t row = tile_r + r;
    const int64_t t = row / 64 * (C / 32) * 2 + tile_c / 32 * 2 + row / 32 % 2;
    const int64_t byte = t * 128 + row % 8 * 8 + row / 16 % 2 * 64;
    // bytes 2q and 2q + 1: group q of columns 0-15 (ours) and of 16-31 (the neighbour's)
    meta[byte / 8] = make_uint2(__byte_perm(bytes, other, 0x5140), __byte_perm(bytes, other, 0x7362));
  }
}

template <bool kTranspose, bool kMvue>
void launch_pack(const char* op, const void* src, int64_t ld, int64_t R, int64_t C, uint64_t seed,
                 void* dst) {
  if (!cusparselt_pack_fits(R, C) || ld % 8 != 0 || R / kTileR > 65535)
    throw std::invalid_argument(std::string(op) + ": A must be [R, C] with R and C multiples of 64, ld of 8");
  auto* values = static_cast<uint4*>(dst);
  auto* meta = reinterpret_cast<uint2*>(static_cast<char*>(dst) + R * C);
  const dim3 grid(static_cast<unsigned>(C / kTileC), static_cast<unsigned>(R / kTileR));
  pack_kernel<kTranspose, kMvue><<<grid, kThreads, 0, current_stream()>>>(static_cast<const uint16_t*>(src),
                                                                          ld, R, C, seed, values, meta);
  PT_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool cusparselt_pack_fits(int64_t R, int64_t C) { return R > 0 && C > 0 && R % 64 == 0 && C % 64 == 0; }

void cusparselt_pack24(const void* src, int64_t ld, bool transpose, int64_t R, int64_t C, void* dst) {
  if (transpose)
    launch_pack<true, false>("cusparselt_pack24", src, ld, R, C, 0, dst);
  else
    launch_pack<false, false>("cusparselt_pack24", src, ld, R, C, 0, dst);
}

void cusparselt_pack24_mvue(const void* src, int64_t ld, int64_t R, int64_t C, uint64_t seed, void* dst) {
  launch_pack<true, true>("cusparselt_pack24_mvue", src, ld, R, C, seed, dst);
}

}  // namespace pt::ops::cuda
