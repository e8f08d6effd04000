#include "train/metrics.h"

#include "core/error.h"
#include "core/log.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>

namespace pt {

namespace {
std::string eta_str(double s) {
  auto t = static_cast<long long>(s + 0.5);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60)
                   : fmt::format("{}m{:02}s", t / 60, t % 60);
}
}  // namespace

MetricsLog::MetricsLog(const std::string& jsonl_path) : path_(jsonl_path) {
  file_ = std::fopen(jsonl_path.c_str(), "a");
  if (!file_) fail("cannot open {} for metrics: {}", jsonl_path, std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::append(const std::string& line) {
  if (std::fputs(line.c_str(), file_) < 0 || std::fputc('\n', file_) < 0 || std::fflush(file_) != 0)
    fail("cannot write metrics to {}: {}", path_, std::strerror(errno));
}

void MetricsLog::step(const StepMetrics& m) {
  const std::string ranks =
      m.world_size == 1
          ? std::string()
          : fmt::format(" | {} ranks {:.0f}-{:.0f} tok/s each | comm {:.3f}s | imbalance {:.3f}",
                        m.world_size, m.min_rank_tokens_per_s, m.max_rank_tokens_per_s, m.comm_wait_s,
                        m.token_imbalance);
  const std::string skipped = m.skipped ? fmt::format(" | SKIPPED: not finite ({} in a row, {} in this run)",
                                                      m.bad_in_a_row, m.skipped_steps)
                                        : std::string();
  log_info(
      "step {:>6}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f} | {:.0f} tok/s | pad {:.1f}% | "
      "MFU {:.1f}% | mem {:.2f} GiB | ETA {}{}{}",
      m.step, m.total_steps, m.loss, m.lr, m.grad_norm, m.real_tokens_per_s, m.padding_pct, m.mfu_pct,
      m.peak_memory_gib, eta_str(m.eta_s), ranks, skipped);
  nlohmann::json j = {{"type", "train"},
                      {"step", m.step},
                      {"loss", m.loss},
                      {"lr", m.lr},
                      {"grad_norm", m.grad_norm},
                      {"real_tokens_per_s", m.real_tokens_per_s},
                      {"padding_pct", m.padding_pct},
                      {"mfu_pct", m.mfu_pct},
                      {"peak_memory_gib", m.peak_memory_gib},
                      {"tokens_seen", m.tokens_seen},
                      {"elapsed_s", m.elapsed_s},
                      {"world_size", m.world_size},
                      {"min_rank_tokens_per_s", m.min_rank_tokens_per_s},
                      {"max_rank_tokens_per_s", m.max_rank_tokens_per_s},
                      {"comm_wait_s", m.comm_wait_s},
                      {"token_imbalance", m.token_imbalance},
                      {"skipped_steps", m.skipped_steps}};
  if (m.skipped) j["skipped"] = true;
  append(j.dump());
}

void MetricsLog::validation(int64_t step, double loss, int64_t tokens) {
  log_info("step {:>6} | validation loss {:.4f} | perplexity {:.2f} | {} tokens", step, loss, std::exp(loss),
           tokens);
  append(nlohmann::json{{"type", "val"}, {"step", step}, {"loss", loss}, {"tokens", tokens}}.dump());
}

void MetricsLog::masks(int64_t step, int64_t flips, int64_t entries, bool first) {
  nlohmann::json j = {{"type", "masks"}, {"step", step}, {"entries", entries}};
  if (first) {
    log_info("step {:>6} | 2:4 masks computed | {} mask entries", step, entries);
  } else {
    const double rate = entries ? static_cast<double>(flips) / static_cast<double>(entries) : 0.0;
    log_info("step {:>6} | 2:4 masks recomputed | flip rate {:.3e} ({} of {} entries)", step, rate, flips,
             entries);
    j["flips"] = flips;
    j["flip_rate"] = rate;
  }
  append(j.dump());
}

}  // namespace pt
