#include "train/memory_fit.h"

#include "ops/adamw.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

namespace pt {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr size_t kMaxSuggestions = 8;
constexpr int64_t kTokenStep = 256;  // suggested micro-batch sizes are multiples of this (or min_tokens)

FitCandidate recompute(Recompute mode, std::string flags, std::string cost) {
  return {"recompute", std::move(flags), std::move(cost), [mode](PlanSettings& s) {
            if (s.recompute == mode || s.recompute == Recompute::layers) return false;  // layers: the least
            s.recompute = mode;
            return true;
          }};
}

FitCandidate moments(MomentFormat format, std::string cost) {
  return {"moments", "--optimizer-state " + std::string(ops::moment_format_name(format)), std::move(cost),
          [format](PlanSettings& s) {
            if (ops::moment_bytes(format, kTokenStep) >= ops::moment_bytes(s.moments, kTokenStep))
              return false;
            s.moments = format;
            return true;
          }};
}

// On a GPU: the masters and the bf16 copy become the bf16 weights alone (the cpu, computing in f32,
// would keep an f32 copy of them: no saving there).
FitCandidate bf16_masters() {
  return {
      "masters", "--master-weights bf16",
      "no fp32 masters: the bf16 weights updated with stochastic rounding (2 bytes a parameter instead of "
      "6)",
      [](PlanSettings& s) {
        if (s.masters == DType::bf16 || s.sparsity.enabled || s.device != Device::cuda) return false;
        s.masters = DType::bf16;
        return true;
      }};
}

// The gradients of two blocks of layers instead of every parameter's (train/step_in_backward.h).
FitCandidate step_in_backward() {
  return {"gradients", "--optimizer-in-backward --clip 0",
          "AdamW per layer during the backward: no gradient clipping, one micro-batch a step, one GPU",
          [](PlanSettings& s) {
            if (s.gradient_blocks || s.world_size > 1 || s.zero1 || s.sparsity.enabled) return false;
            s.gradient_blocks = true;
            return true;
          }};
}

// The masters and moments in pinned host memory (distributed/state_offload.h).
FitCandidate offload() {
  return {"offload", "--offload-optimizer",
          "masters and AdamW moments in pinned host memory, streamed over the bus every step",
          [](PlanSettings& s) {
            if (s.offload || s.zero1 || s.sparsity.enabled || s.device != Device::cuda) return false;
            s.offload = true;
            return true;
          }};
}

FitCandidate zero1_ranks(int ranks) {
  return {"ranks", fmt::format("--zero1 on {} ranks", ranks),
          fmt::format("{} GPUs; the working weights all-gathered every step", ranks),
          [ranks](PlanSettings& s) {
            if (s.gradient_blocks || s.offload || ranks < s.world_size || (ranks == s.world_size && s.zero1))
              return false;
            s.world_size = ranks;
            s.zero1 = true;
            return true;
          }};
}

// The largest micro-batch in [min_tokens, settings.tokens) whose plan fits, a multiple of kTokenStep
// where it can be (the plan grows with the tokens).
std::optional<int64_t> largest_fitting_tokens(PlanSettings s, int64_t available, int64_t min_tokens) {
  const auto fits = [&](int64_t tokens) {
    s.tokens = tokens;
    return plan_memory(s).total() <= available;
  };
  int64_t lo = std::max<int64_t>(1, min_tokens), hi = s.tokens - 1;
  if (lo > hi || !fits(lo)) return std::nullopt;
  while (lo < hi) {  // fits(lo) holds
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return std::max(lo / kTokenStep * kTokenStep, std::max<int64_t>(1, min_tokens));
}

}  // namespace

const std::vector<FitCandidate>& fit_candidates() {
  // A new mode that saves memory is one more entry here.
  static const std::vector<FitCandidate> candidates = {
      recompute(Recompute::norms_and_swiglu, "--recompute=norms",
                "a few % more step time (norm and SwiGLU outputs recomputed)"),
      recompute(Recompute::layers, "--recompute=layers", "about a third more layer FLOPs"),
      moments(MomentFormat::bf16, "AdamW moments rounded to bf16 (4 bytes a parameter instead of 8)"),
      moments(MomentFormat::q8, "AdamW moments 8-bit block-wise quantized (about 2 bytes a parameter)"),
      bf16_masters(),
      step_in_backward(),
      offload(),
      zero1_ranks(2),
      zero1_ranks(4),
      zero1_ranks(8),
  };
  return candidates;
}

std::vector<FitSuggestion> fitting_settings(const PlanSettings& settings, int64_t available,
                                            int64_t min_tokens, const std::vector<FitCandidate>& candidates) {
  std::vector<std::pair<int, FitSuggestion>> found;  // with the ranks each needs
  const auto fits = [&](const PlanSettings& s) { return plan_memory(s).total() <= available; };
  const auto add = [&](const PlanSettings& s, std::string flags, std::string cost) {
    found.push_back({s.world_size, {std::move(flags), std::move(cost), plan_memory(s).total()}});
  };
  // Candidates alone, then combinations of up to three of different kinds, each built on one that falls
  // short (in candidate order, so each combination once); a smaller micro-batch where the run as it is,
  // one candidate or two still fall short.
  struct Applied {
    std::vector<const FitCandidate*> used;
    PlanSettings settings;
    std::string flags, cost;
  };
  const auto joined = [](const std::string& a, const std::string& b, const char* sep) {
    return a.empty() ? b : a + sep + b;
  };
  std::vector<Applied> short_of{{{}, settings, "", ""}};
  for (size_t level = 0; level < short_of.size(); ++level) {
    const Applied base = short_of[level];
    if (base.used.size() == 3) continue;
    for (const FitCandidate& c : candidates) {
      if (!base.used.empty() && &c <= base.used.back()) continue;
      if (std::any_of(base.used.begin(), base.used.end(), [&](const auto* u) { return u->kind == c.kind; }))
        continue;
      Applied next = base;
      if (!c.apply(next.settings)) continue;
      next.used.push_back(&c);
      next.flags = joined(base.flags, c.flags, " ");
      next.cost = joined(base.cost, c.cost, "; ");
      if (fits(next.settings))
        add(next.settings, next.flags, next.cost);
      else
        short_of.push_back(std::move(next));
    }
  }
  for (const Applied& a : short_of) {
    if (a.used.size() == 3) continue;
    const std::optional<int64_t> tokens = largest_fitting_tokens(a.settings, available, min_tokens);
    if (!tokens) continue;
    PlanSettings s = a.settings;
    s.tokens = *tokens;
    const int64_t accum = (settings.tokens + *tokens - 1) / *tokens;
    add(s, joined(a.flags, fmt::format("--tokens {}", *tokens), " "),
        joined(
            a.cost,
            s.gradient_blocks
                ? fmt::format("steps of {} tokens instead of {}", *tokens, settings.tokens)
                : fmt::format(
                      "micro-batches of {} tokens instead of {} (--grad-accum x{} keeps the step's tokens)",
                      *tokens, settings.tokens, accum),
            "; "));
  }
  // The settings on fewest GPUs first, so the kMaxSuggestions shown keep what fits the GPUs at hand.
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<FitSuggestion> out;
  for (size_t i = 0; i < found.size() && i < kMaxSuggestions; ++i) out.push_back(std::move(found[i].second));
  return out;
}

std::string fit_refusal(const MemoryPlan& plan, int64_t available, int64_t min_tokens,
                        const std::vector<FitCandidate>& candidates) {
  if (plan.total() <= available) return {};
  const bool gpu = plan.settings.device == Device::cuda;
  std::string out = fmt::format(
      "this run needs {:.2f} GiB of {} memory per rank (the memory plan above) but {:.2f} GiB {}. ",
      static_cast<double>(plan.total()) / kGiB, gpu ? "GPU" : "host", static_cast<double>(available) / kGiB,
      gpu ? "is free on the GPU" : "is available");
  const std::vector<FitSuggestion> fitting =
      fitting_settings(plan.settings, available, min_tokens, candidates);
  if (fitting.empty())
    return out + "No setting packtrain can change fits it: train a smaller model or use a larger device";
  out += "Settings that fit:";
  size_t width = 0;
  for (const FitSuggestion& f : fitting) width = std::max(width, f.flags.size());
  for (const FitSuggestion& f : fitting)
    out += fmt::format("\n  {:<{}} {:>8.2f} GiB  {}", f.flags, width, static_cast<double>(f.total) / kGiB,
                       f.cost);
  return out;
}

std::string host_refusal(const MemoryPlan& plan, int64_t available_host) {
  if (plan.host_state == 0 || available_host <= 0 || plan.host_state <= available_host) return {};
  return fmt::format(
      "--offload-optimizer keeps {:.2f} GiB of master weights and AdamW moments in pinned host memory, but "
      "{:.2f} GiB of host memory is available: make the state smaller (--optimizer-state 8bit, "
      "--master-weights bf16) or keep it on the GPU",
      static_cast<double>(plan.host_state) / kGiB, static_cast<double>(available_host) / kGiB);
}

}  // namespace pt
