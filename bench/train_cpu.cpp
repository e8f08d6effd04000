// CPU training throughput, padding vs flatten, at equal examples per step (16 SFT-like examples of at most
// 512 tokens): each optimizer step is forward + backward + gradient clipping + AdamW, as in the trainer.
// Reports real (non-pad) tokens/s, step time, padding share, and peak RSS per configuration.
// Usage: bench_train_cpu [--steps N] [--threads N]  (--steps: timed steps of `tiny`; 110m times one)
#include "data/batch_stream.h"
#include "data/packing/synthetic_split.h"
#include "model/families.h"
#include "model/init.h"
#include "model/presets.h"
#include "model/decoder.h"
#include "ops/adamw.h"
#include "ops/cpu/threads.h"
#include "ops/grad_norm.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace pt;

constexpr int32_t kExamplesPerStep = 16;
constexpr int64_t kMaxLen = 512;

// synthetic_split's lengths and loss masks, with its unique ids folded into [1, vocab).
DatasetSplit sft_split(int32_t vocab, int64_t examples) {
  const auto lengths = sft_like_lengths(examples, 7, 330, 0.9, kMaxLen);
  const auto unique = synthetic_split(lengths, 7);
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> mask;
  std::vector<uint64_t> offsets{0};
  for (int64_t i = 0; i < unique.size(); ++i) {
    const auto e = unique.example(i);
    for (uint32_t id : e.tokens) tokens.push_back(1 + id % static_cast<uint32_t>(vocab - 1));
    mask.insert(mask.end(), e.loss_mask.begin(), e.loss_mask.end());
    offsets.push_back(tokens.size());
  }
  return DatasetSplit::from_vectors(std::move(tokens), std::move(mask), std::move(offsets));
}

// Peak resident memory since the last reset_peak_rss(), from /proc (VmHWM).
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

struct Figures {
  double real_tokens_per_s = 0, step_ms = 0, padding_pct = 0, peak_rss_mib = 0;
};

// `warmup` untimed steps, then `steps` timed ones.
Figures measure(const ModelConfig& config, const DatasetSplit& split, Strategy strategy, int warmup,
                int steps) {
  reset_peak_rss();
  PackingOptions packing;
  packing.strategy = strategy;
  packing.examples_per_batch = kExamplesPerStep;
  BatchStream stream(split, packing);
  std::vector<Batch> batches;
  int64_t capacity = 0;
  for (int i = 0; i < warmup + steps; ++i) {
    batches.push_back(stream.next());
    capacity = std::max(capacity, batches.back().num_tokens());
  }
  DecoderModel model(config, capacity);
  std::vector<float> params = init_params(config, 0), grads(params.size()), m(params.size()),
                     v(params.size());
  const auto n = static_cast<int64_t>(params.size());
  const Tensor tp = Tensor::of(params.data(), {n}), tg = Tensor::of(grads.data(), {n});
  const std::vector<ops::AdamWTensor> adam{
      {tp, tg, Tensor::of(m.data(), {n}), Tensor::of(v.data(), {n}), true}};
  const ops::AdamWConfig adamw{3e-4, 0.9, 0.95, 1e-8, 0.1};

  Figures f;
  int64_t real = 0, processed = 0;
  double seconds = 0;
  for (int i = 0; i < warmup + steps; ++i) {
    const Batch& b = batches[static_cast<size_t>(i)];
    const auto t0 = std::chrono::steady_clock::now();
    std::fill(grads.begin(), grads.end(), 0.0f);
    model.forward_backward(b, tp, tg, 1.0 / static_cast<double>(b.real_tokens));
    ops::clip_grad_norm(std::span(&tg, 1), 1.0);
    ops::adamw_step(adam, adamw, i + 1);
    if (i < warmup) continue;
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    real += b.real_tokens;
    processed += b.processed_tokens;
  }
  f.real_tokens_per_s = static_cast<double>(real) / seconds;
  f.step_ms = seconds / steps * 1e3;
  f.padding_pct = 100.0 * static_cast<double>(processed - real) / static_cast<double>(processed);
  f.peak_rss_mib = peak_rss_mib();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("CPU training throughput: padding vs flatten at 16 examples per step");
  int steps = 4, threads = 0;
  app.add_option("--steps", steps, "Timed steps of the tiny preset (110m runs one)")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: all)");
  CLI11_PARSE(app, argc, argv);
  ops::set_cpu_threads(threads);

  fmt::print("{:<6} {:<8} {:>5} {:>12} {:>10} {:>7} {:>10} {:>9}\n", "model", "strategy", "steps",
             "real tok/s", "step ms", "pad %", "peak MiB", "vs pad");
  const std::pair<const char*, int32_t> presets[] = {{"tiny", 8192}, {"110m", 32000}};
  for (const auto& [preset, vocab] : presets) {
    ModelConfig config = preset_config(preset);
    config.vocab_size = vocab;
    // 110m: one step of ~25-60 s on 2 cores, long enough that its warm-up costs (first touch of the
    // activations, BLAS thread start) are small, so it runs no separate warm-up step.
    const bool tiny = std::string(preset) == "tiny";
    const int warmup = tiny ? 1 : 0, preset_steps = tiny ? steps : 1;
    const DatasetSplit split = sft_split(vocab, int64_t{kExamplesPerStep} * (warmup + preset_steps));
    double padding_tps = 0;
    for (Strategy s : {Strategy::kPadding, Strategy::kFlatten}) {
      const Figures f = measure(config, split, s, warmup, preset_steps);
      if (s == Strategy::kPadding) padding_tps = f.real_tokens_per_s;
      fmt::print("{:<6} {:<8} {:>5} {:>12.0f} {:>10.0f} {:>7.1f} {:>10.0f} {:>8.2f}x\n", preset,
                 strategy_name(s), preset_steps, f.real_tokens_per_s, f.step_ms, f.padding_pct,
                 f.peak_rss_mib, f.real_tokens_per_s / padding_tps);
      std::fflush(stdout);
    }
  }
  return 0;
}
