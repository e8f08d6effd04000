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
#include <cstdint>
#include <cstring>
#include <type_traits>

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

// A row's kVec elements as one access of PackBits, the builtin vector type of their size, through the
// cache-streaming __ldcs / __stcs: every byte is read and written once, so it should not push other data
// out of L2, and the builtin type keeps each access whole (the compiler split some Pack stores into
// scalar ones). The conversions are those of load() and store().
template <class T, int kVec, int kBytes = static_cast<int>(sizeof(T)) * kVec>
using PackBits = std::conditional_t<
    kBytes == 16, uint4,
    std::conditional_t<kBytes == 8, uint2, std::conditional_t<kBytes == 4, unsigned, unsigned short>>>;

template <int kVec, class T>
__device__ __forceinline__ void load_row(const T* p, float (&out)[kVec]) {
  using Bits = PackBits<T, kVec>;
  const Bits bits = __ldcs(reinterpret_cast<const Bits*>(p));
  Pack<T, kVec> pack;
  static_assert(sizeof pack == sizeof bits);
  memcpy(&pack, &bits, sizeof pack);
#pragma unroll
  for (int k = 0; k < kVec; ++k) out[k] = load(&pack.v[k]);
}

template <int kVec, class T>
__device__ __forceinline__ void store_row(T* p, const float (&in)[kVec]) {
  using Bits = PackBits<T, kVec>;
  Pack<T, kVec> pack;
#pragma unroll
  for (int k = 0; k < kVec; ++k) store(&pack.v[k], in[k]);
  Bits bits;
  memcpy(&bits, &pack, sizeof bits);
  __stcs(reinterpret_cast<Bits*>(p), bits);
}

// One thread per group of 4 rows and kVec consecutive columns, moved in one access per row (16 bytes
// at the widest); threads along x take neighbouring column vectors of the same rows, so every warp reads
// and writes whole 16-byte-aligned runs of each row. Groups go along y in a grid-stride loop (gridDim.y
// is capped at 65535), so no thread divides 64-bit indices. The rows past M of the last group enter the
// MVUE as 0 and are not stored, as on the cpu. g and out may be one buffer: a thread reads its entries
// before writing them, and no other thread touches them.
template <class T, int kVec>
__global__ void __launch_bounds__(kThreads)
    mvue_kernel(const T* g, T* out, int64_t M, int64_t N, int64_t groups, int64_t first_group,
                uint32_t seed_hash) {
  const int64_t n0 = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * kVec;
  if (n0 >= N) return;
  for (int64_t q = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; q < groups;
       q += int64_t{gridDim.y} * blockDim.y) {
    const int64_t offset = 4 * q * N + n0;
    const int rows = M - 4 * q < 4 ? static_cast<int>(M - 4 * q) : 4;
    float in[4][kVec] = {}, kept[4][kVec];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      if (r < rows) load_row<kVec>(g + offset + r * N, in[r]);
    }
    const uint32_t group_hash = sparse24::mvue_group_hash(seed_hash, first_group + q);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float column[4] = {in[0][k], in[1][k], in[2][k], in[3][k]};
      float result[4];
      sparse24::mvue_group24(column, sparse24::mvue_uniform_at(group_hash, n0 + k), result);
#pragma unroll
      for (int r = 0; r < 4; ++r) kept[r][k] = result[r];
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
      if (r < rows) store_row<kVec>(out + offset + r * N, kept[r]);
  }
}

// Launches mvue_kernel with the widest kVec (at most 16 bytes) that divides N and to which both pointers
// are aligned, so every row's vectors are aligned; kVec = 1 takes any shape and offset. A block is 256
// threads: kThreads along the columns for wide tensors, fewer (down to a warp) with several groups per
// block for narrow ones.
template <class T, int kVec = kPack16<T>>
void launch_mvue(const T* g, T* out, int64_t M, int64_t N, int64_t first_group, uint64_t seed) {
  if constexpr (kVec > 1) {
    const auto aligned = [](const void* p) {
      return reinterpret_cast<uintptr_t>(p) % (kVec * sizeof(T)) == 0;
    };
    if (N % kVec != 0 || !aligned(g) || !aligned(out))
      return launch_mvue<T, kVec / 2>(g, out, M, N, first_group, seed);
  }
  const int64_t vectors = N / kVec, groups = (M + 3) / 4;
  int x = 32;
  while (x < kThreads && x < vectors) x *= 2;
  const dim3 block(x, kThreads / x);
  constexpr int64_t kMaxGridY = 65535;
  const dim3 grid(blocks_for(vectors, x),
                  static_cast<unsigned>(std::min(kMaxGridY, (groups + block.y - 1) / block.y)));
  mvue_kernel<T, kVec><<<grid, block, 0, current_stream()>>>(g, out, M, N, groups, first_group,
                                                             sparse24::mvue_seed_hash(seed));
  PT_CUDA_CHECK_LAUNCH();
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

void mvue24(const Tensor& g, uint64_t seed, const Tensor& out, int64_t first_row) {
  const int64_t M = g.shape[0], N = g.shape[1];
  if (M == 0 || N == 0) return;
  if (first_row % 4 != 0)
    throw Error("mvue24: first_row must be a multiple of 4, got " + std::to_string(first_row));
  dispatch_float("mvue24", "g", g.dtype, [&](auto tag) {
    using E = decltype(tag);
    launch_mvue(data<E>(g), data<E>(out), M, N, first_row / 4, seed);
  });
}

}  // namespace pt::ops::cuda
