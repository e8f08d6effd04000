// The communicator every multi-rank test uses (made once by main.cpp for the whole process), and buffers
// on its device filled from and read back to the host, so one test body serves MPI (cpu) and NCCL (cuda).
#pragma once

#include "core/device.h"
#include "core/device_buffer.h"
#include "core/tensor.h"
#include "distributed/communicator.h"

#include <cstring>
#include <vector>

namespace pt::dist::test {

Communicator& comm();

template <class T>
class Buffer {
 public:
  explicit Buffer(std::vector<T> values) : host_(std::move(values)) {
    const auto n = static_cast<int64_t>(host_.size());
    if (comm().device() == Device::cuda) {
      device_ = DeviceBuffer(host_.size() * sizeof(T));
      copy_bytes(device_.data(), true, host_.data(), false, host_.size() * sizeof(T));
      t_ = Tensor(device_.data(), dtype_of<T>(), {n}, Device::cuda);
    } else {
      t_ = Tensor::of(host_.data(), {n});
    }
  }
  const Tensor& t() const { return t_; }
  std::vector<T> read() const {
    std::vector<T> out(host_.size());
    copy_bytes(out.data(), false, t_.data, t_.device == Device::cuda, out.size() * sizeof(T));
    return out;
  }

 private:
  std::vector<T> host_;
  DeviceBuffer device_;
  Tensor t_;
};

}  // namespace pt::dist::test
