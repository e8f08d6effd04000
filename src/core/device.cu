#include "core/device.h"

#include "core/error.h"

#include <cuda_runtime.h>

#include <cstring>
#include <string>

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

void* cuda_malloc_zeroed(size_t bytes) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaSuccess) err = cudaMemset(p, 0, bytes);
  if (err != cudaSuccess)
    throw Error("cannot allocate " + std::to_string(bytes >> 20) +
                " MiB of GPU memory: " + cudaGetErrorString(err));
  return p;
}

void cuda_free(void* p) { cudaFree(p); }

void* cuda_host_alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (err != cudaSuccess)
    throw Error("cannot allocate " + std::to_string(bytes >> 20) +
                " MiB of pinned host memory: " + cudaGetErrorString(err));
  return p;
}

void cuda_host_free(void* p) { cudaFreeHost(p); }

void cuda_synchronize() {
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) throw Error(std::string("GPU work failed: ") + cudaGetErrorString(err));
}

void copy_bytes(void* dst, bool dst_on_gpu, const void* src, bool src_on_gpu, size_t bytes) {
  if (!dst_on_gpu && !src_on_gpu) {  // host to host needs no driver
    std::memcpy(dst, src, bytes);
    return;
  }
  auto kind = dst_on_gpu ? (src_on_gpu ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                         : (src_on_gpu ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  cudaError_t err = cudaMemcpy(dst, src, bytes, kind);
  if (err != cudaSuccess)
    throw Error("copy of " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(err));
}

void zero_bytes(void* dst, bool on_gpu, size_t bytes) {
  if (!on_gpu) {
    std::memset(dst, 0, bytes);
    return;
  }
  cudaError_t err = cudaMemset(dst, 0, bytes);
  if (err != cudaSuccess) throw Error("zeroing " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(err));
}

double cuda_memory_used_gib() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return static_cast<double>(total - free) / (1024.0 * 1024.0 * 1024.0);
}

int64_t cuda_free_memory_bytes() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return static_cast<int64_t>(free);
}

double cuda_peak_bf16_flops() {
  const std::string name = cuda_device_name(0);
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos) return 989e12;
  if (name.find("A100") != std::string::npos) return 312e12;
  return 0;
}

}  // namespace pt
