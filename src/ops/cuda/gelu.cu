#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608f, kCubic = 0.044715f;

// 0.5 (1 + tanh u) = sigmoid(2 u) = 1 / (1 + e) with e = exp(-2 u): one hardware exp2 and reciprocal (2 ulp,
// far below bf16's rounding) instead of tanhf, and no cancellation in 1 + tanh u for negative u.
// __fdividef(1, x) is 0 for x past 2^126, the sigmoid's own limit.
__device__ __forceinline__ float tanh_exp(float h) {
  return __expf(-2.0f * kSqrt2OverPi * (h + kCubic * h * h * h));
}

__device__ __forceinline__ float gelu(float h) { return h * __fdividef(1.0f, 1.0f + tanh_exp(h)); }

// d gelu/dh = s + 2 s (1 - s) h sqrt(2/pi) (1 + 3 0.044715 h^2) with s = 0.5 (1 + tanh u), since
// 0.5 (1 - tanh^2 u) = 2 s (1 - s). Where s > 1/2, 1 - s = e s, free of the cancellation of 1 - s; where
// s <= 1/2, 1 - s is exact enough (and e may be infinite).
__device__ __forceinline__ float gelu_grad(float h) {
  const float e = tanh_exp(h), s = __fdividef(1.0f, 1.0f + e), one_minus_s = e < 1.0f ? e * s : 1.0f - s;
  return s + 2.0f * s * one_minus_s * h * kSqrt2OverPi * (1.0f + 3.0f * kCubic * h * h);
}

// Grid-stride loops over the n = T F elements as one flat range (rows are contiguous): whole vectors of
// kVec elements when `vector` (every pointer 16-byte aligned), then the rest one element per thread.
// A thread reads its elements before writing them, so out may be h (no __restrict__).
template <class T>
__global__ void forward_kernel(const T* h, T* out, int64_t n, bool vector) {
  constexpr int kVec = kPack16<T>;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x,
                stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t body = vector ? n / kVec * kVec : 0;
  for (int64_t i = first * kVec; i < body; i += stride * kVec) {
    float v[kVec];
    load_floats<kVec>(h + i, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = gelu(v[k]);
    store_floats<kVec>(out + i, v);
  }
  for (int64_t i = body + first; i < n; i += stride) store(out + i, gelu(load(h + i)));
}

// As forward_kernel; dh may be dout or h.
template <class T>
__global__ void backward_kernel(const T* dout, const T* h, T* dh, int64_t n, bool vector) {
  constexpr int kVec = kPack16<T>;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x,
                stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t body = vector ? n / kVec * kVec : 0;
  for (int64_t i = first * kVec; i < body; i += stride * kVec) {
    float g[kVec], v[kVec];
    load_floats<kVec>(dout + i, g);
    load_floats<kVec>(h + i, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) g[k] *= gelu_grad(v[k]);
    store_floats<kVec>(dh + i, g);
  }
  for (int64_t i = body + first; i < n; i += stride) store(dh + i, load(dout + i) * gelu_grad(load(h + i)));
}

// Blocks for n elements taken kVec at a time (the vector body) or one at a time.
template <class T>
unsigned blocks_for_elements(int64_t n, bool vector) {
  return grid_stride_blocks(vector ? (n + kPack16<T> - 1) / kPack16<T> : n, kThreads);
}

}  // namespace

void gelu_forward(const Tensor& h, const Tensor& out) {
  const int64_t n = h.numel();
  if (n == 0) return;
  dispatch_float("gelu_forward", "h", h.dtype, [&](auto tag) {
    using E = decltype(tag);
    const bool vector = aligned16({h.data, out.data});
    forward_kernel<E><<<blocks_for_elements<E>(n, vector), kThreads, 0, current_stream()>>>(
        data<E>(h), data<E>(out), n, vector);
    PT_CUDA_CHECK_LAUNCH();
  });
}

void gelu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  const int64_t n = h.numel();
  if (n == 0) return;
  dispatch_float("gelu_backward", "h", h.dtype, [&](auto tag) {
    using E = decltype(tag);
    const bool vector = aligned16({dout.data, h.data, dh.data});
    backward_kernel<E><<<blocks_for_elements<E>(n, vector), kThreads, 0, current_stream()>>>(
        data<E>(dout), data<E>(h), data<E>(dh), n, vector);
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
