// One writer per output directory: `train` locks its run directory and `prepare` its dataset directory,
// so that a second command given the same directory fails at once, naming the holder, instead of
// interleaving metrics and overwriting checkpoints.
//
// The lock is flock(2) on DIR/.packtrain.lock, which records the holder (pid, host, start time, command)
// for the message. The kernel drops the lock when its process dies however it dies, so a lock left by a
// crashed or killed run is simply taken over (with a note naming the run that left it). On a filesystem
// without flock (some Lustre mounts) the record alone decides: a holder on this host whose pid is gone is
// taken over; one on another host is refused, with the file to delete if it is stale.
#pragma once

#include <string>
#include <string_view>

namespace pt {

class DirectoryLock {
 public:
  // Takes the lock of dir (which must exist) for `command` ("train", "prepare"), or throws pt::Error naming
  // the holder; `flag` is the option that named the directory, for the advice ("--out").
  DirectoryLock(const std::string& dir, std::string_view command, std::string_view flag);
  ~DirectoryLock();  // clears the record and releases the lock
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace pt
