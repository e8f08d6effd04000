// Memory sized once: a planner records every buffer a model needs, then one allocation on the target
// device backs them all, so a training step never allocates. Views into the arena are pt::Tensor.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace pt {

class Arena {
 public:
  Arena() = default;
  explicit Arena(Device device) : device_(device) {}
  // Host memory (device cpu) that a GPU copies to and from asynchronously: pinned (core/device.h).
  struct Pinned {};
  Arena(Device device, Pinned) : device_(device), pinned_(device == Device::cpu) {}
  ~Arena();
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Planning: reserve returns a handle; after allocate(), view(handle) is the tensor.
  int reserve(DType dtype, std::initializer_list<int64_t> shape);
  void allocate();  // one allocation for everything reserved (zero-filled)
  Tensor view(int handle) const;
  // The first elements of a slot seen with a smaller shape (a micro-batch shorter than the maximum).
  Tensor view(int handle, std::initializer_list<int64_t> shape) const;

  Device device() const { return device_; }
  int64_t bytes() const { return static_cast<int64_t>(total_); }

 private:
  struct Slot {
    DType dtype;
    std::vector<int64_t> shape;
    size_t offset;
  };
  Device device_ = Device::cpu;
  bool pinned_ = false;
  std::vector<Slot> slots_;
  size_t total_ = 0;
  void* base_ = nullptr;
};

}  // namespace pt
