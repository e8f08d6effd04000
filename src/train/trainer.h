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
#pragma once

#include "data/packing/packer.h"
#include "distributed/communicator.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/sparsity.h"
#include "ops/adamw.h"
#include "train/schedule.h"

#include <cstdint>
#include <string>

namespace pt {

struct DistConfig {
  dist::Backend backend = dist::Backend::kAuto;  // auto: local for one process, nccl on cuda, mpi on cpu
  bool zero1 = false;                            // shard the AdamW moments across ranks
  double timeout_s = 300;                        // longest wait in one collective before the job aborts
  double bucket_mb = 25;                         // gradient reduction bucket size, MiB
};

struct TrainConfig {
  std::string data_dir;        // prepared dataset
  std::string out_dir;         // run directory: metrics.jsonl, checkpoints/, final/
  std::string model = "tiny";  // preset name or path to an HF config.json
  std::string init_from;       // optional HF model directory to fine-tune
  bool allow_unused_tensors = false;  // --init: load a checkpoint holding tensors the model does not use
  bool resume = true;          // continue from out_dir/checkpoints/latest when it exists
  PackingOptions packing;      // strategy and micro-batch size
  int32_t grad_accum = 1;      // micro-batches per optimizer step
  int64_t steps = 200;
  LrSchedule lr;
  ops::AdamWConfig adamw{3e-4, 0.9, 0.95, 1e-8, 0.1};
  double max_grad_norm = 1.0;
  int64_t eval_every = 50;   // steps; 0: only at the end
  int64_t eval_batches = 0;  // 0: the whole validation split
  int64_t save_every = 100;  // steps; 0: only at the end
  int64_t log_every = 1;
  uint64_t seed = 0;
  std::string device = "auto";  // auto (a GPU when one is visible), cpu or cuda
  double peak_tflops = 0;       // for MFU; 0: estimated for the device
  int64_t stop_after = 0;       // stop (with a checkpoint) after this many steps of this invocation; 0: never
  SparsityConfig sparsity;      // 2:4 sparse FFN training; off by default
  Recompute recompute = Recompute::none;  // activations the backward recomputes (less memory, slower)
  DistConfig dist;
};

// Validation losses of this invocation (0 when it ran no validation): the first is at step 0 unless the
// run resumed. final_dir is empty when the invocation stopped early (stop_after).
struct TrainResult {
  double first_val_loss = 0;
  double final_val_loss = 0;
  std::string final_dir;
};

// Throws pt::Error naming the setting for invalid settings, and on unusable data or checkpoints.
TrainResult train(const TrainConfig& config);

}  // namespace pt
