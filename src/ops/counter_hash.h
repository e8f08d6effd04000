// Counter-based hashes for the random draws both backends must make alike (mvue24's pruning, stochastic
// rounding of bf16 weights): bijective integer mixes, the same bits on host and device.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define PT_HASH_HD __host__ __device__ __forceinline__
#else
#define PT_HASH_HD inline
#endif

namespace pt::ops {

// splitmix64's output function: a bijective mix of 64 bits.
PT_HASH_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// lowbias32 (C. Wellons' hash prospector): a bijective mix of 32 bits, 8 instructions on the GPU.
PT_HASH_HD uint32_t mix32(uint32_t x) {
  x = (x ^ (x >> 16)) * 0x7feb352du;
  x = (x ^ (x >> 15)) * 0x846ca68bu;
  return x ^ (x >> 16);
}

}  // namespace pt::ops
