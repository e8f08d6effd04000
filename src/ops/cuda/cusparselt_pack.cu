// cusparselt_pack24 and cusparselt_pack24_mvue (cusparselt_pack.h).
#include "ops/cuda/cusparselt_pack.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "ops/cuda/check.h"
#include "ops/cuda/mvue_pack.cuh"
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

// A CTA packs a 64 x 32 tile of A; each thread takes rows r and r + 8 of it (r % 16 < 8) and 16 columns,
// so the two nibbles of every metadata byte (rows r and r + 8, the layout's lowest bit) are its own, and
// the thread holding the other 16 columns (lane ^ 1, the next bit) interleaves with it into 8 consecutive
// bytes.
template <bool kTranspose>
__global__ void __launch_bounds__(kThreads)
    pack_kernel(const uint16_t* __restrict__ src, int64_t ld, int64_t R, int64_t C,
                uint4* __restrict__ values, uint2* __restrict__ meta) {
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

// The weight gradient's operand A = mvue24(g)^T [R, C] from g [C tokens, R features], one 64 x 64 tile of
// A per CTA (ops/cuda/mvue_pack.cuh).
__global__ void __launch_bounds__(mvue_pack::kThreads)
    pack_mvue_kernel(const uint16_t* __restrict__ src, int64_t ld, int64_t C, uint32_t seed_hash,
                     uint4* __restrict__ values, uint32_t* __restrict__ meta) {
  using mvue_pack::kTile;
  __shared__ mvue_pack::Tile tile;
  const int64_t token0 = int64_t{blockIdx.x} * kTile, feature0 = int64_t{blockIdx.y} * kTile;
  const int quad = mvue_pack::quad(), group = mvue_pack::group();
  uint2 rows[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    rows[i] = *reinterpret_cast<const uint2*>(src + (token0 + 4 * group + i) * ld + feature0 + 4 * quad);
  const uint32_t group_hash = sparse24::mvue_group_hash(seed_hash, token0 / 4 + group);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float g[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t word = j < 2 ? rows[i].x : rows[i].y;
      g[i] = __uint_as_float(j % 2 ? word & 0xFFFF0000u : word << 16);
    }
    mvue_pack::keep(tile, g, group_hash, 4 * quad + j, feature0 + 4 * quad + j);
  }
  __syncthreads();
  mvue_pack::store(tile, feature0, token0, C, values, meta);
}

void check_pack_shape(const char* op, int64_t ld, int64_t R, int64_t C) {
  if (!cusparselt_pack_fits(R, C) || ld % 8 != 0 || R / kTileR > 65535)
    throw std::invalid_argument(std::string(op) + ": A must be [R, C] with R and C multiples of 64, ld of 8");
}

}  // namespace

bool cusparselt_pack_fits(int64_t R, int64_t C) { return R > 0 && C > 0 && R % 64 == 0 && C % 64 == 0; }

void cusparselt_pack24(const void* src, int64_t ld, bool transpose, int64_t R, int64_t C, void* dst) {
  check_pack_shape("cusparselt_pack24", ld, R, C);
  auto* values = static_cast<uint4*>(dst);
  auto* meta = reinterpret_cast<uint2*>(static_cast<char*>(dst) + R * C);
  const dim3 grid(static_cast<unsigned>(C / kTileC), static_cast<unsigned>(R / kTileR));
  const auto* s = static_cast<const uint16_t*>(src);
  if (transpose)
    pack_kernel<true><<<grid, kThreads, 0, current_stream()>>>(s, ld, R, C, values, meta);
  else
    pack_kernel<false><<<grid, kThreads, 0, current_stream()>>>(s, ld, R, C, values, meta);
  PT_CUDA_CHECK_LAUNCH();
}

void cusparselt_pack24_mvue(const void* src, int64_t ld, int64_t R, int64_t C, uint64_t seed, void* dst) {
  check_pack_shape("cusparselt_pack24_mvue", ld, R, C);
  const mvue_pack::Packed a = mvue_pack::packed_parts(dst, R, C);
  const dim3 grid(static_cast<unsigned>(C / mvue_pack::kTile), static_cast<unsigned>(R / mvue_pack::kTile));
  pack_mvue_kernel<<<grid, mvue_pack::kThreads, 0, current_stream()>>>(
      static_cast<const uint16_t*>(src), ld, C, sparse24::mvue_seed_hash(seed), a.values, a.meta);
  PT_CUDA_CHECK_LAUNCH();
}

}  // namespace pt::ops::cuda
