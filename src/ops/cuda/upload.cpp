// UploadSlot on cuda: pinned staging, one side stream for every slot's copies, and two events per slot.
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/stream.h"

namespace pt::ops::cuda {

namespace {

class DeviceUpload : public UploadSlot::Impl {
 public:
  explicit DeviceUpload(size_t bytes) : bytes_(bytes) {
    PT_CUDA_CHECK(cudaHostAlloc(&host_, bytes, cudaHostAllocDefault));
    PT_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
    PT_CUDA_CHECK(cudaEventCreateWithFlags(&released_, cudaEventDisableTiming));
  }
  ~DeviceUpload() override {  // no throwing here: the context may already be tearing down
    cudaEventSynchronize(copied_);
    cudaEventDestroy(copied_);
    cudaEventDestroy(released_);
    cudaFreeHost(host_);
  }
  DeviceUpload(const DeviceUpload&) = delete;
  DeviceUpload& operator=(const DeviceUpload&) = delete;

  std::byte* host() override {
    PT_CUDA_CHECK(cudaEventSynchronize(copied_));  // long done when the slots alternate
    return static_cast<std::byte*>(host_);
  }
  void send(void* dst) override {
    const cudaStream_t copies = copy_stream();
    PT_CUDA_CHECK(cudaStreamWaitEvent(copies, released_, 0));
    PT_CUDA_CHECK(cudaMemcpyAsync(dst, host_, bytes_, cudaMemcpyHostToDevice, copies));
    PT_CUDA_CHECK(cudaEventRecord(copied_, copies));
  }
  void acquire() override { PT_CUDA_CHECK(cudaStreamWaitEvent(current_stream(), copied_, 0)); }
  void release() override { PT_CUDA_CHECK(cudaEventRecord(released_, current_stream())); }

 private:
  size_t bytes_;
  void* host_ = nullptr;
  cudaEvent_t copied_ = nullptr, released_ = nullptr;  // a wait on a never-recorded event returns at once
};

}  // namespace

std::unique_ptr<UploadSlot::Impl> make_upload(size_t bytes) { return std::make_unique<DeviceUpload>(bytes); }

}  // namespace pt::ops::cuda
