// A progress line with rate and ETA for long work. On a terminal it redraws in place at most a few times a
// second; written to a file (a batch job's log) it prints a plain line at most every
// PACKTRAIN_PROGRESS_EVERY seconds (default 30) and the final one, so logs stay short.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace pt {

struct ProgressOutput {
  std::FILE* stream = stderr;
  bool terminal = false;     // redraw one line in place
  double line_every_s = 30;  // not a terminal: the least time between two lines
  // stderr, whether it is a terminal, and PACKTRAIN_PROGRESS_EVERY (seconds; 0 prints every update).
  static ProgressOutput standard();
};

class Progress {
 public:
  // total <= 0: unknown total (no percentage or ETA). unit names what is counted ("MB", "batches").
  Progress(std::string label, double total, std::string unit,
           ProgressOutput output = ProgressOutput::standard());
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(double done);  // absolute amount done so far
  void finish();             // final line with the total rate

 private:
  void draw(bool final_line);

  std::string label_, unit_;
  double total_, done_ = 0;
  ProgressOutput out_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace pt
