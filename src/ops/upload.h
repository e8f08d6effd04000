// Host-to-device copies of a pass's inputs that overlap the kernels already queued. On cuda the data is
// staged in pinned host memory and copied on a side stream; events order each copy after the compute
// stream's last use of its destination (release) and the compute stream's next use after the copy
// (acquire), so the host never waits for the device. On the cpu a send is a plain copy and the ordering
// calls do nothing.
#pragma once

#include "core/tensor.h"

#include <cstddef>
#include <memory>

namespace pt::ops {

class UploadSlot {
 public:
  UploadSlot(Device device, size_t bytes);
  ~UploadSlot();
  UploadSlot(const UploadSlot&) = delete;
  UploadSlot& operator=(const UploadSlot&) = delete;

  // The host buffer (bytes long) to fill for the next send; waits until the previous send has read it.
  std::byte* host();
  // Copies the host buffer to dst (bytes long, on the slot's device) once the compute stream has passed
  // the last release(). Returns at once.
  void send(void* dst);
  // Compute work queued after this waits for the last send.
  void acquire();
  // The compute work queued so far is the last to read the destination before the next send overwrites it.
  void release();

  // What a backend implements (the cpu's in upload.cpp, cuda's in ops/cuda/upload.cpp).
  struct Impl {
    virtual ~Impl() = default;
    virtual std::byte* host() = 0;
    virtual void send(void* dst) = 0;
    virtual void acquire() = 0;
    virtual void release() = 0;
  };

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace pt::ops
