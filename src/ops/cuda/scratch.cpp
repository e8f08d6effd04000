#include "ops/cuda/scratch.h"

#include <mutex>

#include "ops/cuda/check.h"

namespace pt::ops::cuda {

void ScratchPlan::allocate() {
  static std::mutex mutex;
  static void* buffer = nullptr;
  static size_t capacity = 0;
  const std::lock_guard lock(mutex);
  if (bytes_ > capacity) {
    if (buffer) PT_CUDA_CHECK(cudaFree(buffer));
    buffer = nullptr;
    capacity = 0;
    PT_CUDA_CHECK(cudaMalloc(&buffer, bytes_));
    capacity = bytes_;
  }
  base_ = static_cast<char*>(buffer);
}

}  // namespace pt::ops::cuda
