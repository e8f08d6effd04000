// Element types of the CUDA kernels: activations and weights are float or bf16 in memory and float in
// registers (every kernel accumulates in fp32). dispatch_float maps a tensor's DType to the storage type.
#pragma once

#include <cuda_bf16.h>

#include <string>

#include "core/tensor.h"

namespace pt::ops::cuda {

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// v as stored in a T: what a later load of the element gives.
template <class T>
__device__ __forceinline__ float rounded_to(float v) {
  T t;
  store(&t, v);
  return load(&t);
}

// pt::float_to_bf16 (core/float16.h) on the device: round to nearest even, NaN kept quiet with its sign
// and payload's high bits. __float2bfloat16_rn rounds finite values the same but canonicalizes NaN. What
// ops::cast writes, and AdamW into a working copy.
__device__ __forceinline__ uint16_t float_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if (f != f) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// 2^x by the multi-function unit alone (relative error about 2^-22): exp2f's denormal path costs three more
// instructions per value, and probabilities below 2^-126 may as well be 0. 2^-inf = 0.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// kSize consecutive elements moved as one aligned vector access (kSize * sizeof(T) of 4, 8 or 16 bytes).
template <class T, int kSize>
struct alignas(sizeof(T) * kSize) Pack {
  T v[kSize];
};
template <int kSize, class T>
__device__ __forceinline__ Pack<T, kSize> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, kSize>*>(p);
}
template <int kSize, class T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, kSize>& x) {
  *reinterpret_cast<Pack<T, kSize>*>(p) = x;
}
// Elements per 16-byte access of T.
template <class T>
inline constexpr int kPack16 = static_cast<int>(16 / sizeof(T));

// Calls fn(T{}) with T = float or __nv_bfloat16; any other type is an error naming the op and the argument.
template <class Fn>
void dispatch_float(const char* op, const char* name, DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32:
      fn(float{});
      return;
    case DType::bf16:
      fn(__nv_bfloat16{});
      return;
    default:
      throw Error(std::string(op) + ": " + name + " is " + dtype_name(dtype) +
                  ", which cuda does not support; use f32 or bf16");
  }
}

// Like dispatch_float, for tensors that must be f32 (master weights, optimizer state, statistics).
inline void require_f32(const char* op, const char* name, DType dtype) {
  if (dtype != DType::f32)
    throw Error(std::string(op) + ": " + name + " must be f32 on cuda, got " + dtype_name(dtype));
}

template <class T>
T* data(const Tensor& t) {
  return static_cast<T*>(t.data);
}

// Blocks needed to cover n items with `threads` per block.
inline unsigned blocks_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace pt::ops::cuda
