// MVUE24 pruning straight into cuSPARSELt's packed layout (cusparselt_pack.h), for kernels that hold a weight
// gradient's output gradient g [tokens, features] in registers: the packer that reads g (cusparselt_pack.cu)
// and the activation backwards that compute it (swiglu.cu, gelu.cu). A CTA of kThreads owns 64 features x 64
// tokens of g, the tile [64 rows, 64 columns] of A = mvue24(g)^T; thread (quad, group) holds tokens 4 group
// .. 4 group + 3 of features 4 quad .. 4 quad + 3 (loads of 8 bytes per token row, coalesced along the
// features), prunes those 4 groups into shared memory, and the CTA then stores 64 rows of 16 value words (64
// bytes each) and its four 128-byte metadata tiles, which lie consecutively in the layout (the two 32-row
// halves of a 64-row band for each of two 32-column tiles).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/sparse24_common.h"

namespace pt::ops::cuda::mvue_pack {

constexpr int kTile = 64, kGroups = kTile / 4, kThreads = 256;

struct Tile {
  uint32_t value_words[kTile][kGroups + 1];  // [feature][token group]; +1 spreads the banks
  uint8_t nibbles[kTile][kGroups];
};

// The two parts of a packed A [R, C] in cusparselt_pack.h's layout: the values, then the metadata after
// their R * C bytes.
struct Packed {
  uint4* values;
  uint32_t* meta;
};
inline Packed packed_parts(void* packed, int64_t R, int64_t C) {
  return {static_cast<uint4*>(packed), reinterpret_cast<uint32_t*>(static_cast<char*>(packed) + R * C)};
}

__device__ inline int quad() { return static_cast<int>(threadIdx.x % 16); }
__device__ inline int group() { return static_cast<int>(threadIdx.x / 16); }

// Prunes the thread's group of feature `feature` of the tile (A's row `row`), g[i] = token 4 group() + i,
// with the draw of ops::mvue24 for that row, and leaves its value pair and nibble in the tile.
__device__ inline void keep(Tile& tile, const float (&g)[4], uint32_t group_hash, int feature, int64_t row) {
  const auto k = sparse24::mvue_keep24(g, sparse24::mvue_uniform_at(group_hash, row));
  const __nv_bfloat162 pair = __floats2bfloat162_rn(k.v0, k.v1);  // .x, the lower position, in the low half
  tile.value_words[feature][group()] = *reinterpret_cast<const uint32_t*>(&pair);
  tile.nibbles[feature][group()] = static_cast<uint8_t>(k.i0 | k.i1 << 2);
}

// Stores the tile (after a __syncthreads) as rows row0 .. row0 + 63 and columns col0 .. col0 + 63 of A [R, C]
// (row0 and col0 multiples of 64), values and meta as in cusparselt_pack.h.
__device__ inline void store(const Tile& tile, int64_t row0, int64_t col0, int64_t C,
                             uint4* __restrict__ values, uint32_t* __restrict__ meta) {
  {  // row f: its 16 words of this tile, four per thread
    const int f = static_cast<int>(threadIdx.x / 4), w = static_cast<int>(threadIdx.x % 4 * 4);
    const auto& v = tile.value_words[f];
    values[((row0 + f) * C / 4 + col0 / 4 + w) / 4] = make_uint4(v[w], v[w + 1], v[w + 2], v[w + 3]);
  }
  if (threadIdx.x < kTile * kGroups / 8) {  // one metadata word (8 nibbles) per thread
    // Word w of the CTA's 512 bytes: tile w / 32 is (32-column tile) * 2 + (32-row half); in a tile, byte
    // 4 (w % 32) + j holds group 4 (j & 1) + (j >> 1) + 2 (w & 1) of the tile's columns for rows
    // (w >> 1) % 8 + 16 ((w >> 4) & 1) (low nibble) and 8 more (high nibble).
    const int w = static_cast<int>(threadIdx.x), part = w / 32, in_part = w % 32;
    const int row = 32 * (part & 1) + (in_part >> 1 & 7) + 16 * (in_part >> 4 & 1);
    const int col = 8 * (part >> 1) + 2 * (in_part & 1);
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int high = 0; high < 2; ++high)
        word |= uint32_t{tile.nibbles[row + 8 * high][col + 4 * (j & 1) + (j >> 1)]} << (8 * j + 4 * high);
    meta[(row0 / 64 * (C / 32) * 2 + col0 / 64 * 4) * 32 + w] = word;
  }
}

}  // namespace pt::ops::cuda::mvue_pack
