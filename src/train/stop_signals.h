// Preemption: SIGTERM (schedulers, kill), SIGINT (Ctrl-C) and SIGUSR1 (Slurm's --signal=B:USR1@SECONDS;
// mpirun forwards it to every rank, whereas its SIGTERM is followed by SIGKILL within seconds) ask a
// training run to stop. The handler only records the signal and says so on stderr; the trainer finishes
// the step in flight, every rank agrees to stop after it, a checkpoint is written, and the same command
// resumes bit for bit. A second Ctrl-C quits at once: the first resets SIGINT to its default. A signal
// ignored when the run starts (a shell's background job ignores SIGINT) stays ignored.
#pragma once

#include <string_view>

namespace pt {

class StopSignals {
 public:
  StopSignals();   // installs the handlers (one instance at a time)
  ~StopSignals();  // restores the handlers found at construction
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first stop signal received since construction, or 0.
  int received() const;
};

std::string_view signal_name(int signal);  // "SIGTERM", "SIGINT", "SIGUSR1"

}  // namespace pt
