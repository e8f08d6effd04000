// Owned device memory: a zeroed GPU allocation freed on destruction (move-only), with whole-buffer
// copies to and from the host. Tests and benchmarks hold their device tensors in these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/device.h"
#include "core/tensor.h"

namespace pt {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : data_(bytes ? cuda_malloc_zeroed(bytes) : nullptr), bytes_(bytes) {}
  ~DeviceBuffer() {
    if (data_) cuda_free(data_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

  // The buffer seen as a cuda tensor; the shape must fit in the buffer.
  Tensor view(DType dtype, std::initializer_list<int64_t> dims) const {
    Tensor t(data_, dtype, dims, Device::cuda);
    if (static_cast<size_t>(t.bytes()) > bytes_)
      fail("device buffer of {} bytes cannot hold {}", bytes_, t.str());
    return t;
  }

  void upload(const void* host, size_t bytes) {
    if (checked(bytes) > 0) copy_bytes(data_, true, host, false, bytes);
  }
  void download(void* host, size_t bytes) const {
    if (checked(bytes) > 0) copy_bytes(host, false, data_, true, bytes);
  }

 private:
  size_t checked(size_t bytes) const {
    if (bytes > bytes_) fail("copy of {} bytes overruns a device buffer of {} bytes", bytes, bytes_);
    return bytes;
  }

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace pt
