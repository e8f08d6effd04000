// --offload-optimizer (ZeRO-Offload's idea, Ren et al. 2021, with the update on the GPU rather than the
// CPU): the masters and AdamW moments of every parameter stay in pinned host memory. Each block of the
// layout (ParameterLayout::blocks) is fetched into one of two device slots, updated there by AdamW, its
// masters cast into the model's working copy, and written back (ops/state_transfer.h); the next block's
// fetch overlaps this one's update, and with the step in the backward a layer's fetch overlaps its backward.
// The device keeps the working weights and two blocks' state instead of all of it; the bus carries the
// state twice a step. Each block is fetched once a step and the slots are taken in turn, so between a
// block's write-back and its next fetch there is a fetch into its slot, which waits for that write-back:
// a block always comes back with its last update.
#pragma once

#include "core/arena.h"
#include "model/parameters.h"
#include "ops/adamw.h"
#include "ops/state_transfer.h"

#include <cstdint>
#include <span>
#include <vector>

namespace pt::dist {

// Masters and moments of every parameter, flat in layout order (absmax: q8 moments' blocks, else empty).
struct StateTensors {
  Tensor masters, m, v, m_absmax, v_absmax;
};

class StateOffload {
 public:
  // host: the state on the host; the slots are allocated on `device`.
  StateOffload(const ParameterLayout& layout, const StateTensors& host, Device device);
  // The device bytes of the two slots, before allocating them (the memory plan).
  static int64_t slot_bytes(const ParameterLayout& layout, ops::MomentFormat moments, DType masters);
  int64_t bytes() const { return arena_.bytes(); }

  // Queues the fetch of block [begin, end)'s state into the next slot, for update() to use.
  void prefetch(int64_t begin, int64_t end);
  // AdamW on the block [begin, end): `entries` are its parameters' over the host state (ops::AdamWTensor,
  // gradients set, on the device); then the updated masters cast into `working` (the block's part of the
  // model's working copy) and the state written back.
  void update(int64_t begin, int64_t end, std::span<const ops::AdamWTensor> entries,
              const ops::AdamWConfig& config, int64_t step, const Tensor& working);
  // The block's masters cast into `working` through a slot (filling the working copy).
  void load_working(int64_t begin, int64_t end, const Tensor& working);
  // Waits for every queued copy: the host state is current and free to read or write.
  void drain() { transfer_.drain(); }

 private:
  struct Slot {
    StateTensors state;
    int64_t begin = -1, end = -1;  // the block fetched into it
  };
  // The slot that holds [begin, end)'s state (masters only when !with_moments), fetching it if need be.
  int fetched(int64_t begin, int64_t end, bool with_moments);
  // The copies between the host state and a slot for [begin, end).
  std::vector<ops::StateTransfer::Copy> copies(const Slot& slot, int64_t begin, int64_t end, bool to_device,
                                               bool with_moments) const;

  const ParameterLayout& layout_;
  StateTensors host_;
  Arena arena_;
  std::vector<Slot> slots_;
  int next_ = 0;
  ops::StateTransfer transfer_;
};

}  // namespace pt::dist
