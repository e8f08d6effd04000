#include <algorithm>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/param_sums.cuh"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kWarps = 8;        // bias_add: warps of a block, each on its rows of one tile
constexpr int kBlocksPerSm = 8;  // bias_add: resident blocks that fill an SM

// y[r] += bias for the rows r (ld elements apart) = blockIdx.x kWarps + warp, stepping by gridDim.x kWarps,
// of tile blockIdx.y (32 vectors of kVec columns, lane l taking vector 32 blockIdx.y + l, so a warp reads
// 32 kVec consecutive elements of a row); each thread holds its kVec bias values in registers across rows.
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

// The first pass of dy's column sums (param_sums.cuh's tiling). Unrolled and branch-free, so the loads of
// all the warp's rows are in flight together: a row past M reloads row M - 1 (in bounds) and is not added.
template <class T, int kVec>
__global__ void partial_kernel(const T* __restrict__ dy, float* __restrict__ partial, int64_t M, int64_t N,
                               int64_t ld) {
  const int64_t v = int64_t{blockIdx.y} * 32 + threadIdx.x;
  const int64_t r0 = int64_t{blockIdx.x} * kPartialRows + threadIdx.y;
  float sum[kVec] = {};
  if (v < N / kVec) {
#pragma unroll
    for (int i = 0; i < kPartialRowsPerWarp; ++i) {
      const int64_t r = r0 + int64_t{i} * kPartialWarps;
      float g[kVec];
      load_floats<kVec>(dy + min(r, M - 1) * ld + v * kVec, g);
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum[k] += r < M ? g[k] : 0.0f;
    }
  }
  store_block_partial(sum, N, partial);
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
  const auto [partial, partials] = column_partials(M, N);
  const cudaStream_t stream = current_stream();
  dispatch_with_param("bias_backward", "dy", dy, dbias, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    if (M > 0)  // with no rows, dbias still gets its (empty) sum below
      launch_tiles<E>("bias_backward", N, ld, {dy.data}, [&](auto vec, unsigned tiles) {
        partial_kernel<E, decltype(vec)::value>
            <<<dim3(static_cast<unsigned>(partials), tiles), dim3(32, kPartialWarps), 0, stream>>>(
                data<E>(dy), partial, M, N, ld);
        PT_CUDA_CHECK_LAUNCH();
      });
    column_sum_kernel<<<blocks_for(N, 32), dim3(32, kColumnSumRows), 0, stream>>>(
        partial, partials, N, mode == Write::accumulate, data<W>(dbias));
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
