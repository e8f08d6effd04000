#include "core/progress.h"

#include "core/log.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace pt {

namespace {
constexpr double kDefaultLineEverySeconds = 30;

double line_every_from_environment() {
  const char* value = std::getenv("PACKTRAIN_PROGRESS_EVERY");
  if (!value) return kDefaultLineEverySeconds;
  char* end = nullptr;
  const double s = std::strtod(value, &end);
  if (end == value || *end != '\0' || !(s >= 0)) {
    log_warn("PACKTRAIN_PROGRESS_EVERY must be seconds, 0 or more (got \"{}\"); using {:g}", value,
             kDefaultLineEverySeconds);
    return kDefaultLineEverySeconds;
  }
  return s;
}

std::string format_duration(double seconds) {
  auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}
}  // namespace

ProgressOutput ProgressOutput::standard() {
  static const double line_every_s = line_every_from_environment();  // read (and warned about) once
  return {stderr, isatty(STDERR_FILENO) != 0, line_every_s};
}

Progress::Progress(std::string label, double total, std::string unit, ProgressOutput output)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      out_(output),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::update(double done) {
  done_ = done;
  const auto now = std::chrono::steady_clock::now();
  const std::chrono::duration<double> least(out_.terminal ? 0.2 : out_.line_every_s);
  if (now - last_draw_ < least) return;
  last_draw_ = now;
  draw(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void Progress::draw(bool final_line) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = elapsed > 0 ? done_ / elapsed : 0;
  std::string line;
  if (total_ > 0) {
    double frac = std::min(1.0, done_ / total_);
    int filled = static_cast<int>(frac * 24);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(24 - filled), '.');
    line = fmt::format("{} [{}] {:5.1f}% {:.1f}/{:.1f} {} {:.1f} {}/s", label_, bar, 100 * frac, done_,
                       total_, unit_, rate, unit_);
    if (!final_line && rate > 0) line += " ETA " + format_duration((total_ - done_) / rate);
  } else {
    line = fmt::format("{} {:.1f} {} {:.1f} {}/s", label_, done_, unit_, rate, unit_);
  }
  if (final_line) line += " in " + format_duration(elapsed);
  // Best effort, as logging: a line that cannot be written (a full disk) is dropped.
  if (out_.terminal)
    std::fprintf(out_.stream, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  else
    std::fprintf(out_.stream, "%s\n", line.c_str());
  std::fflush(out_.stream);
}

}  // namespace pt
