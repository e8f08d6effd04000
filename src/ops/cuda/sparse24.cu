// 2:4 sparsity on the GPU. The per-block arithmetic is ops/sparse24_common.h, shared with the cpu
// reference, so masks and MVUE draws are those of the cpu for the same fp32 values.
#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/reduce.cuh"
#include "ops/cuda/scratch.h"
#include "ops/cuda/stream.h"
#include "ops/sparse24_common.h"

#include <algorithm>

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kFlipThreads = 256;
constexpr unsigned kMaxFlipBlocks = 1024;

// One thread per 4x4 block; neighbouring threads take neighbouring blocks of the same 4 rows.
template <class T>
__global__ void transposable_mask_kernel(const T* __restrict__ w, uint8_t* __restrict__ mask, int64_t K,
                                         int64_t blocks) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= blocks) return;
  const int64_t per_row = K / 4, row0 = i / per_row * 4, col0 = i % per_row * 4;
  float v[16];
#pragma unroll
  for (int e = 0; e < 16; ++e) v[e] = load(w + (row0 + e / 4) * K + col0 + e % 4);
  const unsigned bits = sparse24::best_pattern24(v);
#pragma unroll
  for (int e = 0; e < 16; ++e)
    mask[(row0 + e / 4) * K + col0 + e % 4] = static_cast<uint8_t>((bits >> e) & 1u);
}

// Per-thread counts over a grid-stride loop, summed per block and added to one integer total (integer
// atomics are exact, so the count does not depend on their order).
__global__ void flips_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b, int64_t n,
                             unsigned long long* total) {
  unsigned long long count = 0;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    count += (a[i] != 0) != (b[i] != 0);
  count = block_sum(count);
  if (threadIdx.x == 0) atomicAdd(total, count);
}

// pt::float_to_bf16 (core/float16.h) on the device, as ops::cast does it: round to nearest even, NaN
// kept quiet with its sign and payload's high bits.
__device__ __forceinline__ uint16_t float_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if (f != f) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Raw element copies: an equal dtype moves bits unchanged, f32 -> bf16 rounds. Pruned entries are +0.
__device__ __forceinline__ float convert(float x, float) { return x; }
__device__ __forceinline__ uint16_t convert(uint16_t x, uint16_t) { return x; }
__device__ __forceinline__ uint16_t convert(float x, uint16_t) { return float_to_bf16_bits(x); }

template <class In, class Out>
__global__ void apply_mask_kernel(const In* w, const uint8_t* __restrict__ mask, Out* out, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) out[i] = mask[i] ? convert(w[i], Out{}) : Out{};
}

template <class T>
__global__ void masked_decay_kernel(const T* __restrict__ w, const uint8_t* __restrict__ mask, float lambda,
                                    T* __restrict__ grad, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n && !mask[i]) store(grad + i, load(grad + i) + lambda * load(w + i));
}

// One thread per (group of 4 rows, column), columns across neighbouring threads so every row's loads
// and stores coalesce. g and out may be one buffer: a thread reads its 4 entries before writing them.
template <class T>
__global__ void mvue_kernel(const T* g, T* out, int64_t M, int64_t N, int64_t items, uint64_t seed) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= items) return;
  const int64_t q = i / N, n = i % N;
  const int64_t rows = M - 4 * q < 4 ? M - 4 * q : 4;
  float in[4], kept[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) in[r] = r < rows ? load(g + (4 * q + r) * N + n) : 0.0f;
  sparse24::mvue_group24(in, sparse24::mvue_uniform(seed, q, n), kept);
#pragma unroll
  for (int r = 0; r < 4; ++r)
    if (r < rows) store(out + (4 * q + r) * N + n, kept[r]);
}

}  // namespace

void transposable_mask24(const Tensor& w, const Tensor& mask) {
  const int64_t blocks = w.shape[0] / 4 * (w.shape[1] / 4);
  if (blocks == 0) return;
  dispatch_float("transposable_mask24", "w", w.dtype, [&](auto tag) {
    using E = decltype(tag);
    transposable_mask_kernel<<<blocks_for(blocks, kThreads), kThreads, 0, current_stream()>>>(
        data<E>(w), data<uint8_t>(mask), w.shape[1], blocks);
    PT_CUDA_CHECK_LAUNCH();
  });
}

int64_t mask_flips(const Tensor& a, const Tensor& b) {
  const int64_t n = a.numel();
  if (n == 0) return 0;
  ScratchPlan plan;
  const size_t total_at = plan.reserve<unsigned long long>(1);
  plan.allocate();
  auto* total = plan.at<unsigned long long>(total_at);
  const cudaStream_t stream = current_stream();
  PT_CUDA_CHECK(cudaMemsetAsync(total, 0, sizeof *total, stream));
  const unsigned grid = std::min(blocks_for(n, kFlipThreads), kMaxFlipBlocks);
  flips_kernel<<<grid, kFlipThreads, 0, stream>>>(data<uint8_t>(a), data<uint8_t>(b), n, total);
  PT_CUDA_CHECK_LAUNCH();
  unsigned long long flips = 0;
  PT_CUDA_CHECK(cudaMemcpyAsync(&flips, total, sizeof flips, cudaMemcpyDeviceToHost, stream));
  sync_current_stream();
  return static_cast<int64_t>(flips);
}

void apply_mask(const Tensor& w, const Tensor& mask, const Tensor& out) {
  const int64_t n = w.numel();
  if (n == 0) return;
  const unsigned grid = blocks_for(n, kThreads);
  const cudaStream_t stream = current_stream();
  if (w.dtype == DType::f32 && out.dtype == DType::f32)
    apply_mask_kernel<<<grid, kThreads, 0, stream>>>(data<float>(w), data<uint8_t>(mask), data<float>(out),
                                                     n);
  else if (w.dtype == DType::f32 && out.dtype == DType::bf16)
    apply_mask_kernel<<<grid, kThreads, 0, stream>>>(data<float>(w), data<uint8_t>(mask), data<uint16_t>(out),
                                                     n);
  else if (w.dtype == DType::bf16 && out.dtype == DType::bf16)
    apply_mask_kernel<<<grid, kThreads, 0, stream>>>(data<uint16_t>(w), data<uint8_t>(mask),
                                                     data<uint16_t>(out), n);
  else
    throw Error(std::string("apply_mask: ") + dtype_name(w.dtype) + " -> " + dtype_name(out.dtype) +
                " is not supported on cuda; use f32 -> f32, f32 -> bf16 or bf16 -> bf16");
  PT_CUDA_CHECK_LAUNCH();
}

void masked_decay(const Tensor& w, const Tensor& mask, double lambda, const Tensor& grad) {
  const int64_t n = w.numel();
  if (n == 0) return;
  dispatch_float("masked_decay", "w", w.dtype, [&](auto tag) {
    using E = decltype(tag);
    masked_decay_kernel<<<blocks_for(n, kThreads), kThreads, 0, current_stream()>>>(
        data<E>(w), data<uint8_t>(mask), static_cast<float>(lambda), data<E>(grad), n);
    PT_CUDA_CHECK_LAUNCH();
  });
}

void mvue24(const Tensor& g, uint64_t seed, const Tensor& out) {
  const int64_t M = g.shape[0], N = g.shape[1], items = (M + 3) / 4 * N;
  if (items == 0) return;
  dispatch_float("mvue24", "g", g.dtype, [&](auto tag) {
    using E = decltype(tag);
    mvue_kernel<<<blocks_for(items, kThreads), kThreads, 0, current_stream()>>>(data<E>(g), data<E>(out), M,
                                                                                N, items, seed);
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
