#include "ops/upload.h"

#include "core/error.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cstring>
#include <vector>

namespace pt::ops {

namespace {

// The cpu: the device is the host, so a send is a copy and there is nothing to order.
class HostUpload : public UploadSlot::Impl {
 public:
  explicit HostUpload(size_t bytes) : buffer_(bytes) {}
  std::byte* host() override { return buffer_.data(); }
  void send(void* dst) override { std::memcpy(dst, buffer_.data(), buffer_.size()); }
  void acquire() override {}
  void release() override {}

 private:
  std::vector<std::byte> buffer_;
};

}  // namespace

UploadSlot::UploadSlot(Device device, size_t bytes) {
  if (device == Device::cpu) {
    impl_ = std::make_unique<HostUpload>(bytes);
    return;
  }
#ifdef PACKTRAIN_CUDA
  impl_ = cuda::make_upload(bytes);
#else
  fail("UploadSlot: no cuda implementation in this build; run on cpu");
#endif
}

UploadSlot::~UploadSlot() = default;

std::byte* UploadSlot::host() { return impl_->host(); }
void UploadSlot::send(void* dst) { impl_->send(dst); }
void UploadSlot::acquire() { impl_->acquire(); }
void UploadSlot::release() { impl_->release(); }

}  // namespace pt::ops
