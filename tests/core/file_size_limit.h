// A full disk, simulated: RLIMIT_FSIZE caps the size of every file this process writes, and with SIGXFSZ
// ignored a write past the cap fails with EFBIG (as a full disk fails with ENOSPC) instead of killing the
// process. Lowering the soft limit needs no privilege, and it is restored on destruction.
#pragma once

#include <sys/resource.h>

#include <csignal>
#include <cstdint>

namespace pt::test {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &previous_);
    rlimit limited = previous_;
    limited.rlim_cur = static_cast<rlim_t>(bytes);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, &previous_action_);
    ::setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &previous_);
    ::sigaction(SIGXFSZ, &previous_action_, nullptr);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit previous_{};
  struct sigaction previous_action_ {};
};

}  // namespace pt::test
