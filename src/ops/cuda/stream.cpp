#include "ops/cuda/stream.h"

#include "ops/cuda/check.h"

namespace pt::ops::cuda {

cudaStream_t current_stream() { return nullptr; }  // the default stream, for now

cudaStream_t copy_stream() {
  static const cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    PT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  return stream;
}

void sync_current_stream() { PT_CUDA_CHECK(cudaStreamSynchronize(current_stream())); }

}  // namespace pt::ops::cuda
