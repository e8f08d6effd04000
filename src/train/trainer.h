// The training loop: batches -> forward/backward over micro-batches -> clip -> AdamW -> log, with periodic
// validation and atomic checkpoints. Deterministic for a seed; a resumed run continues bit for bit.
#pragma once

#include "data/packing/packer.h"
#include "model/config.h"
#include "model/sparsity.h"
#include "ops/adamw.h"
#include "train/schedule.h"

#include <cstdint>
#include <string>

namespace pt {

struct TrainConfig {
  std::string data_dir;        // prepared dataset
  std::string out_dir;         // run directory: metrics.jsonl, checkpoints/, final/
  std::string model = "tiny";  // preset name or path to an HF config.json
  std::string init_from;       // optional HF model directory to fine-tune
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
