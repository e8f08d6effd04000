#include <algorithm>
#include <string>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/param_sums.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/cuda/scratch.h"
#include "ops/cuda/shared_memory.cuh"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kForwardWarps = 8;  // forward: one warp per token row
constexpr int kMaxBackwardWarps = 8;
constexpr int kRowsPerWarp = 4;  // backward: rows each warp handles, so a block's partial covers warps * 4
// backward_rows_kernel: blocks of 4 warps, 8 rows a warp, rows of up to kMaxRegisterVectors vectors a lane.
constexpr int kRegisterRowsThreads = 128;
constexpr int kRegisterRowsPerWarp = 8;
constexpr int kMaxRegisterVectors = 8;

// Rows are walked in vectors of kVec columns, lane l taking columns [l kVec, (l + 1) kVec) of every 32 kVec;
// the second pass rereads the row, which the first has just brought into L1.
template <class T, class W, int kVec>
__global__ void forward_kernel(const T* __restrict__ x, const W* __restrict__ w, float eps, T* __restrict__ y,
                               float* __restrict__ rstd, int64_t T_, int64_t C) {
  const int64_t t = int64_t{blockIdx.x} * kForwardWarps + threadIdx.x / 32;
  if (t >= T_) return;
  const int lane = threadIdx.x % 32;
  const T* xr = x + t * C;
  float sum_sq = 0;
  for (int64_t c = lane * kVec; c < C; c += 32 * kVec) {
    float v[kVec];
    load_floats<kVec>(xr + c, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) sum_sq += v[k] * v[k];
  }
  const float r = rsqrtf(warp_sum(sum_sq) / float(C) + eps);
  if (lane == 0) rstd[t] = r;
  for (int64_t c = lane * kVec; c < C; c += 32 * kVec) {
    float v[kVec], g[kVec];
    load_floats<kVec>(xr + c, v);
    load_floats<kVec>(w + c, g);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = v[k] * r * g[k];
    store_floats<kVec>(y + t * C + c, v);
  }
}

// The backward kernels' shared dweight rows, one a warp: a row keeps column v kVec + k at k (C / kVec) + v,
// so a warp's lanes touch consecutive words (no bank conflicts). The calling warp's row starts at zero.
template <int kVec>
__device__ inline float* zeroed_warp_row(float* warp_dw, int64_t C) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t vectors = C / kVec;
  float* dw = warp_dw + warp * C;
  for (int64_t v = lane; v < vectors; v += 32)
#pragma unroll
    for (int k = 0; k < kVec; ++k) dw[k * vectors + v] = 0;
  return dw;
}

// After every warp has summed its rows: partial[block] = the warps' rows added in warp order.
template <int kVec>
__device__ inline void write_block_partial(const float* warp_dw, int64_t C, float* partial) {
  __syncthreads();
  const int warps = blockDim.x / 32;
  const int64_t vectors = C / kVec;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const int64_t at = c % kVec * vectors + c / kVec;
    float sum = 0;
    for (int j = 0; j < warps; ++j) sum += warp_dw[j * C + at];
    partial[int64_t{blockIdx.x} * C + c] = sum;
  }
}

// With r = rstd and y = x r w: dx = r (w dy - x r^2 mean(w dy x)), and dweight = sum over tokens of
// dy x r. Block b takes rows [b R, (b + 1) R) with R = warps * kRowsPerWarp, warp j its rows j, j + warps,
// ...; each warp sums dy x r of its rows in row order into its own shared row (every lane owns its
// columns, so no races), and the block adds the warps' rows in warp order into partial[b]: dweight
// comes out of the same pass over dy and x as dx, in a fixed order.
template <class T, class W, int kVec>
__global__ void backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const W* __restrict__ w,
                                const float* __restrict__ rstd, T* __restrict__ dx, bool accumulate,
                                float* __restrict__ partial, int64_t T_, int64_t C) {
  extern __shared__ float warp_dw[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t vectors = C / kVec;
  float* dw = zeroed_warp_row<kVec>(warp_dw, C);
  const int64_t t0 = int64_t{blockIdx.x} * warps * kRowsPerWarp;
  const int64_t t1 = min(t0 + int64_t{warps} * kRowsPerWarp, T_);
  for (int64_t t = t0 + warp; t < t1; t += warps) {
    const T *gr = dy + t * C, *xr = x + t * C;
    float dot = 0;
    for (int64_t v = lane; v < vectors; v += 32) {
      float g[kVec], xv[kVec], wv[kVec];
      load_floats<kVec>(gr + v * kVec, g);
      load_floats<kVec>(xr + v * kVec, xv);
      load_floats<kVec>(w + v * kVec, wv);
#pragma unroll
      for (int k = 0; k < kVec; ++k) dot += g[k] * wv[k] * xv[k];
    }
    const float r = rstd[t], coef = r * r * warp_sum(dot) / float(C);
    for (int64_t v = lane; v < vectors; v += 32) {
      float g[kVec], xv[kVec], wv[kVec], out[kVec];
      load_floats<kVec>(gr + v * kVec, g);
      load_floats<kVec>(xr + v * kVec, xv);
      load_floats<kVec>(w + v * kVec, wv);
      load_or_zero<kVec>(accumulate, dx + t * C + v * kVec, out);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        out[k] += r * (wv[k] * g[k] - xv[k] * coef);
        dw[k * vectors + v] += g[k] * xv[k] * r;
      }
      store_floats<kVec>(dx + t * C + v * kVec, out);
    }
  }
  write_block_partial<kVec>(warp_dw, C, partial);
}

// The backward for rows of at most 32 kPerLane vectors (C <= 2048 in bf16): as the kernel above, but each
// warp holds its row of dy and x in registers between the two passes (lane l: vectors l, l + 32, ...), so
// it reads them from memory once with every load of the row in flight together, while the kernel above
// rereads them after its shared-memory rows have taken most of the L1. Smaller blocks (kRegisterRowsThreads)
// fill the SMs in fewer, fuller waves.
template <class T, class W, int kVec, int kPerLane>
__global__ void __launch_bounds__(kRegisterRowsThreads)
    backward_rows_kernel(const T* __restrict__ dy, const T* __restrict__ x, const W* __restrict__ w,
                         const float* __restrict__ rstd, T* __restrict__ dx, bool accumulate,
                         float* __restrict__ partial, int64_t T_, int64_t C) {
  extern __shared__ float warp_dw[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int vectors = static_cast<int>(C / kVec);
  float* dw = zeroed_warp_row<kVec>(warp_dw, C);
  const int64_t t0 = int64_t{blockIdx.x} * warps * kRegisterRowsPerWarp;
  const int64_t t1 = min(t0 + int64_t{warps} * kRegisterRowsPerWarp, T_);
  for (int64_t t = t0 + warp; t < t1; t += warps) {
    Pack<T, kVec> g[kPerLane], xv[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (const int v = lane + 32 * i; v < vectors) {
        g[i] = load_pack<kVec>(dy + t * C + v * kVec);
        xv[i] = load_pack<kVec>(x + t * C + v * kVec);
      }
    float dot = 0;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (const int v = lane + 32 * i; v < vectors) {
        float wv[kVec];
        load_floats<kVec>(w + v * kVec, wv);
#pragma unroll
        for (int k = 0; k < kVec; ++k) dot += load(&g[i].v[k]) * wv[k] * load(&xv[i].v[k]);
      }
    const float r = rstd[t], coef = r * r * warp_sum(dot) / float(C);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (const int v = lane + 32 * i; v < vectors) {
        float wv[kVec], out[kVec];
        load_floats<kVec>(w + v * kVec, wv);
        load_or_zero<kVec>(accumulate, dx + t * C + v * kVec, out);
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          const float gk = load(&g[i].v[k]), xk = load(&xv[i].v[k]);
          out[k] += r * (wv[k] * gk - xk * coef);
          dw[k * vectors + v] += gk * xk * r;
        }
        store_floats<kVec>(dx + t * C + v * kVec, out);
      }
  }
  write_block_partial<kVec>(warp_dw, C, partial);
}

// The second pass: dweight (=|+=) the partials' column sums.
template <class W>
__global__ void dweight_reduce_kernel(const float* __restrict__ partial, int64_t partials, int64_t C,
                                      bool accumulate, W* __restrict__ dweight) {
  column_sum(partial, partials, C, C, accumulate, dweight);
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) {
  const int64_t T = x.shape[0], C = x.shape[1];
  require_f32("rmsnorm_forward", "rstd", rstd.dtype);
  if (T == 0) return;
  dispatch_with_param("rmsnorm_forward", "x", x, weight, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    constexpr int kVec = kPack16<E>;
    const bool vector = C % kVec == 0 && aligned16({x.data, weight.data, y.data});
    auto kernel = vector ? forward_kernel<E, W, kVec> : forward_kernel<E, W, 1>;
    kernel<<<blocks_for(T, kForwardWarps), kForwardWarps * 32, 0, current_stream()>>>(
        data<E>(x), data<W>(weight), float(eps), data<E>(y), data<float>(rstd), T, C);
    PT_CUDA_CHECK_LAUNCH();
  });
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dx, Write dx_mode, const Tensor& dweight, Write dweight_mode) {
  const int64_t T = x.shape[0], C = x.shape[1];
  require_f32("rmsnorm_backward", "rstd", rstd.dtype);
  if (C == 0) return;
  const cudaStream_t stream = current_stream();
  ScratchPlan plan;
  float* partial = nullptr;
  int64_t partials = 0;
  // Each kernel writes one partial row of dweight a block; both kernels' blocks cover rows in order.
  auto reserve_partials = [&](int64_t rows_per_block) {
    partials = (T + rows_per_block - 1) / rows_per_block;
    const size_t at = plan.reserve<float>(partials * C);
    plan.allocate();
    partial = plan.at<float>(at);
  };
  dispatch_with_param("rmsnorm_backward", "x", x, weight, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    constexpr int kVec = kPack16<E>;
    const bool vector = C % kVec == 0 && aligned16({dy.data, x.data, weight.data, dx.data});
    const int64_t lane_vectors = (C / kVec + 31) / 32;
    if (vector && lane_vectors <= kMaxRegisterVectors) {
      constexpr int kWarps = kRegisterRowsThreads / 32;
      reserve_partials(int64_t{kWarps} * kRegisterRowsPerWarp);
      if (T == 0) return;
      auto kernel = lane_vectors <= 1   ? backward_rows_kernel<E, W, kVec, 1>
                    : lane_vectors <= 2 ? backward_rows_kernel<E, W, kVec, 2>
                    : lane_vectors <= 4 ? backward_rows_kernel<E, W, kVec, 4>
                                        : backward_rows_kernel<E, W, kVec, kMaxRegisterVectors>;
      const auto shared = static_cast<size_t>(kWarps * C * int64_t{sizeof(float)});
      allow_shared_memory(kernel, shared, "rmsnorm_backward", C, sizeof(float));
      kernel<<<static_cast<unsigned>(partials), kRegisterRowsThreads, shared, stream>>>(
          data<E>(dy), data<E>(x), data<W>(weight), data<float>(rstd), data<E>(dx),
          dx_mode == Write::accumulate, partial, T, C);
      PT_CUDA_CHECK_LAUNCH();
      return;
    }
    // As many warps (each with a shared fp32 row of C) as fit in the default shared memory, at least one.
    const int64_t row_bytes = C * int64_t{sizeof(float)};
    const int warps = static_cast<int>(std::clamp<int64_t>(kDefaultShared / row_bytes, 1, kMaxBackwardWarps));
    const auto shared = static_cast<size_t>(warps * row_bytes);
    reserve_partials(int64_t{warps} * kRowsPerWarp);
    auto kernel = vector ? backward_kernel<E, W, kVec> : backward_kernel<E, W, 1>;
    allow_shared_memory(kernel, shared, "rmsnorm_backward", C, sizeof(float));
    if (T == 0) return;  // dweight still gets its (empty) sum below
    kernel<<<static_cast<unsigned>(partials), warps * 32, shared, stream>>>(
        data<E>(dy), data<E>(x), data<W>(weight), data<float>(rstd), data<E>(dx),
        dx_mode == Write::accumulate, partial, T, C);
    PT_CUDA_CHECK_LAUNCH();
  });
  dispatch_with_param("rmsnorm_backward", "x", x, dweight, [&](auto, auto w) {
    using W = decltype(w);
    dweight_reduce_kernel<<<blocks_for(C, 32), dim3(32, kColumnSumRows), 0, stream>>>(
        partial, partials, C, dweight_mode == Write::accumulate, data<W>(dweight));
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
