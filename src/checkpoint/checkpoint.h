// Checkpoints. A model directory is what Hugging Face loads: config.json, model.safetensors (the family's HF
// tensor names and layouts, fp32, or bf16 for a run without fp32 masters; a large model as shards plus
// model.safetensors.index.json, as
// save_pretrained writes it) and tokenizer.json. A training checkpoint is a model directory plus
// optimizer.safetensors (AdamW moments, as the optimizer keeps them: f32, bf16, or 8-bit codes with their
// block absmax values) and trainer_state.json (step, data position, seed, master weights), so a run resumes
// bit for bit; a run training 2:4 sparse (model/sparsity.h) adds masks.safetensors, its masks as u8 per
// HF weight (the weights themselves stay the dense masters).
//
// Saves are atomic at the directory level: everything is written into NAME.tmp/ (each file fsynced), the
// directory is renamed to NAME, and only then does the `latest` pointer file move to it. A crash at any
// point leaves the previous checkpoint complete and `latest` pointing at it.
#pragma once

#include "model/config.h"
#include "model/parameters.h"
#include "model/sparsity.h"
#include "ops/adamw.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace pt {

struct ModelWeights {
  ModelConfig config;
  std::vector<float> params;  // flat, ParameterLayout(config) order
};

// Hugging Face's shard limit, "5GB" (huggingface_hub's MAX_SHARD_SIZE, in units of 10^9 bytes).
inline constexpr int64_t kDefaultShardBytes = 5'000'000'000;

// Writes config.json, the weights (f32, or bf16 when they are bf16 values: a run without fp32 masters) and
// (if tokenizer_json is not empty) tokenizer.json into dir. Weights of at most max_shard_bytes go to
// model.safetensors; larger ones are split as huggingface_hub splits them:
// in layout order into model-00001-of-0000N.safetensors ... of at most max_shard_bytes each (a tensor over
// the limit gets a shard of its own), named in model.safetensors.index.json. Weight files an earlier save
// left in dir (model.safetensors, an index, shards) that this one does not overwrite are removed.
void save_model_dir(const std::string& dir, const ModelConfig& config, std::span<const float> params,
                    const std::string& tokenizer_json, int64_t max_shard_bytes = kDefaultShardBytes,
                    DType dtype = DType::f32);

// Reads an HF model directory of a supported family (model/families.h): config.json plus model.safetensors
// or a sharded index; fp32, bf16 or fp16 tensors. Errors name the tensor and the mismatch (missing, shape,
// corrupt); tensors the model does not use are an error too, unless allow_unused_tensors.
ModelWeights load_model_dir(const std::string& dir, bool allow_unused_tensors = false);

struct TrainerState {
  int64_t step = 0;              // optimizer steps done
  int64_t epoch = 0;             // data position: epoch ...
  int64_t batches_in_epoch = 0;  // ... and micro-batches of it consumed (single-process batch stream)
  uint64_t seed = 0;
  int64_t tokens_seen = 0;
  // A data-parallel run's position instead: examples of the epoch's order consumed (dist::RankStepStream),
  // which any number of ranks resumes from. Absent in single-process checkpoints (and older ones).
  std::optional<int64_t> position;
  // The master weights' dtype: bf16 when the run keeps no fp32 masters (its params are bf16 values).
  // Absent (f32) in older checkpoints.
  DType masters = DType::f32;
};

struct TrainingCheckpoint {
  ModelWeights weights;
  ops::HostMoment adam_m, adam_v;  // in the format they were saved in
  TrainerState state;
  std::vector<MaskTensor> masks;  // empty when the run was dense at the save
  std::string dir;
};

// Saves into root/step-NNNNNNNN and moves root/latest to it; returns the directory. A save that cannot be
// written (a full disk, a quota, a file size limit) removes its partial directory and throws pt::Error
// naming the file, the space the checkpoint needs and the previous checkpoint, which stays loadable.
std::string save_training_checkpoint(const std::string& root, const ModelConfig& config,
                                     std::span<const float> params, const ops::HostMoment& adam_m,
                                     const ops::HostMoment& adam_v, const TrainerState& state,
                                     const std::string& tokenizer_json,
                                     std::span<const MaskTensor> masks = {});

// The checkpoint root/latest points to, or nullopt when there is none yet.
std::optional<std::string> latest_checkpoint(const std::string& root);
TrainingCheckpoint load_training_checkpoint(const std::string& dir);

}  // namespace pt
