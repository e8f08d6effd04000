#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/cusparselt_pack.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/mvue_pack.cuh"
#include "ops/cuda/param_sums.cuh"
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

// The two forms for the kernels below: the value and the derivative.
struct TanhForm {
  static __device__ __forceinline__ float value(float h) { return gelu(h); }
  static __device__ __forceinline__ float grad(float h) { return gelu_grad(h); }
};

// Exact GELU h Phi(h) and its derivative Phi(h) + h phi(h), with Phi(h) = erfc(-h / sqrt 2) / 2 from the
// Chebyshev fit of erfc in Press et al., Numerical Recipes, sec. 6.2 (fractional error below 1.2e-7 for
// z >= 0): one reciprocal, nine FMAs and one hardware exp a value, branch-free. Through erfc the negative
// tail keeps its relative accuracy (7.3e-6 in float at h = -8, from rounding the exponent), where
// (1 + erf(h / sqrt 2)) / 2 cancels to 0. It runs at about twice normcdff's speed, near the tanh form's
// (`bench_cuda_ops --tokens 20480 --hidden 768`).
struct ErfForm {
  static constexpr float kInvSqrt2 = 0.7071067812f, kInvSqrt2Pi = 0.3989422804f;
  // erfc(z) for z >= 0.
  static __device__ __forceinline__ float erfc_fit(float z) {
    const float t = __fdividef(1.0f, 1.0f + 0.5f * z);
    constexpr float kCoefficients[] = {-0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                       -0.18628806f, 0.09678418f, 0.37409196f,  1.00002368f};
    float p = 0.17087277f;
#pragma unroll
    for (const float c : kCoefficients) p = fmaf(p, t, c);
    return t * __expf(fmaf(p, t, -1.26551223f) - z * z);
  }
  static __device__ __forceinline__ float cdf(float h) {
    const float half_tail = 0.5f * erfc_fit(fabsf(h) * kInvSqrt2);
    return h < 0.0f ? half_tail : 1.0f - half_tail;
  }
  static __device__ __forceinline__ float value(float h) { return h * cdf(h); }
  static __device__ __forceinline__ float grad(float h) {
    return cdf(h) + h * kInvSqrt2Pi * __expf(-0.5f * h * h);
  }
};

// Grid-stride loops over the n = T F elements as one flat range (rows are contiguous): whole vectors of
// kVec elements when `vector` (every pointer 16-byte aligned), then the rest one element per thread.
// A thread reads its elements before writing them, so out may be h (no __restrict__).
template <class Form, class T>
__global__ void forward_kernel(const T* h, T* out, int64_t n, bool vector) {
  constexpr int kVec = kPack16<T>;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x,
                stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t body = vector ? n / kVec * kVec : 0;
  for (int64_t i = first * kVec; i < body; i += stride * kVec) {
    float v[kVec];
    load_floats<kVec>(h + i, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = Form::value(v[k]);
    store_floats<kVec>(out + i, v);
  }
  for (int64_t i = body + first; i < n; i += stride) store(out + i, Form::value(load(h + i)));
}

// As forward_kernel; dh may be dout or h.
template <class Form, class T>
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
    for (int k = 0; k < kVec; ++k) g[k] *= Form::grad(v[k]);
    store_floats<kVec>(dh + i, g);
  }
  for (int64_t i = body + first; i < n; i += stride) store(dh + i, load(dout + i) * Form::grad(load(h + i)));
}

// backward_kernel with the first pass of dh's column sums (param_sums.cuh's tiling; column_sum_kernel adds
// the partials up): the bias gradient of the linear layer making h, in the same pass. Every row's loads are
// issued before any store, since dh may be dout or h; the sums take dh as stored (rounded to T), so they
// equal bias_backward's over dh.
template <class Form, class T, int kVec>
__global__ void backward_bias_kernel(const T* dout, const T* h, T* dh, float* __restrict__ partial, int64_t M,
                                     int64_t N) {
  const int64_t v = int64_t{blockIdx.y} * 32 + threadIdx.x;
  const int64_t r0 = int64_t{blockIdx.x} * kPartialRows + threadIdx.y;
  float sum[kVec] = {};
  if (v < N / kVec) {
    Pack<T, kVec> g[kPartialRowsPerWarp], x[kPartialRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kPartialRowsPerWarp; ++i) {
      const int64_t at = (r0 + int64_t{i} * kPartialWarps) * N + v * kVec;
      if (r0 + i * kPartialWarps < M) g[i] = load_pack<kVec>(dout + at), x[i] = load_pack<kVec>(h + at);
    }
#pragma unroll
    for (int i = 0; i < kPartialRowsPerWarp; ++i) {
      if (r0 + i * kPartialWarps >= M) break;
      Pack<T, kVec> out;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        store(&out.v[k], load(&g[i].v[k]) * Form::grad(load(&x[i].v[k])));
        sum[k] += load(&out.v[k]);
      }
      store_pack(dh + (r0 + int64_t{i} * kPartialWarps) * N + v * kVec, out);
    }
  }
  store_block_partial(sum, N, partial);
}

// backward_kernel (bf16) for rows [0, C) that also prunes dh by MVUE24 and packs it as the fc weight
// gradient's A = mvue24(dh)^T [F, C] (ops/cuda/mvue_pack.cuh): a CTA takes 64 tokens and 64 features and
// packs their tile of A from the bf16 values it stores in dh, so the packed values are those of dh.
template <class Form>
__global__ void __launch_bounds__(mvue_pack::kThreads, 4)
    backward_mvue_pack_kernel(const __nv_bfloat16* __restrict__ dout, const __nv_bfloat16* __restrict__ h,
                              __nv_bfloat16* __restrict__ dh, int64_t F, int64_t C, uint32_t seed_hash,
                              uint4* __restrict__ values, uint32_t* __restrict__ meta) {
  using mvue_pack::kTile;
  __shared__ mvue_pack::Tile tile;
  const int64_t token0 = int64_t{blockIdx.x} * kTile, j0 = int64_t{blockIdx.y} * kTile;
  const int quad = mvue_pack::quad(), group = mvue_pack::group();
  float g[4][4];  // [feature 4 quad + k][token 4 group + i], as stored in dh (bf16)
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t at = (token0 + 4 * group + i) * F + j0 + 4 * quad;
    const Pack<__nv_bfloat16, 4> x = load_pack<4>(h + at), d = load_pack<4>(dout + at);
    Pack<__nv_bfloat16, 4> out;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      store(&out.v[k], load(&d.v[k]) * Form::grad(load(&x.v[k])));
      g[k][i] = load(&out.v[k]);
    }
    store_pack(dh + at, out);
  }
  const uint32_t group_hash = sparse24::mvue_group_hash(seed_hash, token0 / 4 + group);
#pragma unroll
  for (int k = 0; k < 4; ++k) mvue_pack::keep(tile, g[k], group_hash, 4 * quad + k, j0 + 4 * quad + k);
  __syncthreads();
  mvue_pack::store(tile, j0, token0, C, values, meta);
}

// Blocks for n elements taken kVec at a time (the vector body) or one at a time.
template <class T>
unsigned blocks_for_elements(int64_t n, bool vector) {
  return grid_stride_blocks(vector ? (n + kPack16<T> - 1) / kPack16<T> : n, kThreads);
}

template <class Form>
void forward(const char* op, const Tensor& h, const Tensor& out) {
  const int64_t n = h.numel();
  if (n == 0) return;
  dispatch_float(op, "h", h.dtype, [&](auto tag) {
    using E = decltype(tag);
    const bool vector = aligned16({h.data, out.data});
    forward_kernel<Form, E><<<blocks_for_elements<E>(n, vector), kThreads, 0, current_stream()>>>(
        data<E>(h), data<E>(out), n, vector);
    PT_CUDA_CHECK_LAUNCH();
  });
}

template <class Form>
void backward(const char* op, const Tensor& dout, const Tensor& h, const Tensor& dh) {
  const int64_t n = h.numel();
  if (n == 0) return;
  dispatch_float(op, "h", h.dtype, [&](auto tag) {
    using E = decltype(tag);
    const bool vector = aligned16({dout.data, h.data, dh.data});
    backward_kernel<Form, E><<<blocks_for_elements<E>(n, vector), kThreads, 0, current_stream()>>>(
        data<E>(dout), data<E>(h), data<E>(dh), n, vector);
    PT_CUDA_CHECK_LAUNCH();
  });
}

// backward, and with dbias the column sums of dh into it (two passes in all, the first over dh's rows).
template <class Form>
void backward(const char* op, const Tensor& dout, const Tensor& h, const Tensor& dh, const Tensor& dbias,
              Write dbias_mode) {
  if (dbias.empty()) return backward<Form>(op, dout, h, dh);
  const int64_t M = h.shape[0], N = h.shape[1];
  if (N == 0) return;
  const auto [partial, partials] = column_partials(M, N);
  const cudaStream_t stream = current_stream();
  dispatch_with_param(op, "h", h, dbias, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    if (M > 0)  // with no rows, dbias still gets its (empty) sum below
      launch_tiles<E>(op, N, N, {dout.data, h.data, dh.data}, [&](auto vec, unsigned tiles) {
        backward_bias_kernel<Form, E, decltype(vec)::value>
            <<<dim3(static_cast<unsigned>(partials), tiles), dim3(32, kPartialWarps), 0, stream>>>(
                data<E>(dout), data<E>(h), data<E>(dh), partial, M, N);
        PT_CUDA_CHECK_LAUNCH();
      });
    column_sum_kernel<<<blocks_for(N, 32), dim3(32, kColumnSumRows), 0, stream>>>(
        partial, partials, N, dbias_mode == Write::accumulate, data<W>(dbias));
    PT_CUDA_CHECK_LAUNCH();
  });
}

// gelu_backward (or gelu_erf_backward) whose dh also feeds the fc's sparse weight gradient (cuda_ops.h).
template <class Form>
bool backward_mvue_packed(const char* op, const Tensor& dout, const Tensor& h, const Tensor& dh,
                          uint64_t seed, int64_t rows, void* packed) {
  const int64_t T = h.shape[0], F = h.shape[1];
  const bool fits = rows > 0 && rows <= T && cusparselt_pack_fits(F, rows) && F % mvue_pack::kTile == 0 &&
                    h.dtype == DType::bf16 && dout.dtype == DType::bf16 && dh.dtype == DType::bf16 &&
                    aligned16({dout.data, h.data, dh.data, packed});
  if (!fits) {
    backward<Form>(op, dout, h, dh);
    return false;
  }
  const mvue_pack::Packed a = mvue_pack::packed_parts(packed, F, rows);
  const dim3 grid(static_cast<unsigned>(rows / mvue_pack::kTile),
                  static_cast<unsigned>(F / mvue_pack::kTile));
  backward_mvue_pack_kernel<Form><<<grid, mvue_pack::kThreads, 0, current_stream()>>>(
      data<__nv_bfloat16>(dout), data<__nv_bfloat16>(h), data<__nv_bfloat16>(dh), F, rows,
      sparse24::mvue_seed_hash(seed), a.values, a.meta);
  PT_CUDA_CHECK_LAUNCH();
  if (rows < T) backward<Form>(op, dout.rows(rows, T), h.rows(rows, T), dh.rows(rows, T));  // unpruned
  return true;
}

}  // namespace

void gelu_forward(const Tensor& h, const Tensor& out) { forward<TanhForm>("gelu_forward", h, out); }

void gelu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh, const Tensor& dbias,
                   Write dbias_mode) {
  backward<TanhForm>("gelu_backward", dout, h, dh, dbias, dbias_mode);
}

void gelu_erf_forward(const Tensor& h, const Tensor& out) { forward<ErfForm>("gelu_erf_forward", h, out); }

void gelu_erf_backward(const Tensor& dout, const Tensor& h, const Tensor& dh, const Tensor& dbias,
                       Write dbias_mode) {
  backward<ErfForm>("gelu_erf_backward", dout, h, dh, dbias, dbias_mode);
}

bool gelu_backward_mvue_packed(const Tensor& dout, const Tensor& h, const Tensor& dh, uint64_t seed,
                               int64_t rows, void* packed) {
  return backward_mvue_packed<TanhForm>("gelu_backward", dout, h, dh, seed, rows, packed);
}

bool gelu_erf_backward_mvue_packed(const Tensor& dout, const Tensor& h, const Tensor& dh, uint64_t seed,
                                   int64_t rows, void* packed) {
  return backward_mvue_packed<ErfForm>("gelu_erf_backward", dout, h, dh, seed, rows, packed);
}

}  // namespace pt::ops::cuda
