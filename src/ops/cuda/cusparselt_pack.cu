// cusparselt_pack24 and cusparselt_pack24_mvue (cusparselt_pack.h).
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

// The weight gradient's operand A = mvue24(g)^T [R, C] from g [C tokens, R features]. A CTA takes 64
// tokens x 64 features of g: each thread loads 4 tokens x 4 features (8 bytes of each of 4 rows, a warp's
// loads coalesced along the features), prunes its 4 groups in registers and leaves each group's value pair
// and nibble in shared memory; the CTA then stores 64 rows of 16 value words (64 bytes each) and its four
// 128-byte metadata tiles, which are consecutive in the layout (two 32-row halves of 64 rows for each of
// two 32-column tiles).
constexpr int kMvueTile = 64, kMvueThreads = 256;

__global__ void __launch_bounds__(kMvueThreads)
    pack_mvue_kernel(const uint16_t* __restrict__ src, int64_t ld, int64_t C, uint32_t seed_hash,
                     uint4* __restrict__ values, uint32_t* __restrict__ meta) {
  constexpr int kGroups = kMvueTile / 4;
  __shared__ uint32_t value_words[kMvueTile][kGroups + 1];  // [feature][token group]; +1 spreads the banks
  __shared__ uint8_t nibbles[kMvueTile][kGroups];
  const int64_t token0 = int64_t{blockIdx.x} * kMvueTile, feature0 = int64_t{blockIdx.y} * kMvueTile;
  const int quad = threadIdx.x % 16, group = threadIdx.x / 16;  // features 4 quad.., tokens 4 group..
  uint2 rows[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    rows[i] = *reinterpret_cast<const uint2*>(src + (token0 + 4 * group + i) * ld + feature0 + 4 * quad);
  const uint32_t group_hash = sparse24::mvue_group_hash(seed_hash, token0 / 4 + group);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float in[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t word = j < 2 ? rows[i].x : rows[i].y;
      in[i] = __uint_as_float(j % 2 ? word & 0xFFFF0000u : word << 16);
    }
    const int feature = 4 * quad + j;
    const auto k = sparse24::mvue_keep24(in, sparse24::mvue_uniform_at(group_hash, feature0 + feature));
    const __nv_bfloat162 pair = __floats2bfloat162_rn(k.v0, k.v1);  // .x, the lower position, in the low half
    value_words[feature][group] = *reinterpret_cast<const uint32_t*>(&pair);
    nibbles[feature][group] = static_cast<uint8_t>(k.i0 | k.i1 << 2);
  }
  __syncthreads();

  {  // A row (feature) f: its 16 words of this tile, four per thread
    const int f = threadIdx.x / 4, w = threadIdx.x % 4 * 4;
    values[((feature0 + f) * C / 4 + token0 / 4 + w) / 4] =
        make_uint4(value_words[f][w], value_words[f][w + 1], value_words[f][w + 2], value_words[f][w + 3]);
  }
  if (threadIdx.x < kMvueTile * kGroups / 8) {  // one metadata word (8 nibbles) per thread
    // Word w of the CTA's 512 bytes: tile w / 32 is (32-column tile) * 2 + (32-row half); in a tile, byte
    // 4 (w % 32) + j holds group 4 (j & 1) + (j >> 1) + 2 (w & 1) of the tile's columns for rows
    // (w >> 1) % 8 + 16 ((w >> 4) & 1) (low nibble) and 8 more (high nibble).
    const int w = threadIdx.x, tile = w / 32, in_tile = w % 32;
    const int row = 32 * (tile & 1) + (in_tile >> 1 & 7) + 16 * (in_tile >> 4 & 1);
    const int col = 8 * (tile >> 1) + 2 * (in_tile & 1);
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int high = 0; high < 2; ++high)
        word |= uint32_t{nibbles[row + 8 * high][col + 4 * (j & 1) + (j >> 1)]} << (8 * j + 4 * high);
    meta[(int64_t{blockIdx.y} * (C / 32) * 2 + int64_t{blockIdx.x} * 4) * 32 + w] = word;
  }
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
  auto* values = static_cast<uint4*>(dst);
  auto* meta = reinterpret_cast<uint32_t*>(static_cast<char*>(dst) + R * C);
  const dim3 grid(static_cast<unsigned>(C / kMvueTile), static_cast<unsigned>(R / kMvueTile));
  pack_mvue_kernel<<<grid, kMvueThreads, 0, current_stream()>>>(static_cast<const uint16_t*>(src), ld, C,
                                                                sparse24::mvue_seed_hash(seed), values, meta);
  PT_CUDA_CHECK_LAUNCH();
}

}  // namespace pt::ops::cuda
