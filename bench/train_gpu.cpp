// Training throughput on the GPU: one optimizer step per batch, queued as the trainer queues it (refresh
// the bf16 weights from the f32 master, forward and backward, gradient clipping, AdamW on device tensors,
// the next batch staged meanwhile, one wait for the loss at the step's end) over synthetic SFT-like
// batches (lognormal lengths around 330 tokens, up to 2048, or --example-tokens each; vocab 32000), packed
// by padding and by flatten. Reports real (non-pad) tokens per second, the device memory the step's arenas
// hold, the flatten/padding throughput ratio, and MFU on real tokens against the H200's dense bf16 peak. An
// encoder preset (bert-base) trains on the same examples masked for masked LM (15%, 80/10/10), ids below its
// vocab.
//
// Usage: bench_train_gpu [--steps 6] [--warmup 3] [--examples 16,64] [--example-tokens N] [--skip-1b]
//                        [--sparse24] [--sparse-1b-examples 16,64] [--recompute[=norms|layers]]
//                        [--json FILE] [--dump-batches FILE]
// --sparse24 compares dense FFNs against 2:4 sparse ones (both flatten) on 110m and 1b instead.
// --json writes one JSON object per configuration (median step too, for bench/report.py); --dump-batches
// writes the model config and the flatten batches of every configuration (batches 1, 2, ... are timed after
// --warmup untimed steps on batches 0, 1, ..., as there) so bench/peers/train_hf.py trains Hugging Face's
// model on exactly the same tokens.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/device.h"
#include "core/error.h"
#include "data/packing/packer.h"
#include "data/packing/synthetic_split.h"
#include "model/decoder.h"
#include "model/families.h"
#include "model/flops.h"
#include "model/init.h"
#include "model/presets.h"
#include "model/sparsity.h"
#include "ops/adamw.h"
#include "ops/elementwise.h"
#include "ops/grad_norm.h"

namespace {

using namespace pt;
using nlohmann::json;

constexpr int32_t kVocab = 32000;
constexpr double kPeakFlops = 989e12;  // H200 dense bf16 tensor cores
constexpr double kMaxGradNorm = 1.0;   // packtrain train's --clip default

// SFT-like examples: lengths from sft_like_lengths, or each of `length` tokens where it is positive (at
// most max_len either way), random ids below `vocab` (at most kVocab), a masked prompt.
DatasetSplit sft_split(int64_t examples, uint64_t seed, int64_t max_len, int32_t vocab, int64_t length) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> mask;
  std::vector<uint64_t> offsets = {0};
  const std::vector<int64_t> lengths = length > 0
                                           ? std::vector<int64_t>(static_cast<size_t>(examples), length)
                                           : sft_like_lengths(examples, seed);
  for (int64_t len : lengths) {
    len = std::min(len, max_len);
    const int64_t prompt = static_cast<int64_t>(rng() % static_cast<uint64_t>(len));
    for (int64_t i = 0; i < len; ++i) {
      tokens.push_back(static_cast<uint32_t>(rng() % static_cast<uint64_t>(std::min(vocab, kVocab))));
      mask.push_back(i >= prompt ? 1 : 0);
    }
    offsets.push_back(tokens.size());
  }
  return DatasetSplit::from_vectors(std::move(tokens), std::move(mask), std::move(offsets));
}

// The batches the model trains on: masked LM for an encoder, with ids 0-4 special and 4 the mask token.
std::vector<Batch> batches_of(const DatasetSplit& split, Strategy strategy, int32_t examples,
                              const ModelConfig& config) {
  PackingOptions o;
  o.strategy = strategy, o.examples_per_batch = examples, o.shuffle = false;
  if (config.objective() == Objective::kMaskedLm) {
    std::vector<TokenRole> roles(static_cast<size_t>(config.vocab_size), TokenRole::kWordStart);
    std::fill_n(roles.begin(), 5, TokenRole::kSpecial);
    o.objective = Objective::kMaskedLm;
    o.mlm_vocab = std::make_shared<const MlmVocab>(std::move(roles), 4);
  }
  std::vector<Batch> batches;
  for (auto packer = make_packer(split, o, 0); auto b = packer->next();) batches.push_back(std::move(*b));
  return batches;
}

// f32 master weights, gradients and AdamW moments in one device arena, one AdamW entry per tensor.
struct DeviceOptimizer {
  Arena arena{Device::cuda};
  Tensor params, grads, working;  // f32 masters and gradients; the bf16 copy the model reads
  std::vector<ops::AdamWTensor> tensors;

  explicit DeviceOptimizer(const ParameterLayout& layout, const std::vector<float>& init) {
    const int64_t n = layout.total();
    const int p = arena.reserve(DType::f32, {n}), g = arena.reserve(DType::f32, {n});
    const int m = arena.reserve(DType::f32, {n}), v = arena.reserve(DType::f32, {n});
    const int w = arena.reserve(DType::bf16, {n});
    arena.allocate();
    params = arena.view(p), grads = arena.view(g), working = arena.view(w);
    copy_bytes(params.data, true, init.data(), false, init.size() * sizeof(float));
    ops::cast(params, working);
    for (const auto& info : layout.params()) {
      ops::AdamWTensor t{params.elements(info.offset, info.numel), grads.elements(info.offset, info.numel),
                         arena.view(m).elements(info.offset, info.numel),
                         arena.view(v).elements(info.offset, info.numel), info.weight_decay()};
      t.working = working.elements(info.offset, info.numel);  // AdamW writes the copy as it steps
      tensors.push_back(t);
    }
  }
};

// What every configuration shares: where --json and --dump-batches write (either may be absent), and
// --recompute.
struct Outputs {
  std::optional<std::ofstream> json_lines, dump;
  bool first_dump = true;
  std::string recompute = "none";  // --recompute[=norms|layers]: what every configuration recomputes
  int warmup = 3;                  // --warmup: untimed steps on batches 0, 1, ... as train_hf.py takes them
  int64_t example_tokens = 0;      // --example-tokens: every example this long (0: SFT-like lengths)
};

std::ofstream open_output(const std::string& path, const char* flag) {
  std::ofstream f(path);
  if (!f) fail("{} {}: cannot open for writing (does its directory exist?)", flag, path);
  return f;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One configuration's flatten batches for the Hugging Face peer: ids, labels (HF convention, -100 at
// every example's first token) and position ids restarting per example.
void dump_batches(Outputs& out, const ModelConfig& config, const std::string& preset, int32_t examples,
                  const std::vector<Batch>& batches) {
  json list = json::array();
  for (const Batch& b : batches)
    list.push_back({{"input_ids", b.input_ids}, {"labels", b.labels}, {"position_ids", b.position_ids}});
  json entry = {{"preset", preset},
                {"examples", examples},
                {"config", json::parse(config_to_json(config))},
                {"warmup_batches", 1},
                {"batches", std::move(list)}};
  *out.dump << (out.first_dump ? "{\"configs\": [\n" : ",\n") << entry.dump();
  out.first_dump = false;
}

struct Result {
  double real_tokens_per_s = 0, mfu = 0, gib = 0;
};

// sparse: the FFN linears train 2:4 sparse (masks from the initial weights, MVUE weight gradients,
// masked decay), as `packtrain train --sparse24` does between mask updates.
Result bench(const ModelConfig& config, const std::vector<float>& init, const std::string& preset,
             int32_t examples, Strategy strategy, int steps, Outputs& out, bool sparse = false) {
  const Recompute recompute = parse_recompute(out.recompute);
  // A model with learned positions (GPT-2) sees examples no longer than its table.
  const int64_t max_len = config.positions == Positions::learned ? config.max_position_embeddings
                                                                 : std::numeric_limits<int64_t>::max();
  const DatasetSplit split =
      sft_split(int64_t{examples} * (steps + 1), 1000 + static_cast<uint64_t>(examples), max_len,
                config.vocab_size, out.example_tokens);
  const std::vector<Batch> batches = batches_of(split, strategy, examples, config);
  if (out.dump && strategy == Strategy::kFlatten) dump_batches(out, config, preset, examples, batches);
  int64_t max_tokens = 0;
  for (const auto& b : batches) max_tokens = std::max(max_tokens, b.num_tokens());
  SparsityConfig sparsity;
  sparsity.enabled = sparse;
  DecoderModel model(config, max_tokens, Device::cuda, DType::bf16, sparsity, recompute);
  DeviceOptimizer opt(model.layout(), init);
  std::optional<FfnMasks> masks;
  if (sparse) {
    masks.emplace(config, sparsity, Device::cuda);
    masks->recompute(opt.params);
    model.set_masks(&*masks);
  }
  const std::vector<Tensor> grad_list = {opt.grads};
  ops::AdamWConfig adamw;
  adamw.lr = 1e-4, adamw.weight_decay = 0.1;
  std::vector<int64_t> targets;
  for (const Batch& b : batches) {
    int64_t n = 0;
    for (int32_t t : loss_targets(b)) n += t != kIgnoreLabel;
    targets.push_back(std::max<int64_t>(1, n));
  }
  Arena stats(Device::cuda);
  const int norm_slot = stats.reserve(DType::f64, {1});
  stats.allocate();

  // The trainer's step: the batch was staged during the previous step (or now), the next one is staged
  // while this one runs, and the host waits once, for the loss and the gradient norm, before it queues
  // AdamW with the clip folded in; AdamW writes the bf16 copy the next pass reads. With 2:4 masks the
  // gradients are clipped in place, the masked decay added, and the model casts the masked copy itself.
  // forward_backward adds to the gradients, so they start at zero. Returns the batch's mean loss.
  std::optional<DecoderModel::StagedBatch> ahead;
  std::vector<double> queue_s;  // host time to queue each step's passes: below the step time, the GPU
                                // waits only while the host reads the norm and queues AdamW
  auto step = [&](size_t i, int64_t n, bool stage_next) {
    const auto start = std::chrono::steady_clock::now();
    const Batch& b = batches[i % batches.size()];
    const DecoderModel::StagedBatch staged = ahead ? *ahead : model.stage(b);
    zero_bytes(opt.grads.data, true, static_cast<size_t>(opt.grads.bytes()));
    if (masks)
      model.load_weights(opt.params);
    else
      model.use_working_weights(opt.working);
    model.set_mvue_seed({1, n, 0});
    model.forward_backward(staged, opt.grads, 1.0 / static_cast<double>(targets[i % batches.size()]));
    if (masks) {
      ops::clip_grad_norm_deferred(grad_list, kMaxGradNorm, stats.view(norm_slot));
      masks->masked_decay(opt.params, sparsity.masked_decay, opt.grads);
    } else {
      ops::global_norm_deferred(grad_list, stats.view(norm_slot));
    }
    ahead.reset();
    if (stage_next) ahead = model.stage(batches[(i + 1) % batches.size()]);
    queue_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    const double loss = model.take_loss().loss_sum / static_cast<double>(targets[i % batches.size()]);
    double norm = 0;
    copy_bytes(&norm, false, stats.view(norm_slot).data, true, sizeof norm);
    ops::AdamWConfig step_config = adamw;
    if (!masks) step_config.grad_scale = ops::clip_factor(kMaxGradNorm, norm);
    ops::adamw_step(opt.tensors, step_config, n);
    return loss;
  };
  // Warm-up: cuBLASLt plans and the first use of each kernel, scratch buffers. The sparse GEMMs' autotuner
  // decides once per token-count bucket: it sees every batch untimed.
  const double first_loss = step(0, 1, false);
  const size_t warmup = sparse ? batches.size() : static_cast<size_t>(out.warmup);
  for (size_t i = 1; i < warmup; ++i) step(i % batches.size(), static_cast<int64_t>(i) + 1, false);
  cuda_synchronize();
  queue_s.clear();
  double real = 0, processed = 0, flops = 0;
  std::vector<double> step_s, step_tokens_per_s;
  const auto t0 = std::chrono::steady_clock::now();
  auto ts = t0;
  for (int i = 1; i <= steps; ++i) {
    const Batch& b = batches[static_cast<size_t>(i) % batches.size()];
    step(static_cast<size_t>(i), i + 1, i < steps);
    const auto te = std::chrono::steady_clock::now();
    step_s.push_back(std::chrono::duration<double>(te - ts).count());
    ts = te;
    step_tokens_per_s.push_back(static_cast<double>(b.real_tokens) / step_s.back());
    real += static_cast<double>(b.real_tokens), processed += static_cast<double>(b.num_tokens());
    flops += training_flops(config, b);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // The optimizer's arena holds the bf16 copy the dense model reads; a sparse model casts its own.
  const double bytes =
      static_cast<double>(model.activation_bytes() + opt.arena.bytes() + model.memory().working_copy);
  Result r{real / s, flops / s / kPeakFlops, bytes / (1 << 30)};
  const std::string label = std::string(strategy_name(strategy)) + (sparse ? "+2:4" : "");
  fmt::print(
      "{:<5} {:>3} ex  {:<12} {:>7.0f} tok/batch ({:>3.0f}% real)  {:>8.1f} ms/step ({:>5.1f} ms to queue)  "
      "{:>9.0f} real tok/s  MFU {:>5.1f}%  arenas {:>6.1f} GiB\n",
      preset, examples, label, processed / steps, 100 * real / processed, 1e3 * s / steps,
      1e3 * median(queue_s), r.real_tokens_per_s, 100 * r.mfu, r.gib);
  if (out.json_lines) {
    std::vector<double> step_ms;
    for (double t : step_s) step_ms.push_back(1e3 * t);
    json j = {{"bench", "train_gpu"},
              {"engine", "packtrain"},
              {"device", cuda_device_name(0)},
              {"preset", preset},
              {"examples", examples},
              {"strategy", strategy_name(strategy)},
              {"sparse24", sparse},
              {"recompute", out.recompute},
              {"steps", steps},
              {"real_tokens_per_step", real / steps},
              {"processed_tokens_per_step", processed / steps},
              {"real_tokens_per_s", r.real_tokens_per_s},
              {"median_real_tokens_per_s", median(step_tokens_per_s)},
              {"median_step_ms", 1e3 * median(step_s)},
              {"median_queue_ms", 1e3 * median(queue_s)},
              {"warmup_steps", warmup},
              {"step_ms", step_ms},
              {"mfu_pct", 100 * r.mfu},
              {"arena_gib", r.gib},
              {"device_used_gib", cuda_memory_used_gib()},
              {"first_loss", first_loss}};
    *out.json_lines << j.dump() << "\n" << std::flush;
  }
  return r;
}

void compare(const std::string& preset, int32_t examples, int steps, Outputs& out) {
  ModelConfig config = preset_config(preset);
  if (config.vocab_size == 0) config.vocab_size = kVocab;  // packtrain's own shapes; the others keep theirs
  const std::vector<float> init = init_params(config, 1);
  // Padding may not fit where flatten does (Llama 3.2 1B's 24 examples padded to 2048 on an 80 GB card):
  // then flatten still runs, and the comparison says why it has no ratio.
  std::optional<Result> padding;
  try {
    padding = bench(config, init, preset, examples, Strategy::kPadding, steps, out);
  } catch (const pt::Error& e) {
    fmt::print("{:<5} {:>3} ex  padding did not run: {}\n", preset, examples, e.what());
  }
  const Result flatten = bench(config, init, preset, examples, Strategy::kFlatten, steps, out);
  if (padding)
    fmt::print("{:<5} {:>3} ex  flatten/padding real tokens/s: {:.2f}x\n", preset, examples,
               flatten.real_tokens_per_s / padding->real_tokens_per_s);
  fmt::print("\n");
}

// End to end, dense against 2:4 sparse FFNs, both with flatten packing.
void compare_sparse(const std::string& preset, int32_t examples, int steps, Outputs& out) {
  ModelConfig config = preset_config(preset);
  config.vocab_size = kVocab;
  const std::vector<float> init = init_params(config, 1);
  const Result dense = bench(config, init, preset, examples, Strategy::kFlatten, steps, out);
  const Result sparse = bench(config, init, preset, examples, Strategy::kFlatten, steps, out, true);
  fmt::print("{:<5} {:>3} ex  2:4 sparse / dense real tokens/s: {:.2f}x\n\n", preset, examples,
             sparse.real_tokens_per_s / dense.real_tokens_per_s);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GPU training-step throughput: padding vs flatten"};
  Outputs out;
  int steps = 6;
  bool skip_1b = false;
  std::string json_path, dump_path;
  app.add_option("--steps", steps, "timed optimizer steps per configuration")->check(CLI::PositiveNumber);
  app.add_option("--warmup", out.warmup,
                 "untimed steps first, on batches 0, 1, ... (bench/peers/train_hf.py's default: 3)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--skip-1b", skip_1b, "only the --models presets");
  std::vector<std::string> models = {"110m"};
  app.add_option("--models", models,
                 "presets compared at --examples (gpt2, qwen2.5-0.5b, bert-base, ... with their real vocab "
                 "sizes)")
      ->delimiter(',');
  std::vector<int32_t> examples = {16, 64};
  app.add_option("--examples", examples, "examples per step of the --models configurations")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--example-tokens", out.example_tokens,
                 "every example this many tokens (long-context SFT: documents, reasoning traces) instead of "
                 "SFT-like lengths")
      ->check(CLI::PositiveNumber);
  std::vector<int32_t> sparse_1b_examples = {16, 64};
  app.add_option("--sparse-1b-examples", sparse_1b_examples,
                 "examples per step of the 1b --sparse24 comparisons")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  bool sparse = false;
  app.add_flag("--sparse24", sparse,
               "compare dense against 2:4 sparse FFNs (flatten packing) instead of padding against flatten");
  std::string recompute = "none";
  app.add_flag("--recompute{norms}", recompute,
               "recompute activations in the backward: norms (and SwiGLU; --recompute) or layers "
               "(--recompute=layers: every layer's, from its input)")
      ->check(CLI::IsMember({"none", "norms", "layers"}));
  app.add_option("--json", json_path, "write one JSON object per configuration here (JSON lines)");
  app.add_option("--dump-batches", dump_path,
                 "write the model configs and flatten batches here (JSON) for bench/peers/train_hf.py");
  CLI11_PARSE(app, argc, argv);
  if (pt::cuda_device_count() == 0) {
    fmt::print("no CUDA device: nothing to benchmark (build with nvcc and run on a GPU machine)\n");
    return 0;
  }
  out.recompute = recompute;
  try {
    if (!json_path.empty()) out.json_lines = open_output(json_path, "--json");
    if (!dump_path.empty()) out.dump = open_output(dump_path, "--dump-batches");
    fmt::print("{} | bf16 compute, f32 master weights and AdamW on the device | {} timed steps each\n",
               pt::cuda_device_name(0), steps);
    if (sparse) {
      compare_sparse("110m", 64, steps, out);
      for (int32_t n : skip_1b ? std::vector<int32_t>{} : sparse_1b_examples)
        compare_sparse("1b", n, steps, out);
      return 0;
    }
    for (const std::string& model : models)
      for (int32_t n : examples) compare(model, n, steps, out);
  } catch (const pt::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  if (out.dump) {  // the peer compares the 110m configurations only
    *out.dump << (out.first_dump ? "{\"configs\": [" : "") << "\n]}\n";
    out.dump.reset();
  }
  if (skip_1b) return 0;
  try {
    compare("1b", 16, steps, out);
  } catch (const pt::Error& e) {  // the 1b preset is optional: it may not fit a smaller GPU
    fmt::print("1b at 16 examples did not run: {}\n", e.what());
  }
  return 0;
}
