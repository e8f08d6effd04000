// Training metrics: one record per optimizer step, printed to the console and appended to a JSONL file
// (metrics.jsonl in the run directory), plus validation records and, in 2:4 sparse runs, one record per mask
// computation with its flip rate. A non-finite loss or norm is written as null; a step whose optimizer
// update was skipped for it has "skipped": true. scripts/plot_run.py draws a run's file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace pt {

struct StepMetrics {
  int64_t step = 0, total_steps = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double real_tokens_per_s = 0, padding_pct = 0, mfu_pct = 0;  // of all ranks together
  double peak_memory_gib = 0, eta_s = 0, elapsed_s = 0;
  int64_t tokens_seen = 0;
  // Data parallelism (dist::StepStats): the slowest and fastest rank's real tokens/s, the longest time a
  // rank spent blocked in collectives during the step, and max / mean real tokens per rank.
  int world_size = 1;
  double min_rank_tokens_per_s = 0, max_rank_tokens_per_s = 0;
  double comm_wait_s = 0, token_imbalance = 1;
  // Non-finite steps: this one was skipped; how many in a row up to it, and in this invocation.
  bool skipped = false;
  int64_t bad_in_a_row = 0, skipped_steps = 0;
};

class MetricsLog {
 public:
  // Appends (a resumed run continues its file); a failed write is an error naming the file.
  explicit MetricsLog(const std::string& jsonl_path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void step(const StepMetrics& m);
  void validation(int64_t step, double loss, int64_t tokens);
  // 2:4 masks computed for step `step` (1-based, the first step that uses them); flips against the masks
  // before, unless these are the first.
  void masks(int64_t step, int64_t flips, int64_t entries, bool first);

 private:
  void append(const std::string& line);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace pt
