#include "ops/state_transfer.h"

#include "core/error.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cstring>

namespace pt::ops {

namespace {

// The cpu: the device is the host, so each copy happens as it is asked for and there is nothing to order.
class HostTransfer : public StateTransfer::Impl {
 public:
  void fetch(int, std::span<const StateTransfer::Copy> copies) override { copy(copies); }
  void acquire(int) override {}
  void write_back(int, std::span<const StateTransfer::Copy> copies) override { copy(copies); }
  void drain() override {}

 private:
  static void copy(std::span<const StateTransfer::Copy> copies) {
    for (const auto& c : copies) std::memcpy(c.dst, c.src, c.bytes);
  }
};

}  // namespace

StateTransfer::StateTransfer(Device device, int slots) {
  if (slots <= 0) fail("StateTransfer: needs at least one slot, got {}", slots);
  if (device == Device::cpu) {
    impl_ = std::make_unique<HostTransfer>();
    return;
  }
#ifdef PACKTRAIN_CUDA
  impl_ = cuda::make_state_transfer(slots);
#else
  fail("StateTransfer: no cuda implementation in this build; run on cpu");
#endif
}

StateTransfer::~StateTransfer() = default;

void StateTransfer::fetch(int slot, std::span<const Copy> copies) { impl_->fetch(slot, copies); }
void StateTransfer::acquire(int slot) { impl_->acquire(slot); }
void StateTransfer::write_back(int slot, std::span<const Copy> copies) { impl_->write_back(slot, copies); }
void StateTransfer::drain() { impl_->drain(); }

}  // namespace pt::ops
