// Which accelerators this process can use. Built from device.cu when CUDA is part of the build, from
// device_nocuda.cpp otherwise; GPU tests skip themselves when cuda_device_count() is 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pt {

bool built_with_cuda();
int cuda_device_count();              // 0 without CUDA, a driver or a GPU
std::string cuda_device_name(int i);  // "" when unavailable

// Device memory for arenas; errors name the size and the CUDA error.
void* cuda_malloc_zeroed(size_t bytes);
void cuda_free(void* p);
// Pinned (page-locked) host memory, which the GPU copies to and from asynchronously at full bus speed;
// plain aligned host memory without CUDA.
void* cuda_host_alloc(size_t bytes);
void cuda_host_free(void* p);
// Waits for all queued GPU work (benchmarks time with it); a no-op without CUDA.
void cuda_synchronize();
// Copies between host memory and device memory (kind by the sides' devices); cpu->cpu is memcpy.
void copy_bytes(void* dst, bool dst_on_gpu, const void* src, bool src_on_gpu, size_t bytes);
void zero_bytes(void* dst, bool on_gpu, size_t bytes);

// For the training log: GPU memory in use (the arenas are allocated once, so this is also the peak), and
// the dense bf16 tensor-core peak of GPU 0 by model name (H100/H200, A100), 0 when unknown.
double cuda_memory_used_gib();
// What the current GPU has free for allocations (cudaMemGetInfo), 0 without one.
int64_t cuda_free_memory_bytes();
double cuda_peak_bf16_flops();

}  // namespace pt
