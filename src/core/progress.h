// A progress line on stderr with rate and ETA for long work. Redraws at most a few times a second; on a
// non-terminal it prints a line every ~10% so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace pt {

class Progress {
 public:
  // total <= 0: unknown total (no percentage or ETA). unit names what is counted ("MB", "batches").
  Progress(std::string label, double total, std::string unit);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(double done);  // absolute amount done so far
  void finish();             // final line with the total rate

 private:
  void draw(bool final_line);

  std::string label_, unit_;
  double total_, done_ = 0;
  bool tty_, finished_ = false;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace pt
