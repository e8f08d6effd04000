#include "train/trainer.h"

#include "checkpoint/checkpoint.h"
#include "core/arena.h"
#include "core/device.h"
#include "core/error.h"
#include "core/file.h"
#include "core/host.h"
#include "core/log.h"
#include "data/batch_stream.h"
#include "model/flops.h"
#include "model/init.h"
#include "model/llama.h"
#include "ops/grad_norm.h"
#include "train/evaluate.h"
#include "train/metrics.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

namespace pt {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Master weights, gradients and AdamW moments: four flat fp32 buffers in ParameterLayout order, on the
// training device.
struct OptimizerState {
  Arena arena;
  Tensor params, grads, m, v;
  std::vector<ops::AdamWTensor> per_param;  // views of the four buffers, one entry per named parameter
  std::vector<Tensor> grad_views;

  OptimizerState(const ParameterLayout& layout, Device device) : arena(device) {
    const int64_t n = layout.total();
    int hp = arena.reserve(DType::f32, {n}), hg = arena.reserve(DType::f32, {n});
    int hm = arena.reserve(DType::f32, {n}), hv = arena.reserve(DType::f32, {n});
    arena.allocate();
    params = arena.view(hp), grads = arena.view(hg), m = arena.view(hm), v = arena.view(hv);
    for (const auto& p : layout.params()) {
      auto at = [&](const Tensor& t) {
        return Tensor(t.ptr<float>() + p.offset, DType::f32, {p.numel}, device);
      };
      per_param.push_back({at(params), at(grads), at(m), at(v), p.weight_decay});
      grad_views.push_back(at(grads));
    }
  }
  bool on_gpu() const { return arena.device() == Device::cuda; }
  std::vector<float> to_host(const Tensor& t) const {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    copy_bytes(out.data(), false, t.data, on_gpu(), out.size() * sizeof(float));
    return out;
  }
  void from_host(const Tensor& t, std::span<const float> values) const {
    PT_ASSERT(static_cast<int64_t>(values.size()) == t.numel());
    copy_bytes(t.data, on_gpu(), values.data(), false, values.size() * sizeof(float));
  }
  void zero_grads() const { zero_bytes(grads.data, on_gpu(), static_cast<size_t>(grads.bytes())); }
};

Device resolve_device(const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda") {
    if (cuda_device_count() == 0)
      fail("--device cuda: {}", built_with_cuda()
                                    ? "no GPU is visible to this process"
                                    : "this build has no CUDA (rebuild where nvcc is installed)");
    return Device::cuda;
  }
  if (name == "auto") return cuda_device_count() > 0 ? Device::cuda : Device::cpu;
  fail("--device must be auto, cpu or cuda (got \"{}\")", name);
}

// One optimizer step's micro-batches and the counts the loss normaliser and the log need.
struct StepBatches {
  std::vector<Batch> micro;
  int64_t targets = 0, real_tokens = 0, processed_tokens = 0;
  double flops = 0;
};

StepBatches next_step_batches(BatchStream& stream, int32_t grad_accum, const LlamaConfig& config) {
  StepBatches s;
  for (int32_t i = 0; i < grad_accum; ++i) {
    Batch& b = s.micro.emplace_back(stream.next());
    for (int32_t t : shifted_targets(b)) s.targets += t != kIgnoreLabel;
    s.real_tokens += b.real_tokens;
    s.processed_tokens += b.processed_tokens;
    s.flops += training_flops(config, b);
  }
  return s;
}

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
}

LlamaConfig resolve_config(const TrainConfig& tc, const PreparedDataset& data) {
  if (!tc.init_from.empty()) return load_config((fs::path(tc.init_from) / "config.json").string());
  LlamaConfig c = is_preset_name(tc.model) ? preset_config(tc.model) : load_config(tc.model);
  if (c.vocab_size == 0 || is_preset_name(tc.model)) c.vocab_size = data.vocab_size();
  c.validate(tc.model);
  return c;
}

int64_t longest_example(const DatasetSplit& split) {
  int64_t longest = 0;
  for (int64_t i = 0; i < split.size(); ++i) longest = std::max(longest, split.length(i));
  return longest;
}

// The largest micro-batch of the run. Packing is deterministic, so replaying the run's batches (a
// fraction of a second per million examples) sizes the activation arena exactly, once; a bound over any
// epoch (the N longest examples together) would cost several times the memory on long-tailed data.
int64_t largest_batch_tokens(const PackingOptions& p, const DatasetSplit& split, int64_t micro_batches) {
  BatchStream replay(split, p);
  int64_t largest = 0;
  for (int64_t i = 0; i < micro_batches; ++i) largest = std::max(largest, replay.next().num_tokens());
  return largest;
}

}  // namespace

TrainResult train(const TrainConfig& tc) {
  check_train_config(tc);
  auto data = PreparedDataset::open(tc.data_dir);
  const LlamaConfig config = resolve_config(tc, data);
  tc.sparsity.validate(config, tc.steps);
  if (config.vocab_size < data.vocab_size())
    fail("the model's vocab_size ({}) is smaller than the dataset's tokenizer ({}); use a matching config",
         config.vocab_size, data.vocab_size());
  const std::string tokenizer_json = read_file((fs::path(tc.data_dir) / "tokenizer.json").string());
  const fs::path ckpt_root = fs::path(tc.out_dir) / "checkpoints";
  fs::create_directories(ckpt_root);

  // A resumed run continues from its checkpoint, with the checkpoint's data order.
  std::optional<TrainingCheckpoint> checkpoint;
  if (auto latest = tc.resume ? latest_checkpoint(ckpt_root.string()) : std::nullopt) {
    checkpoint = load_training_checkpoint(*latest);
    log_info("resuming from {} at step {}", *latest, checkpoint->state.step);
  }
  TrainerState state;
  state.seed = tc.seed;
  if (checkpoint) state = checkpoint->state;
  PackingOptions packing = tc.packing;
  packing.seed = state.seed;

  // Validation packs whole examples into one flattened batch, so the arena also fits the longest of them.
  const int64_t capacity = std::max(largest_batch_tokens(packing, data.train(), tc.steps * tc.grad_accum),
                                    longest_example(data.val()));
  // The CPU trains in fp32; a GPU computes in bf16 from fp32 master weights.
  const Device device = resolve_device(tc.device);
  LlamaModel model(config, capacity, device, device == Device::cuda ? DType::bf16 : DType::f32, tc.sparsity);
  OptimizerState opt(model.layout(), device);
  const SparsitySchedule schedule(tc.sparsity, tc.steps);
  std::optional<FfnMasks> masks;
  if (tc.sparsity.enabled) masks.emplace(config, tc.sparsity, device);
  if (checkpoint) {
    if (checkpoint->weights.params.size() != static_cast<size_t>(model.layout().total()))
      fail(
          "{}: the checkpoint's model differs from this run's ({} vs {} parameters); use another --out or "
          "--no-resume",
          checkpoint->dir, checkpoint->weights.params.size(), model.layout().total());
    opt.from_host(opt.params, checkpoint->weights.params);
    opt.from_host(opt.m, checkpoint->adam_m);
    opt.from_host(opt.v, checkpoint->adam_v);
    if (masks && !checkpoint->masks.empty()) masks->from_host(checkpoint->masks, checkpoint->dir);
    checkpoint.reset();  // host copies no longer needed
  } else {
    auto init = tc.init_from.empty() ? init_params(config, tc.seed) : load_model_dir(tc.init_from).params;
    opt.from_host(opt.params, init);
  }
  log_info(
      "model: {} layers, hidden {}, {} heads ({} kv), vocab {}: {:.2f}M parameters; activations {:.1f} MiB",
      config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.num_key_value_heads,
      config.vocab_size, static_cast<double>(config.num_parameters()) / 1e6,
      static_cast<double>(model.activation_bytes()) / (1 << 20));
  if (masks)
    log_info(
        "2:4 sparse FFN ({}): sparse for steps {}-{} of {}, masks every {} steps, masked decay {:g}, {} dW",
        tc.sparsity.layers(), schedule.sparse_begin() + 1, schedule.sparse_end(), tc.steps,
        tc.sparsity.mask_every, tc.sparsity.masked_decay, tc.sparsity.dense_dw ? "dense" : "MVUE");

  BatchStream stream(data.train(), packing, state.epoch, state.batches_in_epoch);
  MetricsLog metrics((fs::path(tc.out_dir) / "metrics.jsonl").string());
  LrSchedule lr = tc.lr;
  lr.total_steps = tc.steps;
  const double peak_flops = tc.peak_tflops > 0       ? tc.peak_tflops * 1e12
                            : device == Device::cuda ? cuda_peak_bf16_flops()
                                                     : cpu_peak_flops_estimate();
  TrainResult result;
  auto validate = [&] {
    auto r = evaluate(model, opt.params, data.val(), tc.eval_batches);
    metrics.validation(state.step, r.loss, r.tokens);
    if (result.first_val_loss == 0) result.first_val_loss = r.loss;
    result.final_val_loss = r.loss;
  };
  // The sparsity of the step that follows `done` steps, before its passes: the masks computed on schedule
  // from the fp32 masters, kept, or dropped for dense fine-tuning.
  auto prepare_sparsity = [&](int64_t done) {
    if (!masks) return;
    if (!schedule.sparse_at(done)) {
      if (masks->computed()) {
        masks->drop();
        log_info("step {:>6} | dense fine-tuning from here on: 2:4 masks dropped", done + 1);
      }
      model.set_masks(nullptr);
      return;
    }
    if (schedule.recompute_at(done)) {
      const MaskUpdate u = masks->recompute(opt.params);
      metrics.masks(done + 1, u.flips, u.entries, u.first);
    } else if (!masks->computed()) {
      fail(
          "step {} trains 2:4 sparse but the checkpoint it resumed from holds no masks (a run with other "
          "sparsity flags saved it); resume with the same flags or start afresh with --no-resume",
          done + 1);
    }
    model.set_masks(&*masks);
  };
  auto save = [&] {
    auto dir = save_training_checkpoint(
        ckpt_root.string(), config, opt.to_host(opt.params), opt.to_host(opt.m), opt.to_host(opt.v), state,
        tokenizer_json, masks && masks->computed() ? masks->to_host() : std::vector<MaskTensor>{});
    log_info("saved {}", dir);
  };

  // This invocation ends at last_step: the run's end, or earlier with --stop-after (to resume later).
  const int64_t first_step = state.step;
  const int64_t last_step = tc.stop_after > 0 ? std::min(tc.steps, first_step + tc.stop_after) : tc.steps;
  const auto run_start = Clock::now();
  if (state.step == 0) validate();
  while (state.step < last_step) {
    const auto t0 = Clock::now();
    // 1. Batch: the step's micro-batches; the loss is the mean over all their targets.
    const StepBatches batches = next_step_batches(stream, tc.grad_accum, config);
    const double grad_scale = 1.0 / static_cast<double>(std::max<int64_t>(1, batches.targets));
    // 2. Forward and backward; gradients accumulate over the micro-batches (2:4 sparse FFN linears on
    // masked weights, their output gradients pruned by draws seeded per step and micro-batch).
    opt.zero_grads();
    prepare_sparsity(state.step);
    model.load_weights(opt.params);
    double loss_sum = 0;
    for (size_t i = 0; i < batches.micro.size(); ++i) {
      model.set_mvue_seed({state.seed, state.step, static_cast<int64_t>(i)});
      loss_sum += model.forward_backward(batches.micro[i], opt.grads, grad_scale).loss_sum;
    }
    // 3. Clip, then masked decay on the sparse linears' pruned weights. The decay is a regulariser of the
    // weights like AdamW's: it does not count in the gradient norm (which stays comparable with dense
    // runs), nor does clipping weaken it on the steps it scales down.
    const double grad_norm = ops::clip_grad_norm(opt.grad_views, tc.max_grad_norm);
    if (const double lambda = schedule.decay_at(state.step); model.sparse_active() && lambda > 0)
      masks->masked_decay(opt.params, lambda, opt.grads);
    // 4. Step, and advance the state a checkpoint records.
    ++state.step;
    ops::AdamWConfig adamw = tc.adamw;
    adamw.lr = lr.at(state.step);
    ops::adamw_step(opt.per_param, adamw, state.step);
    state.epoch = stream.epoch();
    state.batches_in_epoch = stream.batches_in_epoch();
    state.tokens_seen += batches.real_tokens;
    // 5. Log, validate, save.
    if (state.step % tc.log_every == 0 || state.step == last_step) {
      const double step_s = std::chrono::duration<double>(Clock::now() - t0).count();
      const double elapsed = std::chrono::duration<double>(Clock::now() - run_start).count();
      StepMetrics m;
      m.step = state.step, m.total_steps = tc.steps;
      m.loss = loss_sum * grad_scale;
      m.lr = adamw.lr, m.grad_norm = grad_norm;
      m.real_tokens_per_s = static_cast<double>(batches.real_tokens) / step_s;
      m.padding_pct = 100.0 * static_cast<double>(batches.processed_tokens - batches.real_tokens) /
                      static_cast<double>(std::max<int64_t>(1, batches.processed_tokens));
      m.mfu_pct = peak_flops > 0 ? 100.0 * batches.flops / step_s / peak_flops : 0;
      m.peak_memory_gib = device == Device::cuda ? cuda_memory_used_gib() : peak_host_memory_gib();
      m.elapsed_s = elapsed;
      m.eta_s =
          elapsed / static_cast<double>(state.step - first_step) * static_cast<double>(tc.steps - state.step);
      m.tokens_seen = state.tokens_seen;
      metrics.step(m);
    }
    const bool run_done = state.step == tc.steps;
    if (run_done || (tc.eval_every > 0 && state.step % tc.eval_every == 0)) validate();
    if (state.step == last_step || (tc.save_every > 0 && state.step % tc.save_every == 0)) save();
  }
  if (state.step < tc.steps) {
    log_info("stopped at step {} of {}; run again with the same --out to resume", state.step, tc.steps);
    return result;
  }
  result.final_dir = (fs::path(tc.out_dir) / "final").string();
  // The model as trained: masked while the run ended sparse (zeros where pruned), else dense.
  std::vector<float> final_params = opt.to_host(opt.params);
  if (model.sparse_active()) masks->apply_on_host(final_params);
  save_model_dir(result.final_dir, config, final_params, tokenizer_json);
  log_info("final model (Hugging Face format) in {}", result.final_dir);
  return result;
}

}  // namespace pt
