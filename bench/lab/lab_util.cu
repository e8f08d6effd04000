// Device side of the lab utilities (lab_util.h).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <bit>

#include "lab_util.h"
#include "ops/cuda/check.h"
#include "ops/cuda/stream.h"

namespace pt::lab {

namespace {

__device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_kernel(__nv_bfloat16* p, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float u = static_cast<float>(mix64(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i)) >> 40) *
                    (1.0f / 16777216.0f);
    p[i] = __float2bfloat16(lo + (hi - lo) * u);
  }
}

// Non-negative floats order as their bit patterns, so atomicMax on the bits is a float max.
__global__ void compare_kernel(const __nv_bfloat16* got, const __nv_bfloat16* want, int64_t n,
                               unsigned* max_diff, unsigned* max_want, unsigned long long* nans) {
  float diff = 0.0f, mag = 0.0f;
  unsigned long long bad = 0;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = __bfloat162float(got[i]), y = __bfloat162float(want[i]);
    if (isnan(x)) {
      ++bad;
      continue;
    }
    diff = fmaxf(diff, fabsf(x - y));
    mag = fmaxf(mag, fabsf(y));
  }
  for (int o = 16; o > 0; o /= 2) {
    diff = fmaxf(diff, __shfl_xor_sync(0xffffffffu, diff, o));
    mag = fmaxf(mag, __shfl_xor_sync(0xffffffffu, mag, o));
    bad += __shfl_xor_sync(0xffffffffu, bad, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicMax(max_diff, __float_as_uint(diff));
    atomicMax(max_want, __float_as_uint(mag));
    if (bad != 0) atomicAdd(nans, bad);
  }
}

cudaStream_t stream() { return ops::cuda::current_stream(); }

}  // namespace

void fill_uniform_bf16(void* p, int64_t n, uint64_t seed, float lo, float hi) {
  if (n == 0) return;
  fill_kernel<<<1024, 256, 0, stream()>>>(static_cast<__nv_bfloat16*>(p), n, seed, lo, hi);
  PT_CUDA_CHECK_LAUNCH();
}

Compare compare_bf16(const void* got, const void* want, int64_t n) {
  struct Totals {
    unsigned diff, want;
    unsigned long long nans;
  };
  Totals* d = nullptr;
  PT_CUDA_CHECK(cudaMalloc(&d, sizeof(Totals)));
  PT_CUDA_CHECK(cudaMemsetAsync(d, 0, sizeof(Totals), stream()));
  compare_kernel<<<1024, 256, 0, stream()>>>(static_cast<const __nv_bfloat16*>(got),
                                             static_cast<const __nv_bfloat16*>(want), n, &d->diff, &d->want,
                                             &d->nans);
  PT_CUDA_CHECK_LAUNCH();
  Totals h{};
  PT_CUDA_CHECK(cudaMemcpyAsync(&h, d, sizeof(Totals), cudaMemcpyDeviceToHost, stream()));
  PT_CUDA_CHECK(cudaStreamSynchronize(stream()));
  PT_CUDA_CHECK(cudaFree(d));
  Compare out;
  out.max_abs_diff = std::bit_cast<float>(h.diff);
  out.max_abs_want = std::bit_cast<float>(h.want);
  out.nans = static_cast<int64_t>(h.nans);
  return out;
}

double time_ms(const std::function<void()>& fn, int reps) {
  fn();
  cudaEvent_t start = nullptr, stop = nullptr;
  PT_CUDA_CHECK(cudaEventCreate(&start));
  PT_CUDA_CHECK(cudaEventCreate(&stop));
  PT_CUDA_CHECK(cudaEventRecord(start, stream()));
  for (int i = 0; i < reps; ++i) fn();
  PT_CUDA_CHECK(cudaEventRecord(stop, stream()));
  PT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  PT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(ms) / reps;
}

}  // namespace pt::lab
