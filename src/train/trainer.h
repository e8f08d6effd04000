// The training loop: batches -> forward/backward over micro-batches -> clip -> AdamW -> log, with periodic
// validation and atomic checkpoints. Deterministic for a seed; a resumed run continues bit for bit.
//
// Data parallelism (docs/distributed.md): launched as several ranks (mpirun, srun, RANK/WORLD_SIZE), every
// rank trains on its token-balanced share of each global step (dist::RankStepStream), the gradients are
// summed across ranks (dist::DataParallelOptimizer, optionally ZeRO-1), and rank 0 alone writes metrics,
// checkpoints and the final model. A step is world_size * grad_accum micro-batches' worth of examples, so
// W ranks with grad_accum g train as one data-parallel process with grad_accum W * g. A single process with
// the auto or local backend keeps the single-process batch stream (and its checkpoints); naming mpi or
// nccl runs the data-parallel path even on one rank, which is the reference multi-rank runs reproduce.
//
// Faults of shared clusters. The run directory is locked (core/dir_lock.h): a second writer fails at
// once. SIGTERM, SIGINT or SIGUSR1 (train/stop_signals.h) stop the run after the step in flight, every rank
// at the same step, with a checkpoint. A step whose loss or gradient norm is not finite (NaN or Inf) skips
// the optimizer: the weights and AdamW moments stay as they were, while the step still counts (its batch
// is consumed and the learning-rate schedule moves on, so a run keeps its length and its data order);
// max_bad_steps such steps in a row stop the run with a checkpoint of the last good weights. A checkpoint
// that cannot be written (a full disk) is an error naming the file and the space it needs; the previous
// checkpoint stays loadable.
#pragma once

#include "data/packing/packer.h"
#include "distributed/communicator.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/sparsity.h"
#include "ops/adamw.h"
#include "train/memory_plan.h"
#include "train/schedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pt {

struct DistConfig {
  dist::Backend backend = dist::Backend::kAuto;  // auto: local for one process, nccl on cuda, mpi on cpu
  bool zero1 = false;                            // shard the AdamW moments across ranks
  double timeout_s = 300;                        // longest wait in one collective before the job aborts
  double bucket_mb = 25;                         // gradient reduction bucket size, MiB
};

// For tests only, to take the non-finite path on purpose: on these steps (1-based) every rank's loss is
// made NaN on the host (nan_loss), or its gradients are scaled by infinity in the backward pass
// (inf_grad), so that the gradient norm comes out non-finite through the real reduction and clipping.
struct FaultInjection {
  std::vector<int64_t> nan_loss, inf_grad;
};

struct TrainConfig {
  std::string data_dir;               // prepared dataset
  std::string out_dir;                // run directory: metrics.jsonl, checkpoints/, final/
  std::string model = "tiny";         // preset name or path to an HF config.json
  std::string init_from;              // optional HF model directory to fine-tune
  bool allow_unused_tensors = false;  // --init: load a checkpoint holding tensors the model does not use
  bool resume = true;                 // continue from out_dir/checkpoints/latest when it exists
  bool save = true;                   // write checkpoints and the final model (off: benchmarks)
  PackingOptions packing;             // strategy, micro-batch size, objective and masked-LM settings
  std::string mask_token;             // masked LM: the tokenizer's mask token; empty: [MASK] or <mask>
  int32_t grad_accum = 1;             // micro-batches per optimizer step
  int64_t steps = 200;
  LrSchedule lr;
  ops::AdamWConfig adamw{3e-4, 0.9, 0.95, 1e-8, 0.1};
  ops::MomentFormat optimizer_state = ops::MomentFormat::f32;  // how the AdamW moments are stored
  DType master_weights = DType::f32;  // f32 masters, or bf16: none, stochastically rounded (ops/adamw.h)
  double max_grad_norm = 1.0;          // 0: no clipping
  // AdamW on each block of parameters as soon as the backward has its gradients, so no buffer of every
  // gradient exists (train/step_in_backward.h): one process, one micro-batch a step, no clipping, no 2:4.
  bool optimizer_in_backward = false;
  // The masters and moments in pinned host memory, each block streamed to the device for its update
  // (distributed/state_offload.h); not with ZeRO-1 or 2:4 training.
  bool offload_optimizer = false;
  int64_t eval_every = 50;   // steps; 0: only at the end
  int64_t eval_batches = 0;  // 0: the whole validation split
  int64_t save_every = 100;  // steps; 0: only at the end
  int64_t log_every = 1;
  uint64_t seed = 0;
  std::string device = "auto";  // auto (a GPU when one is visible), cpu or cuda
  double peak_tflops = 0;       // for MFU; 0: estimated for the device
  int64_t stop_after = 0;       // stop (with a checkpoint) after this many steps of this invocation; 0: never
  int64_t max_bad_steps = 5;  // stop (with a checkpoint) after this many non-finite steps in a row; 0: never
  SparsityConfig sparsity;    // 2:4 sparse FFN training; off by default
  Recompute recompute = Recompute::none;  // activations the backward recomputes (less memory, slower)
  DistConfig dist;
  // Print the memory plan of a fresh run and whether it fits, then stop: nothing is allocated on the device
  // and nothing written (train/memory_plan.h).
  bool dry_run = false;
  FaultInjection faults;
};

// How an invocation ended. The CLI exits 0 after finished and stop_after, and with a status of its own
// after the others (cli/train.cpp).
enum class TrainEnd {
  finished,    // the last step is done and final/ written
  stop_after,  // --stop-after's steps are done, with a checkpoint
  signal,      // a stop signal (stop_signal names it), with a checkpoint
  non_finite,  // max_bad_steps non-finite steps in a row, with a checkpoint of the last good weights
  dry_run,     // the memory plan printed, and it fits (or there was no GPU to check it on)
};

// Validation losses of this invocation (0 when it ran no validation): the first is at step 0 unless the
// run resumed. final_dir is empty when the invocation stopped early.
struct TrainResult {
  double first_val_loss = 0;
  double final_val_loss = 0;
  std::string final_dir;
  TrainEnd end = TrainEnd::finished;
  int stop_signal = 0;        // the stop signal this process received (0: none, or only another rank)
  int64_t last_step = 0;      // the step the invocation ended at
  int64_t skipped_steps = 0;  // non-finite steps of this invocation
  MemoryPlan memory_plan;     // this rank's
  HeldMemory memory_held;     // by this rank's buffers at the end (zero after a dry run)
};

// Throws pt::Error naming the setting for invalid settings, and on unusable data or checkpoints.
TrainResult train(const TrainConfig& config);

}  // namespace pt
