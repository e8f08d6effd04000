#include <algorithm>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/param_sums.cuh"
#include "ops/cuda/scratch.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

// Both kernels run blocks of kWarps warps over a tile of 32 vectors of kVec columns (lane l takes vector
// blockIdx.y 32 + l), so a warp reads 32 kVec consecutive elements of a row.
constexpr int kWarps = 8;
constexpr int kSumRowsPerWarp = 8;  // bias_backward: a block sums kWarps * 8 = 64 rows into one partial
constexpr int kMaxGridY = 65535;
constexpr int kBlocksPerSm = 8;  // bias_add: resident blocks of kWarps warps that fill an SM

// y[r] += bias for the rows r (ld elements apart) = blockIdx.x kWarps + warp, stepping by gridDim.x kWarps;
// each thread holds its kVec bias values in registers across the rows.
template <class T, class W, int kVec>
__global__ void add_kernel(T* __restrict__ y, const W* __restrict__ bias, int64_t M, int64_t N, int64_t ld) {
  const int64_t v = int64_t{blockIdx.y} * 32 + threadIdx.x;
  if (v >= N / kVec) return;
  float b[kVec];
  load_floats<kVec>(bias + v * kVec, b);
  for (int64_t r = int64_t{blockIdx.x} * kWarps + threadIdx.y; r < M; r += int64_t{gridDim.x} * kWarps) {
    float out[kVec];
    load_floats<kVec>(y + r * ld + v * kVec, out);
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[k] += b[k];
    store_floats<kVec>(y + r * ld + v * kVec, out);
  }
}

// The first pass of the column sums: block (p, j) takes rows [64 p, 64 p + 64) of its tile, warp w the
// rows 64 p + w, 64 p + w + kWarps, ... of them summed in order, and writes the warps' sums added in warp
// order to partial[p N + c]. Row ranges are fixed by M alone, so the order of every addition is too.
template <class T, int kVec>
__global__ void partial_kernel(const T* __restrict__ dy, float* __restrict__ partial, int64_t M, int64_t N,
                               int64_t ld) {
  __shared__ float warp_sums[kWarps][32 * kVec];  // a tile's columns in order, per warp
  const int lane = threadIdx.x, warp = threadIdx.y;
  const int64_t v = int64_t{blockIdx.y} * 32 + lane;
  const int64_t r0 = int64_t{blockIdx.x} * kWarps * kSumRowsPerWarp + warp;
  float sum[kVec] = {};
  // Unrolled and branch-free, so the loads of all the rows are in flight together: a row past M reloads
  // row M - 1 (in bounds) and is not added.
  if (v < N / kVec) {
#pragma unroll
    for (int i = 0; i < kSumRowsPerWarp; ++i) {
      const int64_t r = r0 + int64_t{i} * kWarps;
      float g[kVec];
      load_floats<kVec>(dy + min(r, M - 1) * ld + v * kVec, g);
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum[k] += r < M ? g[k] : 0.0f;
    }
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) warp_sums[warp][lane * kVec + k] = sum[k];
  __syncthreads();
  const int64_t c0 = int64_t{blockIdx.y} * 32 * kVec;
  for (int j = warp * 32 + lane; j < 32 * kVec && c0 + j < N; j += kWarps * 32) {
    float total = 0;
    for (int w = 0; w < kWarps; ++w) total += warp_sums[w][j];
    partial[int64_t{blockIdx.x} * N + c0 + j] = total;
  }
}

template <class W>
__global__ void dbias_kernel(const float* __restrict__ partial, int64_t partials, int64_t N, bool accumulate,
                             W* __restrict__ dbias) {
  column_sum(partial, partials, N, N, accumulate, dbias);
}

// Calls launch(kVec) with 16-byte vectors when N, the row stride ld and every pointer allow them, else
// kVec = 1, and the number of 32-vector tiles across a row, which must fit the grid's y dimension.
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

}  // namespace

void bias_add(const Tensor& y, const Tensor& bias) {
  const int64_t M = y.shape[0], N = bias.shape[0], ld = y.shape[1];
  if (M * N == 0) return;
  dispatch_with_param("bias_add", "y", y, bias, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    launch_tiles<E>("bias_add", N, ld, {y.data, bias.data}, [&](auto vec, unsigned tiles) {
      // Enough row blocks to fill the device, each then stepping over the rows.
      const int64_t fill = (int64_t{kBlocksPerSm} * sm_count() + tiles - 1) / tiles;
      const auto row_blocks = static_cast<unsigned>(std::min<int64_t>((M + kWarps - 1) / kWarps, fill));
      add_kernel<E, W, decltype(vec)::value>
          <<<dim3(row_blocks, tiles), dim3(32, kWarps), 0, current_stream()>>>(data<E>(y), data<W>(bias), M,
                                                                               N, ld);
      PT_CUDA_CHECK_LAUNCH();
    });
  });
}

void bias_backward(const Tensor& dy, const Tensor& dbias, Write mode) {
  const int64_t M = dy.shape[0], N = dbias.shape[0], ld = dy.shape[1];
  if (N == 0) return;
  const int64_t rows_per_block = kWarps * kSumRowsPerWarp;
  const int64_t partials = (M + rows_per_block - 1) / rows_per_block;
  ScratchPlan plan;
  const size_t partial_at = plan.reserve<float>(partials * N);
  plan.allocate();
  float* partial = plan.at<float>(partial_at);
  const cudaStream_t stream = current_stream();
  dispatch_with_param("bias_backward", "dy", dy, dbias, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    if (M > 0)  // with no rows, dbias still gets its (empty) sum below
      launch_tiles<E>("bias_backward", N, ld, {dy.data}, [&](auto vec, unsigned tiles) {
        partial_kernel<E, decltype(vec)::value>
            <<<dim3(static_cast<unsigned>(partials), tiles), dim3(32, kWarps), 0, stream>>>(
                data<E>(dy), partial, M, N, ld);
        PT_CUDA_CHECK_LAUNCH();
      });
    dbias_kernel<<<blocks_for(N, 32), dim3(32, kColumnSumRows), 0, stream>>>(
        partial, partials, N, mode == Write::accumulate, data<W>(dbias));
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
