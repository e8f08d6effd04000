#include "ops/cuda/stream.h"

#include "ops/cuda/check.h"

namespace pt::ops::cuda {

cudaStream_t current_stream() { return nullptr; }  // the default stream, for now

void sync_current_stream() { PT_CUDA_CHECK(cudaStreamSynchronize(current_stream())); }

}  // namespace pt::ops::cuda
