#include "core/device.h"

#include "core/error.h"

#include <cstring>

namespace pt {

bool built_with_cuda() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { return ""; }

void* cuda_malloc_zeroed(size_t) { fail("this build has no CUDA: rebuild where nvcc is installed"); }
void cuda_free(void*) {}
void* cuda_host_alloc(size_t) { fail("this build has no CUDA: pinned host memory needs it"); }
void cuda_host_free(void*) {}
void cuda_synchronize() {}

void copy_bytes(void* dst, bool dst_on_gpu, const void* src, bool src_on_gpu, size_t bytes) {
  if (dst_on_gpu || src_on_gpu) fail("this build has no CUDA: rebuild where nvcc is installed");
  std::memcpy(dst, src, bytes);
}

void zero_bytes(void* dst, bool on_gpu, size_t bytes) {
  if (on_gpu) fail("this build has no CUDA: rebuild where nvcc is installed");
  std::memset(dst, 0, bytes);
}

double cuda_memory_used_gib() { return 0; }
int64_t cuda_free_memory_bytes() { return 0; }
double cuda_peak_bf16_flops() { return 0; }

}  // namespace pt
