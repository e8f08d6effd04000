#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/cuda/scratch.h"
#include "ops/cuda/stream.h"

namespace pt::ops::cuda {

namespace {

constexpr int kRowsPerBlock = 4;         // one warp per token row
constexpr int kColumnThreads = 256;      // dweight kernels: one thread per column
constexpr int64_t kRowsPerPartial = 64;  // tokens summed into one partial dweight row

template <class T, class W>
__global__ void forward_kernel(const T* __restrict__ x, const W* __restrict__ w, float eps, T* __restrict__ y,
                               float* __restrict__ rstd, int64_t T_, int64_t C) {
  const int64_t t = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / 32;
  if (t >= T_) return;
  const int lane = threadIdx.x % 32;
  const T* xr = x + t * C;
  float sum_sq = 0;
  for (int64_t c = lane; c < C; c += 32) sum_sq += load(xr + c) * load(xr + c);
  const float r = rsqrtf(warp_sum(sum_sq) / float(C) + eps);
  if (lane == 0) rstd[t] = r;
  for (int64_t c = lane; c < C; c += 32) store(y + t * C + c, load(xr + c) * r * load(w + c));
}

// With r = rstd and y = x r w: dx = r (w dy - x r^2 mean(w dy x)).
template <class T, class W>
__global__ void dx_kernel(const T* __restrict__ dy, const T* __restrict__ x, const W* __restrict__ w,
                          const float* __restrict__ rstd, T* __restrict__ dx, int64_t T_, int64_t C) {
  const int64_t t = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / 32;
  if (t >= T_) return;
  const int lane = threadIdx.x % 32;
  const T *gr = dy + t * C, *xr = x + t * C;
  float dot = 0;
  for (int64_t c = lane; c < C; c += 32) dot += load(gr + c) * load(w + c) * load(xr + c);
  const float r = rstd[t], coef = r * r * warp_sum(dot) / float(C);
  for (int64_t c = lane; c < C; c += 32)
    store(dx + t * C + c, r * (load(w + c) * load(gr + c) - load(xr + c) * coef));
}

// partial[p][c] = sum of dy x r over tokens [p * kRowsPerPartial, ...), in token order.
template <class T>
__global__ void dweight_partial_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                       const float* __restrict__ rstd, float* __restrict__ partial,
                                       int64_t T_, int64_t C) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t t0 = int64_t{blockIdx.y} * kRowsPerPartial, t1 = min(t0 + kRowsPerPartial, T_);
  float sum = 0;
  for (int64_t t = t0; t < t1; ++t) sum += load(dy + t * C + c) * load(x + t * C + c) * rstd[t];
  partial[int64_t{blockIdx.y} * C + c] = sum;
}

// dweight[c] (=|+=) sum over partials in order.
template <class W>
__global__ void dweight_reduce_kernel(const float* __restrict__ partial, int64_t partials, int64_t C,
                                      bool accumulate, W* __restrict__ dweight) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float sum = 0;
  for (int64_t p = 0; p < partials; ++p) sum += partial[p * C + c];
  store(dweight + c, accumulate ? load(dweight + c) + sum : sum);
}

// Calls fn(T{}, W{}) for activations T and a companion tensor (weight, dweight) of type W = f32 or T.
template <class Fn>
void dispatch_pair(const char* op, const Tensor& x, const Tensor& other, Fn&& fn) {
  dispatch_float(op, "x", x.dtype, [&](auto t) {
    if (other.dtype == DType::f32)
      fn(t, float{});
    else
      fn(t, t);
  });
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) {
  const int64_t T = x.shape[0], C = x.shape[1];
  require_f32("rmsnorm_forward", "rstd", rstd.dtype);
  if (T == 0) return;
  dispatch_pair("rmsnorm_forward", x, weight, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    forward_kernel<<<blocks_for(T, kRowsPerBlock), kRowsPerBlock * 32, 0, current_stream()>>>(
        data<E>(x), data<W>(weight), float(eps), data<E>(y), data<float>(rstd), T, C);
    PT_CUDA_CHECK_LAUNCH();
  });
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dx, const Tensor& dweight, Write dweight_mode) {
  const int64_t T = x.shape[0], C = x.shape[1];
  require_f32("rmsnorm_backward", "rstd", rstd.dtype);
  if (C == 0) return;
  const int64_t partials = (T + kRowsPerPartial - 1) / kRowsPerPartial;
  ScratchPlan plan;
  const size_t partial_at = plan.reserve<float>(partials * C);
  plan.allocate();
  float* partial = plan.at<float>(partial_at);
  const cudaStream_t stream = current_stream();
  dispatch_pair("rmsnorm_backward", x, weight, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    if (T == 0) return;
    dx_kernel<<<blocks_for(T, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
        data<E>(dy), data<E>(x), data<W>(weight), data<float>(rstd), data<E>(dx), T, C);
    PT_CUDA_CHECK_LAUNCH();
    const dim3 grid(blocks_for(C, kColumnThreads), static_cast<unsigned>(partials));
    dweight_partial_kernel<<<grid, kColumnThreads, 0, stream>>>(data<E>(dy), data<E>(x), data<float>(rstd),
                                                                partial, T, C);
    PT_CUDA_CHECK_LAUNCH();
  });
  dispatch_pair("rmsnorm_backward", x, dweight, [&](auto, auto w) {
    using W = decltype(w);
    dweight_reduce_kernel<<<blocks_for(C, kColumnThreads), kColumnThreads, 0, stream>>>(
        partial, partials, C, dweight_mode == Write::accumulate, data<W>(dweight));
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
