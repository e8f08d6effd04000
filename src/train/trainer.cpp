#include "train/trainer.h"

#include "checkpoint/checkpoint.h"
#include "core/arena.h"
#include "core/device.h"
#include "core/dir_lock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/host.h"
#include "core/log.h"
#include "data/batch_stream.h"
#include "data/tokenizer/tokenizer.h"
#include "distributed/data_parallel.h"
#include "distributed/launch.h"
#include "distributed/step_data.h"
#include "model/decoder.h"
#include "model/families.h"
#include "model/flops.h"
#include "model/init.h"
#include "model/presets.h"
#include "ops/grad_norm.h"
#include "train/evaluate.h"
#include "train/memory_fit.h"
#include "train/memory_plan.h"
#include "train/metrics.h"
#include "train/step_in_backward.h"
#include "train/stop_signals.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

namespace pt {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// The gradients: a flat f32 buffer in ParameterLayout order on the training device, padded to the ZeRO-1
// shards (the padding stays zero); the model writes the first layout.total() elements. The fp32 master
// weights and the AdamW moments live in the data-parallel optimizer.
struct Gradients {
  Arena arena;
  Tensor flat;  // flat_size elements
  Tensor view;  // layout.total() elements

  Gradients(int64_t total, int64_t flat_size, Device device) : arena(device) {
    const int h = arena.reserve(DType::f32, {flat_size});
    arena.allocate();
    flat = arena.view(h);
    view = Tensor(flat.data, DType::f32, {total}, device);
  }
  void zero() const {
    zero_bytes(flat.data, arena.device() == Device::cuda, static_cast<size_t>(flat.bytes()));
  }
};

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The device of the run. A plan alone (--dry-run) can be made for cuda where no GPU is visible.
Device resolve_device(const std::string& name, bool plan_only = false) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda") {
    if (cuda_device_count() == 0 && !plan_only)
      fail("--device cuda: {}", built_with_cuda()
                                    ? "no GPU is visible to this process"
                                    : "this build has no CUDA (rebuild where nvcc is installed)");
    return Device::cuda;
  }
  if (name == "auto") return cuda_device_count() > 0 ? Device::cuda : Device::cpu;
  fail("--device must be auto, cpu or cuda (got \"{}\")", name);
}

// One optimizer step's micro-batches (this rank's), the counts the loss normaliser and the log need, and
// the data position after them.
struct StepBatches {
  std::vector<Batch> micro;
  int64_t targets = 0, real_tokens = 0, processed_tokens = 0;
  int64_t global_real_tokens = 0;  // of every rank
  double flops = 0;
  int64_t epoch = 0, batches_in_epoch = 0;
  std::optional<int64_t> position;

  // Into the trainer state once the step is done.
  void record(TrainerState& state) const {
    state.epoch = epoch;
    if (position)
      state.position = position;
    else
      state.batches_in_epoch = batches_in_epoch;
  }
};

StepBatches counted(std::vector<Batch> micro, const ModelConfig& config) {
  StepBatches s;
  s.micro = std::move(micro);
  for (const Batch& b : s.micro) {
    for (int32_t t : loss_targets(b)) s.targets += t != kIgnoreLabel;
    s.real_tokens += b.real_tokens;
    s.processed_tokens += b.processed_tokens;
    s.flops += training_flops(config, b);
  }
  s.global_real_tokens = s.real_tokens;
  return s;
}

// The steps of a run: a single process's batch stream (grad_accum batches a step), or this rank's share
// of each global step (data parallel). It reads one step ahead on request (peek), so the trainer can stage
// the next step's first micro-batch while the current step runs.
class StepSource {
 public:
  StepSource(const DatasetSplit& split, const PackingOptions& packing, int32_t grad_accum,
             const TrainerState& state, const dist::Communicator* data_parallel)
      : grad_accum_(grad_accum) {
    if (data_parallel)
      steps_.emplace(split, packing, grad_accum, data_parallel->rank(), data_parallel->size(), state.epoch,
                     state.position.value_or(0));
    else
      batches_.emplace(split, packing, state.epoch, state.batches_in_epoch);
  }

  const StepBatches& peek(const ModelConfig& config) {
    if (!ahead_) ahead_ = fetch(config);
    return *ahead_;
  }

  StepBatches next(const ModelConfig& config) {
    peek(config);
    StepBatches s = std::move(*ahead_);
    ahead_.reset();
    return s;
  }

 private:
  StepBatches fetch(const ModelConfig& config) {
    if (batches_) {
      std::vector<Batch> micro;
      for (int32_t i = 0; i < grad_accum_; ++i) micro.push_back(batches_->next());
      StepBatches s = counted(std::move(micro), config);
      s.epoch = batches_->epoch();
      s.batches_in_epoch = batches_->batches_in_epoch();
      return s;
    }
    dist::RankStep step = steps_->next();
    StepBatches s = counted(std::move(step.micro), config);
    s.global_real_tokens = step.global_real_tokens();
    s.epoch = steps_->epoch();
    s.position = steps_->position();
    return s;
  }

  int32_t grad_accum_;
  std::optional<BatchStream> batches_;
  std::optional<dist::RankStepStream> steps_;
  std::optional<StepBatches> ahead_;
};

void check_train_config(const TrainConfig& tc) {
  auto positive = [](const char* flag, int64_t v) {
    if (v <= 0) fail("{} must be positive (got {})", flag, v);
  };
  positive("--steps", tc.steps);
  positive("--grad-accum", tc.grad_accum);
  positive("--log-every", tc.log_every);
  auto not_negative = [](const char* flag, int64_t v) {
    if (v < 0) fail("{} must be 0 or positive (got {})", flag, v);
  };
  not_negative("--eval-every", tc.eval_every);
  not_negative("--save-every", tc.save_every);
  not_negative("--stop-after", tc.stop_after);
  not_negative("--max-bad-steps", tc.max_bad_steps);
  if (!(tc.dist.timeout_s > 0)) fail("--dist-timeout must be positive seconds (got {})", tc.dist.timeout_s);
  if (!(tc.dist.bucket_mb > 0)) fail("--bucket-mb must be positive (got {})", tc.dist.bucket_mb);
  if (tc.master_weights != DType::f32 && tc.master_weights != DType::bf16)
    fail("--master-weights must be f32 or bf16 (got {})", dtype_name(tc.master_weights));
  if (tc.master_weights == DType::bf16 && tc.sparsity.enabled)
    fail(
        "--sparse24 needs fp32 master weights: 2:4 training keeps the pruned weights' values there (for "
        "new masks and the dense fine-tuning), and --master-weights bf16 keeps none; drop one of the two");
  if (!(tc.max_grad_norm >= 0)) fail("--clip must be 0 (no clipping) or positive (got {})", tc.max_grad_norm);
  if (tc.optimizer_in_backward) {
    // Each block is updated as soon as its gradients are final (train/step_in_backward.h).
    const char* why = "--optimizer-in-backward updates each layer as soon as its gradients are final";
    if (tc.max_grad_norm > 0)
      fail("{}, before the global gradient norm is known, so it cannot clip: pass --clip 0", why);
    if (tc.grad_accum != 1)
      fail("{}, so there is nothing to accumulate micro-batches into: pass --grad-accum 1 (got {})", why,
           tc.grad_accum);
    if (tc.sparsity.enabled)
      fail("{}, but 2:4 training's masked decay reads every gradient of the step; drop one of the two", why);
    if (tc.dist.zero1) fail("{}, on one process: drop --zero1", why);
  }
  if (tc.offload_optimizer && tc.sparsity.enabled)
    fail(
        "--offload-optimizer keeps the masters in host memory, but 2:4 training computes its masks from them "
        "on the device; drop one of the two");
  if (tc.offload_optimizer && tc.dist.zero1)
    fail("--offload-optimizer keeps every parameter's state in each rank's host memory: drop --zero1");
}

// A step in the backward cannot reduce gradients over ranks between its blocks.
void check_ranks(const TrainConfig& tc, int world_size) {
  if (tc.optimizer_in_backward && world_size > 1)
    fail(
        "--optimizer-in-backward updates each layer as soon as its gradients are final, on one process: "
        "there is no reduction over ranks between the layers; run it on one GPU (this launch has {})",
        world_size);
}

ModelConfig resolve_config(const TrainConfig& tc, const PreparedDataset& data) {
  if (!tc.init_from.empty()) return load_config((fs::path(tc.init_from) / "config.json").string());
  ModelConfig c = is_preset_name(tc.model) ? preset_config(tc.model) : load_config(tc.model);
  if (c.vocab_size == 0) c.vocab_size = data.vocab_size();  // packtrain's own presets: the tokenizer's
  c.validate(tc.model);
  return c;
}

// The model of the run, checked against the run's sparsity settings and the dataset's tokenizer.
ModelConfig model_config(const TrainConfig& tc, const PreparedDataset& data) {
  const ModelConfig config = resolve_config(tc, data);
  tc.sparsity.validate(config, tc.steps);
  if (config.vocab_size < data.vocab_size())
    fail("the model's vocab_size ({}) is smaller than the dataset's tokenizer ({}); use a matching config",
         config.vocab_size, data.vocab_size());
  if (tc.packing.objective != config.objective()) {
    const bool mlm = config.objective() == Objective::kMaskedLm;
    fail("a {} model trains on {} batches; pass --objective {}", config.family,
         mlm ? "masked-LM" : "causal-LM", mlm ? "mlm" : "causal");
  }
  return config;
}

// Masked LM masks with the vocabulary roles of the dataset's tokenizer (data/mlm/vocab.h).
void set_masking(const TrainConfig& tc, PackingOptions& packing) {
  if (packing.objective != Objective::kMaskedLm) return;
  const Tokenizer tokenizer = Tokenizer::from_file((fs::path(tc.data_dir) / "tokenizer.json").string());
  packing.mlm_vocab = std::make_shared<const MlmVocab>(MlmVocab::from_tokenizer(tokenizer, tc.mask_token));
  packing.mlm.validate(*packing.mlm_vocab);
}

int64_t longest_example(const DatasetSplit& split) {
  int64_t longest = 0;
  for (int64_t i = 0; i < split.size(); ++i) longest = std::max(longest, split.length(i));
  return longest;
}

// A model with learned positions (GPT-2) has a row for each position id it can see: the longest example's
// length, or a whole row's where concat runs positions on across examples. Checked before training, so
// that a long example does not stop the run midway.
void check_positions(const ModelConfig& config, const PackingOptions& packing, const PreparedDataset& data) {
  if (config.positions != Positions::learned) return;
  const int64_t reach = packing.strategy == Strategy::kConcat
                            ? packing.row_len
                            : std::max(longest_example(data.train()), longest_example(data.val()));
  if (reach > config.max_position_embeddings)
    fail(
        "the dataset needs {} positions{}, but the model has {} learned positions (n_positions); prepare it "
        "with --max-len {}{}",
        reach, packing.strategy == Strategy::kConcat ? " (concat rows)" : " (its longest example)",
        config.max_position_embeddings, config.max_position_embeddings,
        packing.strategy == Strategy::kConcat ? " or use rows no longer than that (--row-len)" : "");
}

// A data-parallel rank of the run's data: which share of each global step it takes.
struct DataRank {
  int rank, world_size;
};

// The largest micro-batch of this rank's remaining steps. Packing is deterministic, so replaying the
// batches (a fraction of a second per million examples) sizes the activation arena exactly, once; a bound
// over any epoch (the N longest examples together) would cost several times the memory on long-tailed data.
// The single-process stream replays from the run's start, as it always has.
int64_t largest_batch_tokens(const TrainConfig& tc, const PackingOptions& options, const DatasetSplit& split,
                             const TrainerState& state, const DataRank* data_parallel) {
  // Masking changes no batch's size, and would read every token of the run: the replay packs unmasked.
  PackingOptions p = options;
  p.objective = Objective::kCausalLm;
  int64_t largest = 0;
  if (!data_parallel) {
    BatchStream replay(split, p);
    for (int64_t i = 0; i < tc.steps * tc.grad_accum; ++i)
      largest = std::max(largest, replay.next().num_tokens());
    return largest;
  }
  dist::RankStepStream replay(split, p, tc.grad_accum, data_parallel->rank, data_parallel->world_size,
                              state.epoch, state.position.value_or(0));
  for (int64_t i = state.step; i < tc.steps; ++i)
    for (const Batch& b : replay.next().micro) largest = std::max(largest, b.num_tokens());
  return largest;
}

// Rank 0 locks the run directory, which it alone writes to. Every rank learns whether it could, so that
// none is left waiting for it in a collective.
std::unique_ptr<DirectoryLock> lock_run_directory(const std::string& out_dir, dist::Communicator& comm) {
  std::unique_ptr<DirectoryLock> lock;
  std::string refused;
  if (comm.rank() == 0) {
    try {
      fs::create_directories(out_dir);
      lock = std::make_unique<DirectoryLock>(out_dir, "train", "--out");
    } catch (const std::exception& e) {
      refused = e.what();
    }
  }
  const double failed = refused.empty() ? 0 : 1;
  if (comm.sum_host(std::span<const double>(&failed, 1))[0] > 0) {
    if (!refused.empty()) throw Error(refused);
    fail("rank 0 could not lock the run directory {}; its message says why", out_dir);
  }
  return lock;
}

// What every rank learns once a step's passes are done, before its optimizer update: the step's loss (the
// mean over all ranks' targets), whether any rank was asked to stop, and the gradient norm (the same on
// every rank).
struct StepOutcome {
  double loss = 0, grad_norm = 0;
  bool stop = false;
  bool finite() const { return std::isfinite(loss) && std::isfinite(grad_norm); }
};

// Steps skipped for a non-finite loss or gradient norm; too many in a row stop the run.
struct NonFiniteSteps {
  int64_t in_a_row = 0, total = 0;
  void count(bool finite) {
    in_a_row = finite ? 0 : in_a_row + 1;
    total += !finite;
  }
};

// Why the run ends after `step` though it is not the last: a rank's stop signal, or too many non-finite
// steps in a row.
std::optional<TrainEnd> early_end(const TrainConfig& tc, int64_t step, const StepOutcome& outcome,
                                  const NonFiniteSteps& bad) {
  if (step >= tc.steps) return std::nullopt;  // the last step ends it anyway
  if (outcome.stop) return TrainEnd::signal;
  if (tc.max_bad_steps > 0 && bad.in_a_row >= tc.max_bad_steps) return TrainEnd::non_finite;
  return std::nullopt;
}

bool listed(const std::vector<int64_t>& steps, int64_t step) {
  return std::find(steps.begin(), steps.end(), step) != steps.end();
}

// The memory plan's settings for one rank of this run; the gradients are f32.
PlanSettings plan_settings(const TrainConfig& tc, const ModelConfig& config, Device device, int64_t tokens,
                           int world_size) {
  PlanSettings s;
  s.model = config;
  s.device = device;
  s.tokens = tokens;
  s.recompute = tc.recompute;
  s.sparsity = tc.sparsity;
  s.world_size = world_size;
  s.zero1 = tc.dist.zero1;
  s.moments = tc.optimizer_state;
  s.masters = tc.master_weights;
  s.gradient_blocks = tc.optimizer_in_backward;
  s.offload = tc.offload_optimizer;
  return s;
}

// What the run's device can give it: the GPU's free memory, or the host's available memory (0: unknown).
int64_t available_memory(Device device) {
  return device == Device::cuda ? cuda_free_memory_bytes() : available_host_memory_bytes();
}

// Before anything large is allocated: every rank's plan fits its device (collective). A rank that cannot
// fit fails with the settings that would, the others naming how many ranks cannot.
void check_memory(const MemoryPlan& plan, int64_t available, int64_t min_tokens, dist::Communicator& comm) {
  std::string refusal = available > 0 ? fit_refusal(plan, available, min_tokens) : std::string();
  if (refusal.empty()) refusal = host_refusal(plan, available_host_memory_bytes());
  const double mine = refusal.empty() ? 0 : 1;
  const double refused = comm.sum_host(std::span<const double>(&mine, 1))[0];
  if (!refusal.empty()) fail("{}", refusal);
  if (refused > 0)
    fail("the memory plan does not fit on {} other rank(s), whose errors list settings that would", refused);
}

// --dry-run: the plan of a fresh run of this launch, for its rank with the largest micro-batch, on stdout,
// and whether it fits this device (where there is one to ask). No communicator, lock, checkpoint or device
// buffer.
TrainResult dry_run(const TrainConfig& tc) {
  const Device device = resolve_device(tc.device, /*plan_only=*/true);
  const dist::LaunchInfo launch = dist::detect_launch();
  check_ranks(tc, launch.world_size);
  auto data = PreparedDataset::open(tc.data_dir);
  const ModelConfig config = model_config(tc, data);
  PackingOptions packing = tc.packing;
  packing.seed = tc.seed;
  set_masking(tc, packing);
  check_positions(config, packing, data);
  const bool data_parallel = launch.world_size > 1 || tc.dist.backend == dist::Backend::kMpi ||
                             tc.dist.backend == dist::Backend::kNccl;
  const int64_t longest = std::max(longest_example(data.train()), longest_example(data.val()));
  int64_t capacity = longest_example(data.val());
  for (int r = 0; r < (data_parallel ? launch.world_size : 1); ++r) {
    const DataRank rank{r, launch.world_size};
    capacity = std::max(capacity, largest_batch_tokens(tc, packing, data.train(), TrainerState{},
                                                       data_parallel ? &rank : nullptr));
  }
  TrainResult result;
  result.end = TrainEnd::dry_run;
  result.memory_plan = plan_memory(plan_settings(tc, config, device, capacity, launch.world_size));
  const bool can_ask = device == Device::cpu || cuda_device_count() > 0;
  const int64_t available = can_ask ? available_memory(device) : 0;
  if (launch.rank == 0) {
    fmt::print("{}\n", format_plan(result.memory_plan, available));
    if (!can_ask) fmt::print("no GPU is visible: the plan is not checked against one\n");
    std::fflush(stdout);
  }
  if (const std::string refusal = available > 0 ? fit_refusal(result.memory_plan, available, longest) : "";
      !refusal.empty())
    fail("{}", refusal);
  if (const std::string refusal = host_refusal(result.memory_plan, available_host_memory_bytes());
      !refusal.empty())
    fail("{}", refusal);
  return result;
}

}  // namespace

TrainResult train(const TrainConfig& tc) {
  check_train_config(tc);
  if (tc.dry_run) return dry_run(tc);
  // The communicator first: NCCL picks this rank's GPU before anything is allocated on it.
  const Device device = resolve_device(tc.device);
  const auto comm = dist::make_communicator({tc.dist.backend, device, tc.dist.timeout_s});
  check_ranks(tc, comm->size());
  const bool lead = comm->rank() == 0;  // writes metrics, checkpoints and the final model
  const StopSignals signals;            // from here on a stop signal ends the run after a step
  const auto lock = lock_run_directory(tc.out_dir, *comm);
  auto data = PreparedDataset::open(tc.data_dir);
  const ModelConfig config = model_config(tc, data);
  const std::string tokenizer_json = read_file((fs::path(tc.data_dir) / "tokenizer.json").string());
  const fs::path ckpt_root = fs::path(tc.out_dir) / "checkpoints";
  if (lead) fs::create_directories(ckpt_root);

  // A resumed run continues from its checkpoint, with the checkpoint's data order. Every rank reads it
  // (the run directory is shared), before rank 0 can write a newer one.
  std::optional<TrainingCheckpoint> checkpoint;
  if (auto latest = tc.resume ? latest_checkpoint(ckpt_root.string()) : std::nullopt) {
    checkpoint = load_training_checkpoint(*latest);
    if (lead) log_info("resuming from {} at step {}", *latest, checkpoint->state.step);
  }
  comm->barrier();
  TrainerState state;
  state.seed = tc.seed;
  state.masters = tc.master_weights;
  if (checkpoint) {
    if (checkpoint->state.masters != tc.master_weights)
      fail(
          "{}: the checkpoint keeps {} master weights but this run {}; resume with --master-weights {} (a "
          "checkpoint's masters are not converted), or start afresh with --no-resume",
          checkpoint->dir, dtype_name(checkpoint->state.masters), dtype_name(tc.master_weights),
          dtype_name(checkpoint->state.masters));
    state = checkpoint->state;
  }
  PackingOptions packing = tc.packing;
  packing.seed = state.seed;
  set_masking(tc, packing);

  // Data-parallel data (global steps split by tokens) for several ranks, a backend named explicitly, or a
  // checkpoint of such a run; the single-process batch stream otherwise.
  const bool data_parallel = comm->size() > 1 || tc.dist.backend == dist::Backend::kMpi ||
                             tc.dist.backend == dist::Backend::kNccl || state.position.has_value();
  if (data_parallel && checkpoint && !state.position)
    fail(
        "{}: a single-process run wrote this checkpoint, and its data position (batches of its stream) "
        "means nothing to a data-parallel run; resume it with one process and --dist-backend auto, or start "
        "afresh with --no-resume",
        checkpoint->dir);
  if (data_parallel) state.position = state.position.value_or(0);
  const dist::Communicator* dp_data = data_parallel ? comm.get() : nullptr;

  check_positions(config, packing, data);
  // Validation packs whole examples into one flattened batch, so the arena also fits the longest of them.
  const int64_t longest_val = longest_example(data.val());
  const DataRank rank{comm->rank(), comm->size()};
  const int64_t capacity = std::max(
      largest_batch_tokens(tc, packing, data.train(), state, data_parallel ? &rank : nullptr), longest_val);
  // The memory plan, checked before the model, the gradients and the optimizer state are allocated.
  const MemoryPlan plan = plan_memory(plan_settings(tc, config, device, capacity, comm->size()));
  const int64_t available = available_memory(device);
  if (lead) log_info("{}", format_plan(plan, available));
  check_memory(plan, available, std::max(longest_example(data.train()), longest_val), *comm);
  // The CPU trains in fp32; a GPU computes in bf16 from fp32 master weights.
  DecoderModel model(config, capacity, device, device == Device::cuda ? DType::bf16 : DType::f32, tc.sparsity,
                     tc.recompute);
  const int64_t total = model.layout().total();
  // The gradients: every parameter's in one flat buffer, or a block's at a time when the optimizer steps
  // in the backward.
  std::optional<Gradients> grads;
  std::optional<StepInBackward> blockwise;
  if (tc.optimizer_in_backward)
    blockwise.emplace(model.layout(), device);
  else
    grads.emplace(total, dist::DataParallelOptimizer::flat_size(total, comm->size(), tc.dist.zero1), device);
  dist::DataParallelOptimizer dp(*comm, model.layout(), grads ? grads->flat : Tensor(),
                                 {.zero1 = tc.dist.zero1,
                                  .bucket_bytes = static_cast<int64_t>(tc.dist.bucket_mb * (1 << 20)),
                                  .compute_dtype = model.dtype(),
                                  .moments = tc.optimizer_state,
                                  .masters = tc.master_weights,
                                  .step_in_backward = tc.optimizer_in_backward,
                                  .offload = tc.offload_optimizer});
  const bool overlap = data_parallel && comm->size() > 1;
  const SparsitySchedule schedule(tc.sparsity, tc.steps);
  std::optional<FfnMasks> masks;
  if (tc.sparsity.enabled) masks.emplace(config, tc.sparsity, device);
  if (checkpoint) {
    if (checkpoint->weights.params.size() != static_cast<size_t>(total))
      fail(
          "{}: the checkpoint's model differs from this run's ({} vs {} parameters); use another --out or "
          "--no-resume",
          checkpoint->dir, checkpoint->weights.params.size(), total);
    dp.load_state(checkpoint->weights.params, checkpoint->adam_m, checkpoint->adam_v);
    if (masks && !checkpoint->masks.empty()) masks->from_host(checkpoint->masks, checkpoint->dir);
    checkpoint.reset();  // host copies no longer needed
  } else {
    // Every rank computes the same initial parameters (and keeps what it owns).
    dp.set_params(tc.init_from.empty() ? init_params(config, tc.seed)
                                       : load_model_dir(tc.init_from, tc.allow_unused_tensors).params);
  }
  if (lead) {
    log_info(
        "model: {}, {} layers, hidden {}, {} heads ({} kv), vocab {}: {:.2f}M parameters; activations "
        "{:.1f} MiB",
        config.family, config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
        config.num_key_value_heads, config.vocab_size, static_cast<double>(config.num_parameters()) / 1e6,
        static_cast<double>(model.activation_bytes()) / (1 << 20));
    if (data_parallel)
      log_info(
          "data parallel: {} ranks ({} backend), {} micro-batches' worth of examples a step, {}, {} buckets "
          "of "
          "{:g} MiB, collective timeout {:g} s",
          comm->size(), comm->backend(), comm->size() * tc.grad_accum,
          tc.dist.zero1 ? "ZeRO-1 (masters and moments sharded)" : "replicated optimizer",
          dp.reducer().buckets().size(), tc.dist.bucket_mb, tc.dist.timeout_s);
    // Every rank's shard has the same size, so rank 0's figure is every rank's.
    log_info(
        "optimizer state: {:.2f} MiB of {} master weights and AdamW moments per rank, moments in {}{}{}{}",
        mib(dp.state_bytes()),
        tc.master_weights == DType::f32 ? "fp32" : "bf16 (stochastically rounded; no fp32)",
        ops::moment_format_name(tc.optimizer_state),
        dp.offloaded() ? fmt::format(", offloaded to host memory through {:.2f} MiB of device slots",
                                     mib(dp.offload_slot_bytes()))
                       : std::string(),
        tc.optimizer_in_backward ? ", stepped in the backward (layer by layer)" : "",
        tc.dist.zero1
            ? fmt::format(" ({:.2f} MiB replicated)", mib(total * dtype_size(tc.master_weights) +
                                                          2 * ops::moment_bytes(tc.optimizer_state, total)))
            : std::string());
    if (masks) {
      const WeightGrad dw = tc.sparsity.weight_grad_on(device);
      log_info(
          "2:4 sparse FFN ({}): sparse for steps {}-{} of {}, masks every {} steps, masked decay {:g}, dW: "
          "{}",
          tc.sparsity.layers(), schedule.sparse_begin() + 1, schedule.sparse_end(), tc.steps,
          tc.sparsity.mask_every, tc.sparsity.masked_decay,
          dw == WeightGrad::mvue    ? "MVUE"
          : dw == WeightGrad::dense ? "exact"
                                    : "MVUE where the autotuner runs it sparse, else exact");
    }
  }

  StepSource source(data.train(), packing, tc.grad_accum, state, dp_data);
  std::optional<MetricsLog> metrics;
  if (lead) metrics.emplace((fs::path(tc.out_dir) / "metrics.jsonl").string());
  LrSchedule lr = tc.lr;
  lr.total_steps = tc.steps;
  const double peak_flops = tc.peak_tflops > 0       ? tc.peak_tflops * 1e12
                            : device == Device::cuda ? cuda_peak_bf16_flops()
                                                     : cpu_peak_flops_estimate();
  TrainResult result;
  result.memory_plan = plan;
  // The weights the model computes with: the replicated fp32 masters of an f32 model, or the optimizer's
  // working copy (kept by AdamW; with ZeRO-1 gathered from every rank's, a collective) with the model's
  // masks, or the bf16 masters themselves. Stale after every optimizer step and mask change.
  bool weights_current = false;
  auto refresh_weights = [&] {
    if (weights_current) return;
    if (dp.gathers_weights())
      model.use_working_weights(dp.gather_weights(model.sparse_active() ? &*masks : nullptr));
    else
      model.load_weights(dp.masters());
    weights_current = true;
  };
  // Every rank validates (the same batches, so the same loss; no collective past the weights' gather), so
  // no rank waits on the others' validation in its next collective.
  auto validate = [&] {
    refresh_weights();
    auto r = evaluate(model, data.val(), tc.eval_batches,
                      tc.packing.strategy == Strategy::kConcat ? tc.packing.row_len : 0, packing);
    if (metrics) metrics->validation(state.step, r.loss, r.tokens);
    if (result.first_val_loss == 0) result.first_val_loss = r.loss;
    result.final_val_loss = r.loss;
  };
  // The sparsity of the step that follows `done` steps, before its passes and before the gradients are
  // zeroed: the masks computed on schedule from the full fp32 masters (gathered with ZeRO-1; the same on
  // every rank, so the same masks), kept, or dropped for dense fine-tuning.
  auto prepare_sparsity = [&](int64_t done) {
    if (!masks) return;
    const bool was_sparse = model.sparse_active();
    if (!schedule.sparse_at(done)) {
      if (masks->computed()) {
        masks->drop();
        if (lead) log_info("step {:>6} | dense fine-tuning from here on: 2:4 masks dropped", done + 1);
      }
      model.set_masks(nullptr);
    } else {
      if (schedule.recompute_at(done)) {
        const MaskUpdate u = masks->recompute(dp.gather_masters());
        weights_current = false;
        if (metrics) metrics->masks(done + 1, u.flips, u.entries, u.first);
      } else if (!masks->computed()) {
        fail(
            "step {} trains 2:4 sparse but the checkpoint it resumed from holds no masks (a run with other "
            "sparsity flags saved it); resume with the same flags or start afresh with --no-resume",
            done + 1);
      }
      model.set_masks(&*masks);
    }
    if (model.sparse_active() != was_sparse) weights_current = false;
  };
  // Collective: every rank gathers the (possibly sharded) optimizer state; rank 0 writes it.
  auto save = [&] {
    const dist::FullState full = dp.gather_state();
    if (!lead) return;
    auto dir = save_training_checkpoint(
        ckpt_root.string(), config, full.params, full.m, full.v, state, tokenizer_json,
        masks && masks->computed() ? masks->to_host() : std::vector<MaskTensor>{});
    log_info("saved {}", dir);
  };

  // This invocation ends at last_step: the run's end, or earlier with --stop-after (to resume later).
  const int64_t first_step = state.step;
  const int64_t last_step = tc.stop_after > 0 ? std::min(tc.steps, first_step + tc.stop_after) : tc.steps;
  // The step's gradient norm stays on the device until the step's outcome is read, once, before the
  // optimizer step: the host queues the passes without waiting for the device.
  Arena step_stats(device);
  const int norm_slot = step_stats.reserve(DType::f64, {1});
  step_stats.allocate();
  const Tensor grad_norm_dev = step_stats.view(norm_slot);
  std::optional<DecoderModel::StagedBatch> staged_ahead;  // the next step's first micro-batch
  NonFiniteSteps bad;
  // The step's outcome, the same on every rank: the loss (this waits for the passes) and the ranks' stop
  // flags in one host collective, and the gradient norm.
  auto read_outcome = [&](double grad_scale) {
    double loss_sum = model.take_loss().loss_sum;
    if (listed(tc.faults.nan_loss, state.step + 1)) loss_sum = std::numeric_limits<double>::quiet_NaN();
    const double mine[2] = {loss_sum, signals.received() ? 1.0 : 0.0};
    const std::vector<double> sums = comm->sum_host(mine);
    StepOutcome o{.loss = sums[0] * grad_scale, .stop = sums[1] > 0};
    if (blockwise)
      o.grad_norm = blockwise->outcome().grad_norm;
    else
      copy_bytes(&o.grad_norm, false, grad_norm_dev.data, device == Device::cuda, sizeof(double));
    return o;
  };
  // Why this invocation ended before the run's last step, in the log.
  auto explain_stop = [&](TrainEnd end) {
    if (!lead) return;
    const char* resume = tc.save ? "run again with the same --out to resume" : "--no-save: nothing to resume";
    if (end == TrainEnd::stop_after)
      log_info("stopped at step {} of {}; {}", state.step, tc.steps, resume);
    else if (end == TrainEnd::signal)
      log_info("stopped at step {} of {} on {}{}; {}", state.step, tc.steps,
               signals.received() ? signal_name(signals.received()) : "another rank's stop signal",
               tc.save ? ", with a checkpoint" : "", resume);
    else
      log_error(
          "steps {}-{}: {} steps in a row had a non-finite loss or gradient norm (--max-bad-steps {}), "
          "so the run stopped. The checkpoint of step {} holds the last good weights and AdamW moments "
          "(those after step {}) and resumes after the skipped batches. Try a lower --lr or a longer "
          "--warmup, a smaller --clip, or check the data of these steps for extreme or broken records; on "
          "a GPU, bf16 overflow gives this too, which a lower learning rate usually avoids. --no-resume "
          "starts afresh",
          state.step - bad.in_a_row + 1, state.step, bad.in_a_row, tc.max_bad_steps, state.step,
          state.step - bad.in_a_row);
  };
  const auto run_start = Clock::now();
  if (state.step == 0) validate();
  comm->take_stats();  // collectives of the setup do not count in the first step
  while (state.step < last_step) {
    const auto t0 = Clock::now();
    // 1. Batch: this rank's micro-batches of the step; the loss is the mean over the targets of all ranks'.
    const StepBatches batches = source.next(config);
    const double mine[3] = {static_cast<double>(batches.targets),
                            static_cast<double>(batches.processed_tokens), batches.flops};
    const std::vector<double> global = comm->sum_host(mine);
    const double grad_scale = 1.0 / std::max(1.0, global[0]);
    // 2. Forward and backward; gradients accumulate over the micro-batches (2:4 sparse FFN linears on
    // masked weights, their output gradients pruned by draws seeded per step, micro-batch and rank).
    prepare_sparsity(state.step);
    refresh_weights();
    if (grads) grads->zero();
    // AdamW's settings of the step (a step in the backward applies them during the pass).
    ops::AdamWConfig adamw = tc.adamw;
    adamw.lr = lr.at(state.step + 1);
    adamw.seed = state.seed;
    // The first micro-batch was staged during the previous step, each later one while the pass before it
    // runs. (A data-parallel rank may have no micro-batch in a step.)
    std::optional<DecoderModel::StagedBatch> staged = staged_ahead;
    for (size_t i = 0; i < batches.micro.size(); ++i) {
      if (!staged) staged = model.stage(batches.micro[i]);
      const auto micro = static_cast<int64_t>(i) * comm->size() + comm->rank();
      model.set_mvue_seed({state.seed, state.step, micro});
      // The last micro-batch's backward starts the reduction of each bucket as soon as its gradients
      // are final (one process has nothing to reduce).
      if (overlap && i + 1 == batches.micro.size())
        model.set_backward_progress([&](int64_t offset) { dp.ready_from(offset); });
      const bool poison = i == 0 && listed(tc.faults.inf_grad, state.step + 1);
      const double scale = poison ? std::numeric_limits<double>::infinity() : grad_scale;
      if (blockwise)
        model.forward_backward(*staged, blockwise->blocks(dp, adamw, state.step + 1), scale);
      else
        model.forward_backward(*staged, grads->view, scale);
      staged.reset();
      if (i + 1 < batches.micro.size()) staged = model.stage(batches.micro[i + 1]);
    }
    model.set_backward_progress({});
    // 3. Sum the gradients over ranks and take their norm; the clip scales them as AdamW reads them
    // (grad_scale, below), so no pass rewrites them. The masked decay on the sparse linears' pruned weights
    // is added to the clipped gradients instead: a regulariser of the weights like AdamW's, it does not
    // count in the gradient norm (which stays comparable with dense runs), nor does clipping weaken it on
    // the steps it scales down. (With ZeRO-1 only this rank's shard of the gradients is summed; the decay
    // and AdamW read only that.) The optimizer in the backward has updated every block during the pass
    // instead.
    const double decay_lambda = model.sparse_active() ? schedule.decay_at(state.step) : 0;
    if (!blockwise) {
      dp.reduce_gradients();
      if (lead && overlap && state.step == first_step)
        log_info("gradient reduction: {} of {} buckets started during the backward pass",
                 dp.reducer().started_early(), dp.reducer().buckets().size());
      if (decay_lambda > 0) {
        // --clip 0: the norm without clipping (a scale by 1).
        dp.clip_grad_norm_deferred(
            tc.max_grad_norm > 0 ? tc.max_grad_norm : std::numeric_limits<double>::infinity(), grad_norm_dev);
        dp.masked_decay(*masks, decay_lambda);
      } else {
        dp.grad_norm_deferred(grad_norm_dev);
      }
    }
    // While the device finishes the passes: the next step's batches, and its first micro-batch's copy queued.
    staged_ahead.reset();
    if (state.step + 1 < last_step)
      if (const StepBatches& next = source.peek(config); !next.micro.empty())
        staged_ahead = model.stage(next.micro[0]);
    // 4. The step's outcome: loss, gradient norm, and whether a rank was asked to stop.
    const StepOutcome outcome = read_outcome(grad_scale);
    // 5. The optimizer step, skipped (weights and moments untouched) when the outcome is not finite; the
    // step counts either way, and the state a checkpoint records advances.
    ++state.step;
    bad.count(outcome.finite());
    if (blockwise) {
      const StepInBackward::Outcome b = blockwise->outcome();
      if (b.updated_some) weights_current = false;
      if (!outcome.finite() && b.updated_some && lead)
        log_warn(
            "step {}: {}; --optimizer-in-backward had updated the {} by then: the step is applied in part",
            state.step,
            b.bad_block_begin < 0
                ? std::string("the loss is not finite")
                : fmt::format("the gradients from flat offset {} down are not finite", b.bad_block_begin),
            b.bad_block_begin < 0 ? "whole model" : "blocks above them");
    } else if (outcome.finite()) {
      // The clip, unless clip_grad_norm_deferred made it: the factor that would have scaled the gradients,
      // from the same norm, so the same bits.
      if (decay_lambda == 0) adamw.grad_scale = ops::clip_factor(tc.max_grad_norm, outcome.grad_norm);
      dp.step(adamw, state.step);
      weights_current = false;
    }
    batches.record(state);
    state.tokens_seen += batches.global_real_tokens;
    // 6. Log, validate, save; a run that ends early ends with a checkpoint.
    const std::optional<TrainEnd> early = early_end(tc, state.step, outcome, bad);
    const double step_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double wait_s = comm->take_stats().wait_s;
    if (state.step % tc.log_every == 0 || state.step == last_step || !outcome.finite() || early) {
      const dist::StepStats stats = dist::gather_step_stats(*comm, batches.real_tokens, step_s, wait_s);
      const double elapsed = std::chrono::duration<double>(Clock::now() - run_start).count();
      StepMetrics m;
      m.step = state.step, m.total_steps = tc.steps;
      m.loss = outcome.loss;
      m.lr = adamw.lr, m.grad_norm = outcome.grad_norm;
      m.real_tokens_per_s = stats.global_tokens_per_s;
      const double processed = global[1], real = static_cast<double>(batches.global_real_tokens);
      m.padding_pct = 100.0 * (processed - real) / std::max(1.0, processed);
      // Every rank's flops over the slowest rank's time, against the peak of all the ranks' devices.
      const double slowest_s =
          real > 0 && stats.global_tokens_per_s > 0 ? real / stats.global_tokens_per_s : step_s;
      m.mfu_pct = peak_flops > 0 ? 100.0 * global[2] / slowest_s / (peak_flops * comm->size()) : 0;
      m.peak_memory_gib = device == Device::cuda ? cuda_memory_used_gib() : peak_host_memory_gib();
      m.elapsed_s = elapsed;
      m.eta_s =
          elapsed / static_cast<double>(state.step - first_step) * static_cast<double>(tc.steps - state.step);
      m.tokens_seen = state.tokens_seen;
      m.world_size = comm->size();
      m.min_rank_tokens_per_s = stats.min_rank_tokens_per_s;
      m.max_rank_tokens_per_s = stats.max_rank_tokens_per_s;
      m.comm_wait_s = stats.max_wait_s;
      m.token_imbalance = stats.token_imbalance;
      m.skipped = !outcome.finite();
      m.bad_in_a_row = bad.in_a_row, m.skipped_steps = bad.total;
      if (metrics) metrics->step(m);
    }
    const bool run_done = state.step == tc.steps;
    if (!early && (run_done || (tc.eval_every > 0 && state.step % tc.eval_every == 0))) validate();
    if (tc.save &&
        (early || state.step == last_step || (tc.save_every > 0 && state.step % tc.save_every == 0)))
      save();
    if (early) {
      result.end = *early;
      break;
    }
  }
  const DecoderModel::Memory held = model.memory();
  const bool state_on_host = dp.offloaded() && device == Device::cuda;
  result.memory_held = {.working_weights = held.working_copy + dp.working_bytes(),
                        .optimizer_state = state_on_host ? 0 : dp.state_bytes(),

                        .gradients = grads ? grads->arena.bytes() : blockwise->bytes(),
                        .activations = held.activations,
                        .batch_inputs = held.batch_inputs,
                        .sparse_masks = masks ? masks->bytes() : 0,
                        .sparse_weights = held.sparse_copies,
                        .workspaces = step_stats.bytes(),
                        .host_state = state_on_host ? dp.state_bytes() : 0,
                        .offload_slots = dp.offload_slot_bytes()};
  if (const std::string off = plan_mismatches(plan, result.memory_held); lead && !off.empty())
    log_warn("the memory plan differs from what the run allocated:\n{}", off);
  result.last_step = state.step;
  result.skipped_steps = bad.total;
  result.stop_signal = signals.received();
  if (state.step < tc.steps) {
    if (result.end == TrainEnd::finished) result.end = TrainEnd::stop_after;
    explain_stop(result.end);
    return result;
  }
  if (!tc.save) return result;
  result.final_dir = (fs::path(tc.out_dir) / "final").string();
  // The model as trained, masked while the run ended sparse (zeros where pruned), else dense: the full
  // masters (gathered from every rank with ZeRO-1, a collective).
  std::vector<float> final_params = lead || dp.zero1() ? dp.params_to_host() : std::vector<float>{};
  if (lead) {
    if (model.sparse_active()) masks->apply_on_host(final_params);
    try {
      save_model_dir(result.final_dir, config, final_params, tokenizer_json, kDefaultShardBytes,
                     tc.master_weights);
    } catch (const WriteError& e) {
      fail(
          "cannot write the final model to {}: {}. It needs about {}; the last checkpoint is complete, "
          "so the same command writes it once there is room",
          result.final_dir, e.what(),
          format_bytes(final_params.size() * sizeof(float) + tokenizer_json.size()));
    }
    log_info("final model (Hugging Face format) in {}", result.final_dir);
  }
  comm->barrier();  // the final model is written when any rank returns
  return result;
}

}  // namespace pt
