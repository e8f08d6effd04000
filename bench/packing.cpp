// Batch construction speed of every packing strategy, one thread, on a synthetic SFT-like split of about
// 5M tokens: data loading must outrun the GPU (tens of thousands of tokens per second per GPU).
#include "data/packing/packer.h"
#include "data/packing/synthetic_split.h"

#include <fmt/format.h>

#include <chrono>

int main() {
  using Clock = std::chrono::steady_clock;
  auto lengths = pt::sft_like_lengths(10000, 1);
  pt::DatasetSplit split = pt::synthetic_split(lengths, 1);
  fmt::print("split: {} examples, {} tokens (lognormal lengths, median 330, max 2048); row length 2048\n\n",
             split.size(), split.num_tokens());
  fmt::print("{:<13} {:>4} {:>8} {:>11} {:>14} {:>16}\n", "strategy", "N", "batches", "efficiency",
             "real Mtok/s", "processed Mtok/s");
  for (int32_t n : {16, 64}) {
    for (pt::Strategy s : pt::kAllStrategies) {
      pt::PackingOptions options;
      options.strategy = s;
      options.examples_per_batch = n;
      options.row_len = 2048;
      constexpr int kEpochs = 3;  // best of three, to skip warm-up noise
      double best = 1e30;
      int64_t batches = 0, real = 0, processed = 0;
      for (int epoch = 0; epoch < kEpochs; ++epoch) {
        batches = real = processed = 0;
        auto start = Clock::now();
        auto packer = pt::make_packer(split, options, epoch);
        while (auto batch = packer->next()) {
          ++batches;
          real += batch->real_tokens;
          processed += batch->processed_tokens;
        }
        best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
      }
      fmt::print("{:<13} {:>4} {:>8} {:>10.2f}% {:>14.1f} {:>16.1f}\n", pt::strategy_name(s), n, batches,
                 100.0 * static_cast<double>(real) / static_cast<double>(processed),
                 static_cast<double>(real) / best / 1e6, static_cast<double>(processed) / best / 1e6);
    }
  }
}
