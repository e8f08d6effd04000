// Dynamic shared memory beyond the 48 KiB a kernel may take without asking for it.
#pragma once

#include "core/error.h"
#include "ops/cuda/check.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace pt::ops::cuda {

inline constexpr int kDefaultShared = 48 << 10;

// Lets `kernel` launch with `bytes` of dynamic shared memory, raising its limit where that is above the
// default. Throws, naming `op`, when the device has less: then rows of `columns` columns, `column_bytes`
// each, are too wide for the kernel, and the message says how many columns it takes.
template <class Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes, const char* op, int64_t columns, size_t column_bytes) {
  if (bytes <= size_t{kDefaultShared}) return;
  int device = 0, most = 0;
  PT_CUDA_CHECK(cudaGetDevice(&device));
  PT_CUDA_CHECK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<size_t>(most))
    throw Error(std::string(op) + ": rows of " + std::to_string(columns) + " columns need " +
                std::to_string(bytes) + " bytes of shared memory, more than this device's " +
                std::to_string(most) + "; the cuda kernel takes up to " +
                std::to_string(static_cast<size_t>(most) / column_bytes) + " columns");
  PT_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace pt::ops::cuda
