#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/stream.h"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// One thread per output element (t, f): it reads gate h[t, f] and up h[t, F + f].
template <class T>
__global__ void forward_kernel(const T* __restrict__ h, T* __restrict__ out, int64_t T_, int64_t F) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= T_ * F) return;
  const int64_t t = i / F, f = i % F;
  const float gate = load(h + t * 2 * F + f), up = load(h + t * 2 * F + F + f);
  store(out + i, gate * sigmoid(gate) * up);
}

// d silu(g)/dg = s (1 + g (1 - s)) with s = sigmoid(g).
template <class T>
__global__ void backward_kernel(const T* __restrict__ dout, const T* __restrict__ h, T* __restrict__ dh,
                                int64_t T_, int64_t F) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= T_ * F) return;
  const int64_t t = i / F, f = i % F;
  const float gate = load(h + t * 2 * F + f), up = load(h + t * 2 * F + F + f), g = load(dout + i);
  const float s = sigmoid(gate);
  store(dh + t * 2 * F + f, g * up * s * (1.0f + gate * (1.0f - s)));
  store(dh + t * 2 * F + F + f, g * gate * s);
}

}  // namespace

void swiglu_forward(const Tensor& h, const Tensor& out) {
  const int64_t T = h.shape[0], F = h.shape[1] / 2;
  if (T * F == 0) return;
  dispatch_float("swiglu_forward", "h", h.dtype, [&](auto tag) {
    using E = decltype(tag);
    forward_kernel<<<blocks_for(T * F, kThreads), kThreads, 0, current_stream()>>>(data<E>(h), data<E>(out),
                                                                                   T, F);
    PT_CUDA_CHECK_LAUNCH();
  });
}

void swiglu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  const int64_t T = h.shape[0], F = h.shape[1] / 2;
  if (T * F == 0) return;
  dispatch_float("swiglu_backward", "h", h.dtype, [&](auto tag) {
    using E = decltype(tag);
    backward_kernel<<<blocks_for(T * F, kThreads), kThreads, 0, current_stream()>>>(data<E>(dout), data<E>(h),
                                                                                    data<E>(dh), T, F);
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
