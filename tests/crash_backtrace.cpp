// A test that crashes (a segmentation fault in a kernel launcher, a library, an abort) prints the stack it
// died on before the process ends, so a failure on a remote GPU machine names its place. Frames print as
// binary(+offset); `addr2line -e packtrain_tests -f -C OFFSET` resolves them against the same build.
#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <initializer_list>

namespace {

void print_stack(int signal) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char header[] = "\n*** fatal signal; stack (innermost first):\n";
  (void)!write(STDERR_FILENO, header, sizeof header - 1);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

const bool installed = [] {
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(s, print_stack);
  return true;
}();

}  // namespace
