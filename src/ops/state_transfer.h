// Copies of optimizer state between host memory and the device for --offload-optimizer (ZeRO-Offload's
// idea): the state of every parameter stays in pinned host memory, and each block of it is fetched into a
// device slot, updated there by the compute stream, and written back. On cuda the copies run on two streams
// of their own, one a direction, ordered by events, so the next block's fetch and the last one's write-back
// overlap this block's update and the passes; on the cpu they are plain copies in program order.
#pragma once

#include "core/tensor.h"

#include <cstddef>
#include <memory>
#include <span>

namespace pt::ops {

class StateTransfer {
 public:
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };

  StateTransfer(Device device, int slots);
  ~StateTransfer();
  StateTransfer(const StateTransfer&) = delete;
  StateTransfer& operator=(const StateTransfer&) = delete;

  // Host-to-device copies into `slot`, queued after the slot's last write-back (which read the slot).
  void fetch(int slot, std::span<const Copy> copies);
  // Compute work queued after this waits for the slot's last fetch.
  void acquire(int slot);
  // Device-to-host copies out of `slot`, queued after the compute work queued so far.
  void write_back(int slot, std::span<const Copy> copies);
  // Waits for every queued copy: the host state is current and free to read or write.
  void drain();

  // What a backend implements (the cpu's in state_transfer.cpp, cuda's in ops/cuda/state_transfer.cpp).
  struct Impl {
    virtual ~Impl() = default;
    virtual void fetch(int slot, std::span<const Copy> copies) = 0;
    virtual void acquire(int slot) = 0;
    virtual void write_back(int slot, std::span<const Copy> copies) = 0;
    virtual void drain() = 0;
  };

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace pt::ops
