#include "core/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace pt {

namespace {
std::string format_duration(double seconds) {
  auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}
}  // namespace

Progress::Progress(std::string label, double total, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::update(double done) {
  done_ = done;
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_draw_ < std::chrono::milliseconds(200)) return;
    last_draw_ = now;
    draw(false);
  } else if (total_ > 0) {
    int decile = static_cast<int>(10 * done_ / total_);
    if (decile > last_decile_ && decile < 10) {
      last_decile_ = decile;
      draw(false);
    }
  }
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
  if (tty_) {
    fmt::print(stderr, "\r\033[K{}{}", line, final_line ? "\n" : "");
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  std::fflush(stderr);
}

}  // namespace pt
