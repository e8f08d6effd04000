// The device memory a training run allocates, computed from its settings before anything is allocated, so
// that a run that cannot fit is refused up front (train/memory_fit.h) instead of failing deep inside.
//
// Each line mirrors one allocation: the arenas of the model (activations with the LM head's logit chunk,
// the batch inputs, masked copies of 2:4 weights), the trainer's gradient buffer and step statistics, the
// data-parallel optimizer's masters, moments and ZeRO-1 working copy, the 2:4 masks, and on CUDA the
// workspaces ops and libraries allocate for themselves. Arena lines are exact to the byte, 256-byte slot
// alignment included (tests/train/memory_plan_test.cpp compares them with what the run allocates). Lines
// marked estimate are memory packtrain does not size itself: upper bounds of the 2:4 compressed forms the
// sparse GEMM autotuner keeps and of the scratch the largest op grows, and a margin for what NCCL, cuBLASLt
// and cuSPARSELt keep.
#pragma once

#include "core/tensor.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/sparsity.h"
#include "ops/adamw.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pt {

// How AdamW keeps each of its two moments (ops/adamw.h: f32, bf16, or 8-bit block-wise quantized).
using ops::MomentFormat;

// What decides the memory of a run.
struct PlanSettings {
  ModelConfig model;
  Device device = Device::cpu;  // cpu computes in f32, cuda in bf16 beside f32 masters (DecoderModel)
  int64_t tokens = 0;           // of the largest micro-batch the run sees: the activation arena's size
  Recompute recompute = Recompute::none;
  MomentFormat moments = MomentFormat::f32;
  DType masters = DType::f32;  // f32 masters, or bf16: none, the weights themselves (ops/adamw.h)
  DType grad_dtype = DType::f32;
  bool gradient_blocks = false;  // the optimizer steps in the backward: two blocks' gradients, not all
  bool offload = false;          // masters and moments in host memory, two blocks' state on the device
  SparsityConfig sparsity;  // enabled and which FFN linears
  int world_size = 1;       // data-parallel ranks; the plan is one rank's
  bool zero1 = false;

  DType compute_dtype() const { return device == Device::cuda ? DType::bf16 : DType::f32; }
};

// One rank's device memory, line by line, in bytes.
struct MemoryPlan {
  PlanSettings settings;
  int64_t parameters = 0;
  int64_t working_weights = 0;  // the compute-dtype copy the passes read (cuda; ZeRO-1's gathered copy; cpu
                                // with bf16 masters: their f32 copy)
  int64_t masters = 0;          // the masters of the parameters this rank updates (f32, or bf16 weights)
  int64_t moments = 0;          // AdamW's two moments of those parameters
  int64_t gradients = 0;        // the flat gradient buffer (every parameter, padded to ZeRO-1's shards), or
                                // the embeddings' and the largest other block's (gradient_blocks)
  int64_t activations = 0;      // the model's activation arena less the logit chunk
  int64_t lm_head_chunk = 0;    // the logits of one chunk (DecoderModel::logit_chunk_tokens) and the
                                // head's weight in padded rows (DecoderModel::logit_row_width)
  int64_t batch_inputs = 0;     // the staged batches' ids, positions, targets, segments (MLM: labelled rows)
  int64_t sparse_masks = 0;     // 2:4 masks (u8) and the scratch mask of their recomputation
  int64_t sparse_weights = 0;   // cpu: masked copies of the 2:4 weights; cuda: compressed forms (estimate)
  int64_t workspaces = 0;       // step statistics; cuda: cuBLASLt's workspace and ops' scratch (estimate)
  int64_t libraries = 0;        // cuda: NCCL, cuBLASLt and cuSPARSELt's own memory (estimate)
  int64_t offload_slots = 0;    // offload: the device slots two blocks' masters and moments pass through
  int64_t host_state = 0;       // offload on cuda: the masters and moments in pinned host memory (not in
                                // the device total; on the cpu they stay in masters and moments)

  int64_t total() const;
  // Activation bytes per token of the micro-batch (the arena grows linearly in it).
  double activation_bytes_per_token() const;
};

MemoryPlan plan_memory(const PlanSettings& settings);

// What a run's buffers hold once it has set up and stepped, per plan line that its own allocations back
// (the optimizer's masters and moments share one arena).
struct HeldMemory {
  int64_t working_weights = 0, optimizer_state = 0, gradients = 0, activations = 0, batch_inputs = 0,
          sparse_masks = 0, sparse_weights = 0, workspaces = 0, host_state = 0, offload_slots = 0;
};
// The lines where the plan and what is held differ, one a line ("" when none). Lines the plan estimates
// on cuda (compressed 2:4 weights, the libraries' workspaces) are not compared.
std::string plan_mismatches(const MemoryPlan& plan, const HeldMemory& held);

// The plan as a small table: GiB per line, and bytes per parameter or per token where that is the natural
// unit. `available` > 0 adds what the device has free.
std::string format_plan(const MemoryPlan& plan, int64_t available = 0);

}  // namespace pt
