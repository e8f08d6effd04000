// Vector access for the memory-bound kernels (elementwise, RMSNorm, RoPE, cross-entropy): kVec consecutive
// elements move between memory and fp32 registers in 16-byte (or narrower) accesses, and the host picks
// the vector path only when every pointer and row stride allows it, the scalar path (kVec = 1) otherwise.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "ops/cuda/check.h"
#include "ops/cuda/elements.cuh"

namespace pt::ops::cuda {

// out[k] = p[k] for k < kVec, in accesses of at most 16 bytes (a bf16 row's 8 elements with an f32
// weight's 8: one access and two). p must be aligned to the access: kVec * sizeof(T), capped at 16 bytes.
template <int kVec, class T>
__device__ __forceinline__ void load_floats(const T* p, float (&out)[kVec]) {
  constexpr int kChunk = kVec < kPack16<T> ? kVec : kPack16<T>;
#pragma unroll
  for (int c = 0; c < kVec; c += kChunk) {
    const Pack<T, kChunk> pack = load_pack<kChunk>(p + c);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) out[c + k] = load(&pack.v[k]);
  }
}

template <int kVec, class T>
__device__ __forceinline__ void store_floats(T* p, const float (&in)[kVec]) {
  constexpr int kChunk = kVec < kPack16<T> ? kVec : kPack16<T>;
#pragma unroll
  for (int c = 0; c < kVec; c += kChunk) {
    Pack<T, kChunk> pack;
#pragma unroll
    for (int k = 0; k < kChunk; ++k) store(&pack.v[k], in[c + k]);
    store_pack(p + c, pack);
  }
}

// out = p's kVec elements where an output accumulates, zeros where it is overwritten (p is then not read).
template <int kVec, class T>
__device__ __forceinline__ void load_or_zero(bool accumulate, const T* p, float (&out)[kVec]) {
  if (accumulate) {
    load_floats<kVec>(p, out);
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[k] = 0;
  }
}

// Whether every pointer is 16-byte aligned.
inline bool aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Multiprocessors of the current device, asked once per host thread and device.
inline int sm_count() {
  thread_local int device = -1, count = 0;
  int current = 0;
  PT_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) {
    PT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, current));
    device = current;
  }
  return count;
}

// Blocks for a grid-stride loop over n items: enough to fill every SM (kBlocksPerSm resident blocks of
// `threads`), no more than the items need.
inline unsigned grid_stride_blocks(int64_t n, int threads) {
  constexpr int64_t kBlocksPerSm = 8;
  const int64_t needed = (n + threads - 1) / threads, full = kBlocksPerSm * sm_count();
  return static_cast<unsigned>(needed < full ? needed : full);
}

}  // namespace pt::ops::cuda
