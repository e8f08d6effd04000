#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/stream.h"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void add_kernel(const T* src, T* dst, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) store(dst + i, load(dst + i) + load(src + i));
}

}  // namespace

void add(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  dispatch_float("add", "dst", dst.dtype, [&](auto tag) {
    using E = decltype(tag);
    add_kernel<<<blocks_for(n, kThreads), kThreads, 0, current_stream()>>>(data<E>(src), data<E>(dst), n);
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
