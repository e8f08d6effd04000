// The rotary embedding's angles for the kernels that rotate (rope.cu, head_norm_rope.cu): the frequency table
// travels by value in the kernel's parameters (2 KB of their 4 KB, so a launch needs no device buffer), and
// a block computes the scaled cos and sin of its tokens' angles into shared memory in double, as the cpu
// does, before its threads rotate.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/rope.h"

namespace pt::ops::cuda {

constexpr int kMaxRopeHalf = 256;  // head dims up to 512

struct RopeTable {
  double inv_freq[kMaxRopeHalf];
  double scale;
};

inline RopeTable rope_table(const RopeFrequencies& freq) {
  RopeTable table{};
  std::copy(freq.inv_freq.begin(), freq.inv_freq.end(), table.inv_freq);
  table.scale = freq.attention_scale;
  return table;
}

// Shared bytes rope_angles needs for `tokens` tokens of half = D / 2 pairs.
inline int64_t rope_angles_bytes(int64_t tokens, int64_t half) {
  return half * int64_t{sizeof(double)} + 2 * tokens * half * int64_t{sizeof(float)};
}

// Fills cos_t and sin_t [tokens][half] (at the start of `shared`, past a copy of inv_freq) for tokens t0 ..
// t0 + tokens - 1; sin carries `sign` (-1: the transposed rotation). Every thread of the block must call it.
__device__ inline void rope_angles(const RopeTable& f, const int32_t* __restrict__ pos, int64_t t0,
                                   int tokens, int half, float sign, double* shared, float*& cos_t,
                                   float*& sin_t) {
  double* inv_freq = shared;
  cos_t = reinterpret_cast<float*>(inv_freq + half);
  sin_t = cos_t + tokens * half;
  for (int i = threadIdx.x; i < half; i += blockDim.x) inv_freq[i] = f.inv_freq[i];
  __syncthreads();
  for (int j = threadIdx.x; j < tokens * half; j += blockDim.x) {
    const int token = j / half, i = j - token * half;
    double s, c;
    sincos(double(pos[t0 + token]) * inv_freq[i], &s, &c);
    cos_t[j] = float(c * f.scale);
    sin_t[j] = sign * float(s * f.scale);
  }
  __syncthreads();
}

}  // namespace pt::ops::cuda
