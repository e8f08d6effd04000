// Pieces shared by the kernels that reduce activation gradients over tokens into parameter gradients
// (LayerNorm's weight and bias, a linear layer's bias, on its own or inside an activation's backward): the
// dispatch of a parameter that is f32 or the activations' type, the tiling and block sums of the first pass
// over rows, and the fixed-order second pass that adds up per-block column partials. With first-pass blocks
// that cover fixed row ranges, the sums come out the same on every run and device.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/scratch.h"
#include "ops/cuda/vector.cuh"

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

// The first pass of a column sum over the rows of [M, N]: blocks (p, j) of (32, kPartialWarps) threads take
// rows [p kPartialRows, (p + 1) kPartialRows) of tile j, 32 vectors of kVec columns (lane l takes vector
// 32 j + l), warp w the rows w, w + kPartialWarps, ... of them, summed in order.
constexpr int kPartialWarps = 8;
constexpr int kPartialRowsPerWarp = 8;
constexpr int kPartialRows = kPartialWarps * kPartialRowsPerWarp;
constexpr int kMaxGridY = 65535;

// The first pass's partials over M rows of N columns, one row of N a block, in the ops' shared scratch.
struct ColumnPartials {
  float* data;
  int64_t count;
};
inline ColumnPartials column_partials(int64_t M, int64_t N) {
  ColumnPartials p{nullptr, (M + kPartialRows - 1) / kPartialRows};
  ScratchPlan plan;
  const size_t at = plan.reserve<float>(p.count * N);
  plan.allocate();
  p.data = plan.at<float>(at);
  return p;
}

// Writes the block's partial: each warp's column sums (sum, lane l's vector of the tile) added in warp order
// into partial[blockIdx.x N + c].
template <int kVec>
__device__ __forceinline__ void store_block_partial(const float (&sum)[kVec], int64_t N,
                                                    float* __restrict__ partial) {
  __shared__ float warp_sums[kPartialWarps][32 * kVec];  // a tile's columns in order, per warp
  const int lane = threadIdx.x, warp = threadIdx.y;
#pragma unroll
  for (int k = 0; k < kVec; ++k) warp_sums[warp][lane * kVec + k] = sum[k];
  __syncthreads();
  const int64_t c0 = int64_t{blockIdx.y} * 32 * kVec;
  for (int j = warp * 32 + lane; j < 32 * kVec && c0 + j < N; j += kPartialWarps * 32) {
    float total = 0;
    for (int w = 0; w < kPartialWarps; ++w) total += warp_sums[w][j];
    partial[int64_t{blockIdx.x} * N + c0 + j] = total;
  }
}

// Calls launch(kVec, tiles) with 16-byte vectors of E when N, the row stride ld and every pointer allow them,
// else kVec = 1, and the number of 32-vector tiles across a row, which must fit the grid's y dimension.
template <class E, class Launch>
void launch_tiles(const char* op, int64_t N, int64_t ld, std::initializer_list<const void*> pointers,
                  Launch&& launch) {
  constexpr int kVec = kPack16<E>;
  const bool vector = N % kVec == 0 && ld % kVec == 0 && aligned16(pointers);
  const int64_t tiles = (N / (vector ? kVec : 1) + 31) / 32;
  if (tiles > kMaxGridY)
    throw Error(std::string(op) + ": rows of " + std::to_string(N) +
                " columns are too wide for the cuda kernel");
  if (vector)
    launch(std::integral_constant<int, kVec>{}, static_cast<unsigned>(tiles));
  else
    launch(std::integral_constant<int, 1>{}, static_cast<unsigned>(tiles));
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

template <class W>
__global__ void column_sum_kernel(const float* __restrict__ partial, int64_t partials, int64_t N,
                                  bool accumulate, W* __restrict__ out) {
  column_sum(partial, partials, N, N, accumulate, out);
}

}  // namespace pt::ops::cuda
