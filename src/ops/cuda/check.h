// Error checks for CUDA runtime calls and kernel launches: a failure becomes a pt::Error naming the source
// line, the call and CUDA's own description, so a bad launch surfaces at the op that made it.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace pt::ops::cuda {

[[noreturn]] inline void throw_cuda_error(const char* file, int line, const char* what, cudaError_t err) {
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + what +
              " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace pt::ops::cuda

#define PT_CUDA_CHECK(call)                                                       \
  do {                                                                            \
    const cudaError_t pt_cuda_err_ = (call);                                      \
    if (pt_cuda_err_ != cudaSuccess)                                              \
      ::pt::ops::cuda::throw_cuda_error(__FILE__, __LINE__, #call, pt_cuda_err_); \
  } while (0)

// After a <<<...>>> launch: reports bad launch configurations (not errors inside the kernel, which surface
// at the next synchronizing call).
#define PT_CUDA_CHECK_LAUNCH() PT_CUDA_CHECK(cudaGetLastError())
