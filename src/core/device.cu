#include "core/device.h"

#include <cuda_runtime.h>

namespace pt {

bool built_with_cuda() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::string cuda_device_name(int i) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) return "";
  return prop.name;
}

}  // namespace pt
