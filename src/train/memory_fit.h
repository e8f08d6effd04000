// Whether a memory plan (train/memory_plan.h) fits the memory a device has free, and when it does not,
// which settings would: candidate changes from a list (one entry per mode, so a new mode is one more
// entry), tried alone, in pairs of different kinds, and with the largest micro-batch that then fits.
#pragma once

#include "train/memory_plan.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pt {

struct FitCandidate {
  std::string kind;   // candidates of one kind are alternatives, never combined
  std::string flags;  // what to pass to train
  std::string cost;   // what it costs
  // Changes the settings; false where it would change nothing (already so).
  std::function<bool(PlanSettings&)> apply;
};

// Recompute modes, then ZeRO-1 over more ranks: cheapest first.
const std::vector<FitCandidate>& fit_candidates();

struct FitSuggestion {
  std::string flags, cost;
  int64_t total = 0;  // the plan's bytes with it
};

// Settings whose plan is within `available` bytes, on the fewest GPUs first, each count in the candidates'
// order: single candidates, then pairs neither of which fits alone, then a smaller micro-batch (--tokens)
// alone or with one candidate; at most eight.
// A micro-batch holds at least min_tokens (the longest example: packing never splits one).
std::vector<FitSuggestion> fitting_settings(const PlanSettings& settings, int64_t available,
                                            int64_t min_tokens,
                                            const std::vector<FitCandidate>& candidates = fit_candidates());

// Empty when the plan fits in `available` bytes; else why not, and the settings that would fit.
std::string fit_refusal(const MemoryPlan& plan, int64_t available, int64_t min_tokens,
                        const std::vector<FitCandidate>& candidates = fit_candidates());

// Offloaded optimizer state (--offload-optimizer) lives in pinned host memory, which the device plan does
// not count: "" when plan.host_state fits available_host bytes (0: unknown), else why not and what to change.
std::string host_refusal(const MemoryPlan& plan, int64_t available_host);

}  // namespace pt
