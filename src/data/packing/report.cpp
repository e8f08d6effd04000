#include "data/packing/report.h"

#include <algorithm>

namespace pt {

int64_t attention_cost(const Batch& batch, Strategy strategy) {
  if (strategy == Strategy::kPadding || strategy == Strategy::kConcat)
    return int64_t{batch.rows} * batch.row_len * batch.row_len;
  // Segments never cross rows and pads trail each row, so a segment's real tokens are its overlap with
  // the real prefix of its row.
  int64_t cost = 0;
  for (size_t i = 0; i + 1 < batch.cu_seqlens.size(); ++i) {
    int32_t begin = batch.cu_seqlens[i], end = batch.cu_seqlens[i + 1];
    int32_t row = begin / batch.row_len;
    int32_t real_end = row * batch.row_len + batch.row_real_len[static_cast<size_t>(row)];
    int64_t real = std::max(0, std::min(end, real_end) - begin);
    cost += real * real;
  }
  return cost;
}

StrategyReport measure_epoch(const DatasetSplit& split, const PackingOptions& options, int64_t epoch,
                             const std::function<void(double)>& progress) {
  StrategyReport report;
  report.strategy = options.strategy;
  auto packer = make_packer(split, options, epoch);
  while (auto batch = packer->next()) {
    ++report.batches;
    report.rows += batch->rows;
    report.real_tokens += batch->real_tokens;
    report.processed_tokens += batch->processed_tokens;
    report.loss_tokens += batch->loss_tokens;
    report.examples += batch->examples;
    report.examples_split += batch->examples_split;
    report.attention_cost += attention_cost(*batch, options.strategy);
    if (progress) progress(packer->progress());
  }
  return report;
}

std::vector<StrategyReport> pack_report(const DatasetSplit& split, const PackingOptions& options,
                                        const std::function<void(Strategy, double)>& progress) {
  std::vector<StrategyReport> reports;
  for (Strategy s : kAllStrategies) {
    PackingOptions o = options;
    o.strategy = s;
    reports.push_back(measure_epoch(split, o, 0, [&](double f) {
      if (progress) progress(s, f);
    }));
  }
  static_assert(kAllStrategies[0] == Strategy::kPadding, "padding is the baseline, reports.front()");
  double baseline = static_cast<double>(reports.front().attention_cost);
  for (auto& r : reports)
    r.attention_vs_padding = baseline > 0 ? static_cast<double>(r.attention_cost) / baseline : 0.0;
  return reports;
}

}  // namespace pt
