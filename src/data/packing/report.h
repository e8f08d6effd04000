// pack-report's numbers: one epoch of a strategy over a split, summed up, and its attention cost
// against padding's. Kept apart from the printing so it can be tested on hand-computed splits.
#pragma once

#include "data/dataset.h"
#include "data/packing/packer.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace pt {

struct StrategyReport {
  Strategy strategy = Strategy::kFlatten;
  int64_t batches = 0;
  int64_t rows = 0;
  int64_t real_tokens = 0;
  int64_t processed_tokens = 0;
  int64_t loss_tokens = 0;
  int64_t examples = 0;
  int64_t examples_split = 0;
  // Attention cost in units of token pairs: padding and concat attend over whole rows (row_len^2 per
  // row); the varlen strategies over each segment's real tokens (real_len^2 per segment, pads skipped).
  int64_t attention_cost = 0;
  double attention_vs_padding = 0;  // attention_cost / padding's (filled by pack_report)

  double padding_fraction() const {
    return processed_tokens > 0
               ? 1.0 - static_cast<double>(real_tokens) / static_cast<double>(processed_tokens)
               : 0.0;
  }
};

// Attention cost of one batch as the strategy computes it (see StrategyReport::attention_cost).
int64_t attention_cost(const Batch& batch, Strategy strategy);

// One epoch of options.strategy; progress(fraction of the epoch) after each batch when given.
StrategyReport measure_epoch(const DatasetSplit& split, const PackingOptions& options, int64_t epoch,
                             const std::function<void(double)>& progress = {});

// Every strategy, in kAllStrategies order, with the same batch setting; options.strategy is ignored.
std::vector<StrategyReport> pack_report(const DatasetSplit& split, const PackingOptions& options,
                                        const std::function<void(Strategy, double)>& progress = {});

}  // namespace pt
