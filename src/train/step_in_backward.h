// The optimizer step fused into the backward pass (--optimizer-in-backward; LOMO, Lv et al. 2023, and
// PyTorch's optimizer-in-backward hooks do the same): the pass writes each block of the layout's gradients
// (DecoderModel::GradientBlocks: the head, each layer, the embeddings) into one of two buffers, the
// embeddings' and one the size of the largest other block, and as soon as a block's gradients are final,
// AdamW updates that block. So the flat gradient buffer of every parameter (4 bytes a parameter, 30 GiB for
// an 8B model) never exists: the gradients take the embeddings and one layer's worth (or the untied LM
// head's).
//
// What it gives up, each refused by name in the trainer: clipping (the update cannot wait for the global
// norm, known only once every block is done: --clip 0; the norm is still logged), gradient accumulation
// (one micro-batch a step: nothing to accumulate into), data parallelism (no reduction between the blocks)
// and 2:4 training (its masked decay reads the whole gradient). A non-finite gradient skips the update of its
// block and of every block after it; the blocks before it (the head and the layers above) are updated
// already, which the trainer reports. The host reads each block's norm as the block closes, which costs one
// wait for the device a block (a few microseconds against a layer's backward).
#pragma once

#include "core/arena.h"
#include "distributed/data_parallel.h"
#include "model/decoder.h"
#include "model/parameters.h"
#include "ops/adamw.h"

#include <cstdint>

namespace pt {

class StepInBackward {
 public:
  StepInBackward(const ParameterLayout& layout, Device device);

  // Elements of the two buffers: the embeddings block's, and the largest other block's.
  struct Sizes {
    int64_t embeddings = 0, block = 0;
  };
  static Sizes sizes(const ParameterLayout& layout);
  int64_t bytes() const { return arena_.bytes(); }

  // The blocks of one pass whose closing updates them with dp.step_block(config, step) while every block
  // so far has finite gradients. dp must step in the backward (DataParallelOptions::step_in_backward).
  DecoderModel::GradientBlocks blocks(dist::DataParallelOptimizer& dp, const ops::AdamWConfig& config,
                                      int64_t step);

  // After the pass: the gradient norm over every block, and the first block whose gradients were not
  // finite (with it and every later block not updated).
  struct Outcome {
    double grad_norm = 0;
    int64_t bad_block_begin = -1;  // -1: every block finite and updated
    bool updated_some = false;     // blocks before the bad one were updated
  };
  Outcome outcome() const { return outcome_; }

 private:
  Arena arena_;
  Tensor embeddings_, block_;
  Outcome outcome_;
  double sum_of_squares_ = 0;
};

}  // namespace pt
