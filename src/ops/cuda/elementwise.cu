#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/stream.h"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void add_kernel(const T* src, T* dst, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) store(dst + i, load(dst + i) + load(src + i));
}

// pt::float_to_bf16 (core/float16.h) on the device: round to nearest even, NaN kept quiet with its sign
// and payload's high bits. __float2bfloat16_rn rounds finite values the same but canonicalizes NaN.
__device__ __forceinline__ uint16_t float_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if (f != f) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

__global__ void f32_to_bf16_kernel(const float* src, uint16_t* dst, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = float_to_bf16_bits(src[i]);
}

__global__ void bf16_to_f32_kernel(const uint16_t* src, float* dst, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = __uint_as_float(static_cast<uint32_t>(src[i]) << 16);
}

}  // namespace

void cast(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (src.dtype == DType::f32)
    f32_to_bf16_kernel<<<blocks_for(n, kThreads), kThreads, 0, current_stream()>>>(data<float>(src),
                                                                                   data<uint16_t>(dst), n);
  else
    bf16_to_f32_kernel<<<blocks_for(n, kThreads), kThreads, 0, current_stream()>>>(data<uint16_t>(src),
                                                                                   data<float>(dst), n);
  PT_CUDA_CHECK_LAUNCH();
}

void add(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  dispatch_float("add", "dst", dst.dtype, [&](auto tag) {
    using E = decltype(tag);
    add_kernel<<<blocks_for(n, kThreads), kThreads, 0, current_stream()>>>(data<E>(src), data<E>(dst), n);
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
