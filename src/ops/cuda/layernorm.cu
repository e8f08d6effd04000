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

// One warp per row, walked in vectors of kVec columns, lane l taking columns [l kVec, (l + 1) kVec) of every
// 32 kVec: a pass for the mean, one for the variance around it (exact where the mean is large against the
// spread, unlike mean(x^2) - mean^2), one for y. The later passes reread the row from L1.
template <class T, class W, int kVec>
__global__ void forward_kernel(const T* __restrict__ x, const W* __restrict__ w, const W* __restrict__ b,
                               float eps, T* __restrict__ y, float* __restrict__ mean,
                               float* __restrict__ rstd, int64_t T_, int64_t C) {
  const int64_t t = int64_t{blockIdx.x} * kForwardWarps + threadIdx.x / 32;
  if (t >= T_) return;
  const int lane = threadIdx.x % 32;
  const T* xr = x + t * C;
  float sum = 0;
  for (int64_t c = lane * kVec; c < C; c += 32 * kVec) {
    float v[kVec];
    load_floats<kVec>(xr + c, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) sum += v[k];
  }
  const float mu = warp_sum(sum) / float(C);
  float sum_sq = 0;
  for (int64_t c = lane * kVec; c < C; c += 32 * kVec) {
    float v[kVec];
    load_floats<kVec>(xr + c, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) sum_sq += (v[k] - mu) * (v[k] - mu);
  }
  const float r = rsqrtf(warp_sum(sum_sq) / float(C) + eps);
  if (lane == 0) {
    mean[t] = mu;
    rstd[t] = r;
  }
  for (int64_t c = lane * kVec; c < C; c += 32 * kVec) {
    float v[kVec], wv[kVec], bv[kVec];
    load_floats<kVec>(xr + c, v);
    load_floats<kVec>(w + c, wv);
    load_floats<kVec>(b + c, bv);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = (v[k] - mu) * r * wv[k] + bv[k];
    store_floats<kVec>(y + t * C + c, v);
  }
}

// With r = rstd, xhat = (x - mean) r and g = dy w: dx = r (g - mean(g) - xhat mean(g xhat)), dweight = sum
// over tokens of dy xhat, dbias = sum over tokens of dy, and with kSumDx dx_bias = sum over tokens of dx as
// stored. Block b takes rows [b R, (b + 1) R) with R = warps * kRowsPerWarp, warp j its rows j, j + warps,
// ...; each warp sums dy xhat, dy (and dx) of its rows in row order into its own shared rows (every lane owns
// its columns, so no races), and the block adds the warps' rows in warp order into partial[b] = (dweight's C
// columns, dbias's C, dx_bias's C): the parameter gradients come out of the same pass over dy and x as dx,
// in a fixed order. A shared row keeps column v kVec + k at k (C / kVec) + v, so a warp's lanes touch
// consecutive words (no bank conflicts). dy w is rounded alike in both passes (no FMA contraction), so where
// every xhat is 0 (C = 1) dx is exactly 0, as on the cpu.
template <class T, class W, int kVec, bool kSumDx>
__global__ void backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const W* __restrict__ w,
                                const float* __restrict__ mean, const float* __restrict__ rstd,
                                T* __restrict__ dx, bool accumulate, float* __restrict__ partial, int64_t T_,
                                int64_t C) {
  constexpr int kSums = kSumDx ? 3 : 2;
  extern __shared__ float warp_rows[];  // per warp: its dweight row, its dbias row (, its dx_bias row)
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t vectors = C / kVec;
  float* dw = warp_rows + warp * kSums * C;
  float* db = dw + C;
  float* dxb = db + C;
  for (int64_t v = lane; v < vectors; v += 32)
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      dw[k * vectors + v] = 0, db[k * vectors + v] = 0;
      if (kSumDx) dxb[k * vectors + v] = 0;
    }
  const int64_t t0 = int64_t{blockIdx.x} * warps * kRowsPerWarp;
  const int64_t t1 = min(t0 + int64_t{warps} * kRowsPerWarp, T_);
  for (int64_t t = t0 + warp; t < t1; t += warps) {
    const T *gr = dy + t * C, *xr = x + t * C;
    const float mu = mean[t], r = rstd[t];
    float sum_g = 0, sum_gx = 0;
    for (int64_t v = lane; v < vectors; v += 32) {
      float g[kVec], xv[kVec], wv[kVec];
      load_floats<kVec>(gr + v * kVec, g);
      load_floats<kVec>(xr + v * kVec, xv);
      load_floats<kVec>(w + v * kVec, wv);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float gw = __fmul_rn(g[k], wv[k]);
        sum_g += gw;
        sum_gx += gw * ((xv[k] - mu) * r);
      }
    }
    const float mean_g = warp_sum(sum_g) / float(C), mean_gx = warp_sum(sum_gx) / float(C);
    for (int64_t v = lane; v < vectors; v += 32) {
      float g[kVec], xv[kVec], wv[kVec], out[kVec];
      load_floats<kVec>(gr + v * kVec, g);
      load_floats<kVec>(xr + v * kVec, xv);
      load_floats<kVec>(w + v * kVec, wv);
      load_or_zero<kVec>(accumulate, dx + t * C + v * kVec, out);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float xhat = (xv[k] - mu) * r;
        out[k] += r * (__fmul_rn(g[k], wv[k]) - mean_g - xhat * mean_gx);
        dw[k * vectors + v] += g[k] * xhat;
        db[k * vectors + v] += g[k];
        if (kSumDx) dxb[k * vectors + v] += rounded_to<T>(out[k]);
      }
      store_floats<kVec>(dx + t * C + v * kVec, out);
    }
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const int64_t at = c % kVec * vectors + c / kVec;
#pragma unroll
    for (int i = 0; i < kSums; ++i) {
      float sum = 0;
      for (int j = 0; j < warps; ++j) sum += warp_rows[(j * kSums + i) * C + at];
      partial[(int64_t{blockIdx.x} * kSums + i) * C + c] = sum;
    }
  }
}

// The second pass: grid row i sums the partials' i-th C columns into out[i] (dweight, dbias, dx_bias); each
// block's partials hold gridDim.y rows of C.
template <class W>
struct ParamGrads {
  W* out[3];
};
template <class W>
__global__ void param_grad_kernel(const float* __restrict__ partial, int64_t partials, int64_t C,
                                  bool accumulate, ParamGrads<W> grads) {
  column_sum(partial + blockIdx.y * C, partials, gridDim.y * C, C, accumulate, grads.out[blockIdx.y]);
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd) {
  const int64_t T = x.shape[0], C = x.shape[1];
  require_f32("layernorm_forward", "mean", mean.dtype);
  require_f32("layernorm_forward", "rstd", rstd.dtype);
  if (T == 0) return;
  dispatch_with_param("layernorm_forward", "x", x, weight, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    constexpr int kVec = kPack16<E>;
    const bool vector = C % kVec == 0 && aligned16({x.data, weight.data, bias.data, y.data});
    auto kernel = vector ? forward_kernel<E, W, kVec> : forward_kernel<E, W, 1>;
    kernel<<<blocks_for(T, kForwardWarps), kForwardWarps * 32, 0, current_stream()>>>(
        data<E>(x), data<W>(weight), data<W>(bias), float(eps), data<E>(y), data<float>(mean),
        data<float>(rstd), T, C);
    PT_CUDA_CHECK_LAUNCH();
  });
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, Write dx_mode, const Tensor& dweight,
                        const Tensor& dbias, Write param_mode, const Tensor& dx_bias) {
  const int64_t T = x.shape[0], C = x.shape[1];
  require_f32("layernorm_backward", "mean", mean.dtype);
  require_f32("layernorm_backward", "rstd", rstd.dtype);
  if (C == 0) return;
  const bool sum_dx = !dx_bias.empty();
  const int sums = sum_dx ? 3 : 2;
  // As many warps (each with two or three shared fp32 rows of C) as fit in the default shared memory, at
  // least one.
  const int64_t warp_bytes = sums * C * int64_t{sizeof(float)};
  const int warps = static_cast<int>(std::clamp<int64_t>(kDefaultShared / warp_bytes, 1, kMaxBackwardWarps));
  const auto shared = static_cast<size_t>(warps * warp_bytes);
  const int64_t rows_per_block = int64_t{warps} * kRowsPerWarp;
  const int64_t partials = (T + rows_per_block - 1) / rows_per_block;
  ScratchPlan plan;
  const size_t partial_at = plan.reserve<float>(partials * sums * C);
  plan.allocate();
  float* partial = plan.at<float>(partial_at);
  const cudaStream_t stream = current_stream();
  dispatch_with_param("layernorm_backward", "x", x, weight, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    constexpr int kVec = kPack16<E>;
    const bool vector = C % kVec == 0 && aligned16({dy.data, x.data, weight.data, dx.data});
    auto kernel = vector ? (sum_dx ? backward_kernel<E, W, kVec, true> : backward_kernel<E, W, kVec, false>)
                         : (sum_dx ? backward_kernel<E, W, 1, true> : backward_kernel<E, W, 1, false>);
    allow_shared_memory(kernel, shared, "layernorm_backward", C, sums * sizeof(float));
    if (T == 0) return;  // dweight and dbias still get their (empty) sums below
    kernel<<<static_cast<unsigned>(partials), warps * 32, shared, stream>>>(
        data<E>(dy), data<E>(x), data<W>(weight), data<float>(mean), data<float>(rstd), data<E>(dx),
        dx_mode == Write::accumulate, partial, T, C);
    PT_CUDA_CHECK_LAUNCH();
  });
  dispatch_with_param("layernorm_backward", "x", x, dweight, [&](auto, auto w) {
    using W = decltype(w);
    const ParamGrads<W> grads{{data<W>(dweight), data<W>(dbias), sum_dx ? data<W>(dx_bias) : nullptr}};
    param_grad_kernel<<<dim3(blocks_for(C, 32), static_cast<unsigned>(sums)), dim3(32, kColumnSumRows), 0,
                        stream>>>(partial, partials, C, param_mode == Write::accumulate, grads);
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
