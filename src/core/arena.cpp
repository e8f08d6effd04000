#include "core/arena.h"

#include "core/device.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace pt {

namespace {
constexpr size_t kAlign = 256;  // cache lines on the CPU, coalesced and vector-aligned on the GPU
}

Arena::~Arena() {
  if (!base_) return;
  if (device_ == Device::cuda)
    cuda_free(base_);
  else if (pinned_)
    cuda_host_free(base_);
  else
    std::free(base_);
}

Arena::Arena(Arena&& other) noexcept { *this = std::move(other); }

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    this->~Arena();
    device_ = other.device_;
    pinned_ = other.pinned_;
    slots_ = std::move(other.slots_);
    total_ = std::exchange(other.total_, 0);
    base_ = std::exchange(other.base_, nullptr);
  }
  return *this;
}

int Arena::reserve(DType dtype, std::initializer_list<int64_t> shape) {
  PT_ASSERT(base_ == nullptr);
  size_t bytes = static_cast<size_t>(dtype_size(dtype));
  for (auto s : shape) bytes *= static_cast<size_t>(s);
  slots_.push_back({dtype, std::vector<int64_t>(shape), total_});
  total_ += (bytes + kAlign - 1) / kAlign * kAlign;
  return static_cast<int>(slots_.size()) - 1;
}

void Arena::allocate() {
  PT_ASSERT(base_ == nullptr);
  size_t bytes = std::max<size_t>(total_, kAlign);
  if (device_ == Device::cpu && pinned_) {
    base_ = cuda_host_alloc(bytes);  // page-aligned
    std::memset(base_, 0, bytes);
  } else if (device_ == Device::cpu) {
    base_ = std::aligned_alloc(kAlign, bytes);
    if (!base_)
      fail("cannot allocate {:.1f} MiB of host memory for the arena", static_cast<double>(bytes) / (1 << 20));
    std::memset(base_, 0, bytes);
  } else {
    base_ = cuda_malloc_zeroed(bytes);
  }
}

Tensor Arena::view(int handle) const {
  PT_ASSERT(base_ != nullptr && handle >= 0 && handle < static_cast<int>(slots_.size()));
  const Slot& s = slots_[static_cast<size_t>(handle)];
  Tensor t;
  t.data = static_cast<char*>(base_) + s.offset;
  t.dtype = s.dtype;
  t.device = device_;
  t.ndim = static_cast<int>(s.shape.size());
  for (size_t i = 0; i < s.shape.size(); ++i) t.shape[i] = s.shape[i];
  return t;
}

Tensor Arena::view(int handle, std::initializer_list<int64_t> shape) const {
  Tensor full = view(handle);
  Tensor t(full.data, full.dtype, shape, device_);
  PT_ASSERT(t.numel() <= full.numel());
  return t;
}

}  // namespace pt
