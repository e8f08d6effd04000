#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/cusparselt_pack.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/mvue_pack.cuh"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;

// The hardware's exp2 and reciprocal (2 ulp, far below bf16's rounding): the IEEE expf and division cost
// about 20 instructions per element, which the fused MVUE backward (compute-bound) pays in full.
// __fdividef(1, x) is 0 for x past 2^126, the sigmoid's own limit.
__device__ __forceinline__ float sigmoid(float g) { return __fdividef(1.0f, 1.0f + __expf(-g)); }

// One block per token row t, its threads striding over f in vectors of kVec elements (16-byte accesses
// where F and the pointers allow): gate h[t, f] and up h[t, F + f] are read together.
template <class T, int kVec>
__global__ void forward_kernel(const T* __restrict__ h, T* __restrict__ out, int64_t F) {
  const int64_t t = blockIdx.x;
  const T* gate = h + t * 2 * F;
  const T* up = gate + F;
  for (int64_t f = int64_t{threadIdx.x} * kVec; f < F; f += int64_t{blockDim.x} * kVec) {
    const Pack<T, kVec> g = load_pack<kVec>(gate + f), u = load_pack<kVec>(up + f);
    Pack<T, kVec> o;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float x = load(&g.v[k]);
      store(&o.v[k], x * sigmoid(x) * load(&u.v[k]));
    }
    store_pack(out + t * F + f, o);
  }
}

// The gradients of silu(gate) * up from the output's: d silu(g)/dg = s (1 + g (1 - s)) with s = sigmoid(g).
// One function for both backward kernels, so they round alike.
template <class T>
__device__ __forceinline__ void swiglu_grad(T grad, T gate, T up, T& dgate, T& dup) {
  const float g = load(&gate), u = load(&up), d = load(&grad), s = sigmoid(g);
  store(&dgate, d * u * s * (1.0f + g * (1.0f - s)));
  store(&dup, d * g * s);
}

template <class T, int kVec>
__global__ void backward_kernel(const T* __restrict__ dout, const T* __restrict__ h, T* __restrict__ dh,
                                int64_t F) {
  const int64_t t = blockIdx.x;
  for (int64_t f = int64_t{threadIdx.x} * kVec; f < F; f += int64_t{blockDim.x} * kVec) {
    const Pack<T, kVec> g = load_pack<kVec>(h + t * 2 * F + f), u = load_pack<kVec>(h + t * 2 * F + F + f),
                        d = load_pack<kVec>(dout + t * F + f);
    Pack<T, kVec> dg, du;
#pragma unroll
    for (int k = 0; k < kVec; ++k) swiglu_grad(d.v[k], g.v[k], u.v[k], dg.v[k], du.v[k]);
    store_pack(dh + t * 2 * F + f, dg);
    store_pack(dh + t * 2 * F + F + f, du);
  }
}

// backward_kernel (bf16) for rows [0, C) that also prunes dh by MVUE24 and packs it as the gate_up weight
// gradient's A = mvue24(dh)^T [2F, C] (ops/cuda/mvue_pack.cuh): a CTA takes 64 tokens and 64 gate features
// j0.. with their up features F + j0.., so it computes both halves of dh and packs one tile of A from each.
// At most 64 registers, so that 4 CTAs share an SM (76 left room for 3) to hide the loads' latency.
__global__ void __launch_bounds__(mvue_pack::kThreads, 4)
    backward_mvue_pack_kernel(const __nv_bfloat16* __restrict__ dout, const __nv_bfloat16* __restrict__ h,
                              __nv_bfloat16* __restrict__ dh, int64_t F, int64_t C, uint32_t seed_hash,
                              uint4* __restrict__ values, uint32_t* __restrict__ meta) {
  using mvue_pack::kTile;
  __shared__ mvue_pack::Tile gate_tile, up_tile;
  const int64_t token0 = int64_t{blockIdx.x} * kTile, j0 = int64_t{blockIdx.y} * kTile;
  const int quad = mvue_pack::quad(), group = mvue_pack::group();
  float dgate[4][4], dup[4][4];  // [feature 4 quad + k][token 4 group + i], as stored in dh (bf16)
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t t = token0 + 4 * group + i, j = j0 + 4 * quad;
    const Pack<__nv_bfloat16, 4> g = load_pack<4>(h + t * 2 * F + j), u = load_pack<4>(h + t * 2 * F + F + j),
                                 d = load_pack<4>(dout + t * F + j);
    Pack<__nv_bfloat16, 4> dg, du;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      swiglu_grad(d.v[k], g.v[k], u.v[k], dg.v[k], du.v[k]);
      dgate[k][i] = load(&dg.v[k]), dup[k][i] = load(&du.v[k]);
    }
    store_pack(dh + t * 2 * F + j, dg);
    store_pack(dh + t * 2 * F + F + j, du);
  }
  const uint32_t group_hash = sparse24::mvue_group_hash(seed_hash, token0 / 4 + group);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int feature = 4 * quad + k;
    mvue_pack::keep(gate_tile, dgate[k], group_hash, feature, j0 + feature);
    mvue_pack::keep(up_tile, dup[k], group_hash, feature, F + j0 + feature);
  }
  __syncthreads();
  mvue_pack::store(gate_tile, j0, token0, C, values, meta);
  mvue_pack::store(up_tile, F + j0, token0, C, values, meta);
}

// Launches kernel<E, vector width> over T rows: 16-byte vectors when every row start is 16-byte aligned.
template <class E, class Launch>
void launch_rows(int64_t T, int64_t F, std::initializer_list<const void*> pointers, Launch&& launch) {
  constexpr int kVec = kPack16<E>;
  const bool vector = F % kVec == 0 && aligned16(pointers);
  const int64_t per_row = vector ? F / kVec : F;
  const int threads = static_cast<int>(std::min<int64_t>(kThreads, (per_row + 31) / 32 * 32));
  if (vector)
    launch(std::integral_constant<int, kVec>{}, static_cast<unsigned>(T), threads);
  else
    launch(std::integral_constant<int, 1>{}, static_cast<unsigned>(T), threads);
}

}  // namespace

void swiglu_forward(const Tensor& h, const Tensor& out) {
  const int64_t T = h.shape[0], F = h.shape[1] / 2;
  if (T * F == 0) return;
  dispatch_float("swiglu_forward", "h", h.dtype, [&](auto tag) {
    using E = decltype(tag);
    launch_rows<E>(T, F, {h.data, out.data}, [&](auto vec, unsigned blocks, int threads) {
      forward_kernel<E, decltype(vec)::value>
          <<<blocks, threads, 0, current_stream()>>>(data<E>(h), data<E>(out), F);
      PT_CUDA_CHECK_LAUNCH();
    });
  });
}

bool swiglu_backward_mvue_packed(const Tensor& dout, const Tensor& h, const Tensor& dh, uint64_t seed,
                                 int64_t rows, void* packed) {
  const int64_t T = h.shape[0], F = h.shape[1] / 2;
  const bool fits = rows > 0 && rows <= T && cusparselt_pack_fits(2 * F, rows) && F % mvue_pack::kTile == 0 &&
                    h.dtype == DType::bf16 && dout.dtype == DType::bf16 && dh.dtype == DType::bf16 &&
                    aligned16({dout.data, h.data, dh.data, packed});
  if (!fits) {
    swiglu_backward(dout, h, dh);
    return false;
  }
  const mvue_pack::Packed a = mvue_pack::packed_parts(packed, 2 * F, rows);
  const dim3 grid(static_cast<unsigned>(rows / mvue_pack::kTile),
                  static_cast<unsigned>(F / mvue_pack::kTile));
  backward_mvue_pack_kernel<<<grid, mvue_pack::kThreads, 0, current_stream()>>>(
      data<__nv_bfloat16>(dout), data<__nv_bfloat16>(h), data<__nv_bfloat16>(dh), F, rows,
      sparse24::mvue_seed_hash(seed), a.values, a.meta);
  PT_CUDA_CHECK_LAUNCH();
  if (rows < T) swiglu_backward(dout.rows(rows, T), h.rows(rows, T), dh.rows(rows, T));  // unpruned
  return true;
}

void swiglu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  const int64_t T = h.shape[0], F = h.shape[1] / 2;
  if (T * F == 0) return;
  dispatch_float("swiglu_backward", "h", h.dtype, [&](auto tag) {
    using E = decltype(tag);
    launch_rows<E>(T, F, {dout.data, h.data, dh.data}, [&](auto vec, unsigned blocks, int threads) {
      backward_kernel<E, decltype(vec)::value>
          <<<blocks, threads, 0, current_stream()>>>(data<E>(dout), data<E>(h), data<E>(dh), F);
      PT_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace pt::ops::cuda
