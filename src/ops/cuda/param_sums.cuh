// Pieces shared by the kernels that reduce activation gradients over tokens into parameter gradients
// (LayerNorm's weight and bias, a linear layer's bias): the dispatch of a parameter that is f32 or the
// activations' type, and the fixed-order second pass that adds up per-block column partials. Together with
// a first pass whose blocks cover fixed row ranges, the sums come out the same on every run and device.
#pragma once

#include <cstdint>

#include "ops/cuda/elements.cuh"

namespace pt::ops::cuda {

// Calls fn(T{}, W{}) for activations T (x's type, x named `name` in errors) and a parameter or its
// gradient of type W = f32 or T.
template <class Fn>
void dispatch_with_param(const char* op, const char* name, const Tensor& x, const Tensor& param, Fn&& fn) {
  dispatch_float(op, name, x.dtype, [&](auto t) {
    if (param.dtype == DType::f32)
      fn(t, float{});
    else
      fn(t, t);
  });
}

// Threads that split the partials of one column in column_sum: blocks are (32, kColumnSumRows).
constexpr int kColumnSumRows = 16;

// out[c] (=|+=) the sum over p < partials of partial[p stride + c], for the 32 columns from blockIdx.x 32:
// thread row j sums partials j, j + 16, ... in order, then the 16 sums are added in order.
template <class W>
__device__ __forceinline__ void column_sum(const float* __restrict__ partial, int64_t partials,
                                           int64_t stride, int64_t C, bool accumulate, W* __restrict__ out) {
  __shared__ float sums[kColumnSumRows][32];
  const int64_t c = int64_t{blockIdx.x} * 32 + threadIdx.x;
  float sum = 0;
  if (c < C)
    for (int64_t p = threadIdx.y; p < partials; p += kColumnSumRows) sum += partial[p * stride + c];
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return;
  float total = 0;
  for (int j = 0; j < kColumnSumRows; ++j) total += sums[j][threadIdx.x];
  store(out + c, accumulate ? load(out + c) + total : total);
}

}  // namespace pt::ops::cuda
