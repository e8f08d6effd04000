#include "core/dir_lock.h"

#include "core/error.h"
#include "core/log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>

namespace pt {

namespace {

constexpr const char* kLockFile = ".packtrain.lock";

struct Holder {
  std::string command, host, started;
  long long pid = 0;

  std::string str() const {
    return fmt::format("packtrain {} (pid {} on host {}, since {})", command, pid, host, started);
  }
};

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

// The holder the lock file records; nullopt when it records none (released, or not written yet).
std::optional<Holder> read_holder(int fd) {
  std::string text;
  char buffer[512];
  for (ssize_t n; (n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(text.size()))) > 0;)
    text.append(buffer, static_cast<size_t>(n));
  if (text.empty()) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(text);
    return Holder{j.at("command").get<std::string>(), j.at("host").get<std::string>(),
                  j.at("started").get<std::string>(), j.at("pid").get<long long>()};
  } catch (const nlohmann::json::exception&) {
    return Holder{"(unreadable record)", "?", "?", 0};
  }
}

bool write_holder(int fd, const Holder& h) {
  const std::string text =
      nlohmann::json{{"command", h.command}, {"host", h.host}, {"pid", h.pid}, {"started", h.started}}
          .dump() +
      "\n";
  return ::ftruncate(fd, 0) == 0 &&
         ::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
}

bool alive_on_this_host(const Holder& h) {
  return h.host == this_host() && h.pid > 0 && (::kill(static_cast<pid_t>(h.pid), 0) == 0 || errno == EPERM);
}

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir, std::string_view command, std::string_view flag)
    : path_((std::filesystem::path(dir) / kLockFile).string()) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot open the lock {}: {}", path_, std::strerror(errno));
  auto release = [&] {
    ::close(fd_);
    fd_ = -1;
  };
  auto refuse = [&](const std::optional<Holder>& holder, std::string_view more) {
    release();
    fail("{} is in use: {} writes to it. Wait for that run to end (or stop it), or give another {}{}", dir,
         holder ? holder->str() : "another packtrain process", flag, more);
  };
  std::optional<Holder> previous;
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
    previous = read_holder(fd_);  // a holder that died: the kernel dropped its lock
  } else if (errno == EWOULDBLOCK) {
    refuse(read_holder(fd_), "");
  } else if (errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS) {
    // No file locks on this filesystem: the record decides.
    previous = read_holder(fd_);
    if (previous && previous->host != this_host())
      refuse(previous, fmt::format(" (this filesystem has no file locks, so a run on another host cannot be "
                                   "checked: delete {} if that run has ended)",
                                   path_));
    if (previous && alive_on_this_host(*previous)) refuse(previous, "");
  } else {
    const int err = errno;
    release();
    fail("cannot lock {}: {}", path_, std::strerror(err));
  }
  if (previous)
    log_warn("{}: taking over the lock of {}, which ended without releasing it", dir, previous->str());
  if (!write_holder(fd_,
                    {std::string(command), this_host(), now_utc(), static_cast<long long>(::getpid())})) {
    const int err = errno;
    release();
    fail("cannot write the lock {}: {}", path_, std::strerror(err));
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ < 0) return;
  // The file stays (removing it would let a run that opened it lock a file no one else sees); empty, it
  // records no holder.
  if (::ftruncate(fd_, 0) != 0) log_warn("cannot clear the lock {}: {}", path_, std::strerror(errno));
  ::close(fd_);
}

}  // namespace pt
