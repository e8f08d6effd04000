// StateTransfer on cuda: a fetch stream and a write-back stream, both non-blocking, and per slot an event
// after its fetch and one after its write-back.
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/stream.h"

#include <vector>

namespace pt::ops::cuda {

namespace {

class DeviceTransfer : public StateTransfer::Impl {
 public:
  explicit DeviceTransfer(int slots) : fetched_(static_cast<size_t>(slots)), written_(fetched_.size()) {
    PT_CUDA_CHECK(cudaStreamCreateWithFlags(&fetches_, cudaStreamNonBlocking));
    PT_CUDA_CHECK(cudaStreamCreateWithFlags(&write_backs_, cudaStreamNonBlocking));
    for (auto* events : {&fetched_, &written_})
      for (cudaEvent_t& e : *events) PT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    PT_CUDA_CHECK(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming));
  }
  ~DeviceTransfer() override {  // no throwing here: the context may already be tearing down
    cudaStreamSynchronize(fetches_);
    cudaStreamSynchronize(write_backs_);
    for (auto* events : {&fetched_, &written_})
      for (cudaEvent_t e : *events) cudaEventDestroy(e);
    cudaEventDestroy(computed_);
    cudaStreamDestroy(fetches_);
    cudaStreamDestroy(write_backs_);
  }
  DeviceTransfer(const DeviceTransfer&) = delete;
  DeviceTransfer& operator=(const DeviceTransfer&) = delete;

  void fetch(int slot, std::span<const StateTransfer::Copy> copies) override {
    PT_CUDA_CHECK(cudaStreamWaitEvent(fetches_, written_.at(static_cast<size_t>(slot)), 0));
    for (const auto& c : copies)
      PT_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyHostToDevice, fetches_));
    PT_CUDA_CHECK(cudaEventRecord(fetched_[static_cast<size_t>(slot)], fetches_));
  }
  void acquire(int slot) override {
    PT_CUDA_CHECK(cudaStreamWaitEvent(current_stream(), fetched_.at(static_cast<size_t>(slot)), 0));
  }
  void write_back(int slot, std::span<const StateTransfer::Copy> copies) override {
    PT_CUDA_CHECK(cudaEventRecord(computed_, current_stream()));
    PT_CUDA_CHECK(cudaStreamWaitEvent(write_backs_, computed_, 0));
    for (const auto& c : copies)
      PT_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDeviceToHost, write_backs_));
    PT_CUDA_CHECK(cudaEventRecord(written_.at(static_cast<size_t>(slot)), write_backs_));
  }
  void drain() override {
    PT_CUDA_CHECK(cudaStreamSynchronize(fetches_));
    PT_CUDA_CHECK(cudaStreamSynchronize(write_backs_));
  }

 private:
  cudaStream_t fetches_ = nullptr, write_backs_ = nullptr;
  std::vector<cudaEvent_t> fetched_, written_;  // per slot; a wait on a never-recorded event returns at once
  // The compute stream before a write-back; reused, as a stream wait takes the event as it is when queued.
  cudaEvent_t computed_ = nullptr;
};

}  // namespace

std::unique_ptr<StateTransfer::Impl> make_state_transfer(int slots) {
  return std::make_unique<DeviceTransfer>(slots);
}

}  // namespace pt::ops::cuda
