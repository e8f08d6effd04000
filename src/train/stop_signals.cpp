#include "train/stop_signals.h"

#include "core/error.h"

#include <unistd.h>

#include <array>
#include <csignal>

namespace pt {

namespace {

constexpr std::array<int, 3> kStopSignals = {SIGTERM, SIGINT, SIGUSR1};

volatile std::sig_atomic_t g_received = 0;
bool g_installed = false;
std::array<struct sigaction, kStopSignals.size()> g_previous{};
std::array<bool, kStopSignals.size()> g_replaced{};
sigset_t g_previous_mask;

template <size_t N>
void say(const char (&message)[N]) {
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, message, N - 1);  // async-signal-safe
}

extern "C" void on_stop_signal(int signal) {
  if (g_received != 0) return;  // said already (a scheduler may signal every process of a job twice)
  g_received = signal;
  if (signal == SIGINT)
    say("\npacktrain: SIGINT: stopping after this step with a checkpoint (Ctrl-C again quits at once)\n");
  else if (signal == SIGTERM)
    say("\npacktrain: SIGTERM: stopping after this step with a checkpoint\n");
  else
    say("\npacktrain: SIGUSR1: stopping after this step with a checkpoint\n");
}

}  // namespace

StopSignals::StopSignals() {
  PT_ASSERT(!g_installed);
  g_installed = true;
  g_received = 0;
  for (size_t i = 0; i < kStopSignals.size(); ++i) {
    // A signal ignored at start stays ignored, as a shell's background job ignores SIGINT.
    ::sigaction(kStopSignals[i], nullptr, &g_previous[i]);
    g_replaced[i] = g_previous[i].sa_handler != SIG_IGN;
    if (!g_replaced[i]) continue;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    // Interrupted system calls resume, so no read or write elsewhere sees EINTR.
    action.sa_flags = SA_RESTART | (kStopSignals[i] == SIGINT ? static_cast<int>(SA_RESETHAND) : 0);
    ::sigaction(kStopSignals[i], &action, nullptr);
  }
  // Blocked in every thread (a launcher's mask is inherited), a signal would wait forever: this thread
  // takes them.
  sigset_t stop;
  sigemptyset(&stop);
  for (int signal : kStopSignals) sigaddset(&stop, signal);
  ::pthread_sigmask(SIG_UNBLOCK, &stop, &g_previous_mask);
}

StopSignals::~StopSignals() {
  ::pthread_sigmask(SIG_SETMASK, &g_previous_mask, nullptr);
  for (size_t i = 0; i < kStopSignals.size(); ++i)
    if (g_replaced[i]) ::sigaction(kStopSignals[i], &g_previous[i], nullptr);
  g_installed = false;
}

int StopSignals::received() const { return g_received; }

std::string_view signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "a signal";
  }
}

}  // namespace pt
