#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

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

// d silu(g)/dg = s (1 + g (1 - s)) with s = sigmoid(g).
template <class T, int kVec>
__global__ void backward_kernel(const T* __restrict__ dout, const T* __restrict__ h, T* __restrict__ dh,
                                int64_t F) {
  const int64_t t = blockIdx.x;
  for (int64_t f = int64_t{threadIdx.x} * kVec; f < F; f += int64_t{blockDim.x} * kVec) {
    const Pack<T, kVec> g = load_pack<kVec>(h + t * 2 * F + f), u = load_pack<kVec>(h + t * 2 * F + F + f),
                        d = load_pack<kVec>(dout + t * F + f);
    Pack<T, kVec> dg, du;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float gate = load(&g.v[k]), up = load(&u.v[k]), grad = load(&d.v[k]), s = sigmoid(gate);
      store(&dg.v[k], grad * up * s * (1.0f + gate * (1.0f - s)));
      store(&du.v[k], grad * gate * s);
    }
    store_pack(dh + t * 2 * F + f, dg);
    store_pack(dh + t * 2 * F + F + f, du);
  }
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
      forward_kernel<E, decltype(vec)::value><<<blocks, threads, 0, current_stream()>>>(data<E>(h), data<E>(out), F);
      PT_CUDA_CHECK_LAUNCH();
    });
  });
}

void swiglu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  const int64_t T = h.shape[0], F = h.shape[1] / 2;
  if (T * F == 0) return;
  dispatch_float("swiglu_backward", "h", h.dtype, [&](auto tag) {
    using E = decltype(tag);
    launch_rows<E>(T, F, {dout.data, h.data, dh.data}, [&](auto vec, unsigned blocks, int threads) {
      backward_kernel<E, decltype(vec)::value><<<blocks, threads, 0, current_stream()>>>(data<E>(dout), data<E>(h),
                                                                          data<E>(dh), F);
      PT_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace pt::ops::cuda
