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

FitCandidate zero1_ranks(int ranks) {
  return {"ranks", fmt::format("--zero1 on {} ranks", ranks),
          fmt::format("{} GPUs; the working weights all-gathered every step", ranks),
          [ranks](PlanSettings& s) {
            if (ranks < s.world_size || (ranks == s.world_size && s.zero1)) return false;
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
  // A new mode that saves memory (bf16 gradients, offloaded state) is one more entry here.
  static const std::vector<FitCandidate> candidates = {
      recompute(Recompute::norms_and_swiglu, "--recompute=norms",
                "a few % more step time (norm and SwiGLU outputs recomputed)"),
      recompute(Recompute::layers, "--recompute=layers", "about a third more layer FLOPs"),
      moments(MomentFormat::bf16, "AdamW moments rounded to bf16 (4 bytes a parameter instead of 8)"),
      moments(MomentFormat::q8, "AdamW moments 8-bit block-wise quantized (about 2 bytes a parameter)"),
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
  // Each candidate alone; those that do not fit alone are kept for combinations.
  struct Applied {
    const FitCandidate* candidate;
    PlanSettings settings;
  };
  std::vector<Applied> short_of;
  for (const FitCandidate& c : candidates) {
    PlanSettings s = settings;
    if (!c.apply(s)) continue;
    if (fits(s))
      add(s, c.flags, c.cost);
    else
      short_of.push_back({&c, s});
  }
  for (size_t i = 0; i < short_of.size(); ++i)
    for (size_t j = i + 1; j < short_of.size(); ++j) {
      const FitCandidate &a = *short_of[i].candidate, &b = *short_of[j].candidate;
      PlanSettings s = short_of[i].settings;
      if (a.kind == b.kind || !b.apply(s) || !fits(s)) continue;
      add(s, a.flags + " " + b.flags, a.cost + "; " + b.cost);
    }
  // A smaller micro-batch, as is or with one candidate that falls short alone.
  const auto fewer_tokens = [&](PlanSettings s, const std::string& flags, const std::string& cost) {
    const std::optional<int64_t> tokens = largest_fitting_tokens(s, available, min_tokens);
    if (!tokens) return;
    const int64_t accum = (settings.tokens + *tokens - 1) / *tokens;
    s.tokens = *tokens;
    add(s, fmt::format("{}--tokens {}", flags.empty() ? "" : flags + " ", *tokens),
        fmt::format("{}micro-batches of {} tokens instead of {} (--grad-accum x{} keeps the step's tokens)",
                    cost.empty() ? "" : cost + "; ", *tokens, settings.tokens, accum));
  };
  fewer_tokens(settings, "", "");
  for (const Applied& a : short_of) fewer_tokens(a.settings, a.candidate->flags, a.candidate->cost);
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
  for (const FitSuggestion& f : fitting)
    out += fmt::format("\n  {:<40} {:>8.2f} GiB  {}", f.flags, static_cast<double>(f.total) / kGiB, f.cost);
  return out;
}

}  // namespace pt
