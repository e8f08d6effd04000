#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kCastVec = 8;  // elements per thread and step of a cast: 16 bytes of bf16, 32 of f32

// Grid-stride loops over whole vectors of kVec elements, then the n % kVec tail one element per thread.
// A thread reads its elements before writing them, so src may be dst.
template <class S, class T, int kVec>
__global__ void add_kernel(const S* src, T* dst, int64_t n) {
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x,
                stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t body = n / kVec * kVec;
  for (int64_t i = first * kVec; i < body; i += stride * kVec) {
    float a[kVec], b[kVec];
    load_floats<kVec>(dst + i, a);
    load_floats<kVec>(src + i, b);
#pragma unroll
    for (int k = 0; k < kVec; ++k) a[k] += b[k];
    store_floats<kVec>(dst + i, a);
  }
  for (int64_t i = body + first; i < n; i += stride) store(dst + i, load(dst + i) + load(src + i));
}

__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// kVec = kCastVec moves 2 x 16 bytes of f32 and 16 bytes of bf16 per step; kVec = 1 is the unaligned path.
template <int kVec>
__global__ void f32_to_bf16_kernel(const float* __restrict__ src, uint16_t* __restrict__ dst, int64_t n) {
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x,
                stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t body = n / kVec * kVec;
  for (int64_t i = first * kVec; i < body; i += stride * kVec) {
    float f[kVec];
    load_floats<kVec>(src + i, f);
    Pack<uint16_t, kVec> h;
#pragma unroll
    for (int k = 0; k < kVec; ++k) h.v[k] = float_to_bf16_bits(f[k]);
    store_pack(dst + i, h);
  }
  for (int64_t i = body + first; i < n; i += stride) dst[i] = float_to_bf16_bits(src[i]);
}

template <int kVec>
__global__ void bf16_to_f32_kernel(const uint16_t* __restrict__ src, float* __restrict__ dst, int64_t n) {
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x,
                stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t body = n / kVec * kVec;
  for (int64_t i = first * kVec; i < body; i += stride * kVec) {
    const Pack<uint16_t, kVec> h = load_pack<kVec>(src + i);
    float f[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) f[k] = bf16_bits_to_float(h.v[k]);
    store_floats<kVec>(dst + i, f);
  }
  for (int64_t i = body + first; i < n; i += stride) dst[i] = bf16_bits_to_float(src[i]);
}

}  // namespace

void cast(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const bool vector = aligned16({src.data, dst.data});
  const unsigned blocks = grid_stride_blocks(vector ? n / kCastVec + 1 : n, kThreads);
  const cudaStream_t stream = current_stream();
  if (src.dtype == DType::f32) {
    auto kernel = vector ? f32_to_bf16_kernel<kCastVec> : f32_to_bf16_kernel<1>;
    kernel<<<blocks, kThreads, 0, stream>>>(data<float>(src), data<uint16_t>(dst), n);
  } else {
    auto kernel = vector ? bf16_to_f32_kernel<kCastVec> : bf16_to_f32_kernel<1>;
    kernel<<<blocks, kThreads, 0, stream>>>(data<uint16_t>(src), data<float>(dst), n);
  }
  PT_CUDA_CHECK_LAUNCH();
}

void copy(const Tensor& src, const Tensor& dst) {
  PT_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, static_cast<size_t>(src.bytes()),
                                cudaMemcpyDeviceToDevice, current_stream()));
}

void add(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const bool vector = aligned16({src.data, dst.data});
  const auto launch = [&](auto src_tag, auto dst_tag) {
    using S = decltype(src_tag);
    using T = decltype(dst_tag);
    constexpr int kVec = kPack16<T>;
    auto kernel = vector ? add_kernel<S, T, kVec> : add_kernel<S, T, 1>;
    kernel<<<grid_stride_blocks(vector ? n / kVec + 1 : n, kThreads), kThreads, 0, current_stream()>>>(
        data<S>(src), data<T>(dst), n);
    PT_CUDA_CHECK_LAUNCH();
  };
  if (src.dtype == DType::bf16 && dst.dtype == DType::f32) return launch(__nv_bfloat16{}, float{});
  dispatch_float("add", "dst", dst.dtype, [&](auto tag) { launch(tag, tag); });
}

}  // namespace pt::ops::cuda
