// One writer per directory: a second lock fails naming the holder, in this process and from another
// one; a lock whose holder was killed is taken over with a note naming it; a released lock records no
// holder.
#include "core/dir_lock.h"
#include "core/error.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

namespace pt {
namespace {

std::string host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// The message of the error a lock attempt throws ("" when it succeeds).
std::string lock_error(const std::string& dir) {
  try {
    const DirectoryLock second(dir, "train", "--out");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DirectoryLock, ASecondWriterFailsNamingTheHolder) {
  const auto dir = test::fresh_temp_dir().string();
  {
    const DirectoryLock first(dir, "prepare", "--output");
    const std::string m = lock_error(dir);
    EXPECT_NE(m.find(dir + " is in use: packtrain prepare (pid " + std::to_string(::getpid()) + " on host " +
                     host() + ", since "),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("UTC)"), std::string::npos) << m;
    EXPECT_NE(m.find("or give another --out"), std::string::npos) << m;
  }
  // Released: the next writer takes it without a note about a previous holder.
  testing::internal::CaptureStderr();
  EXPECT_EQ(lock_error(dir), "");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(DirectoryLock, AnotherProcessIsRefusedUntilItDiesAndItsLockIsTakenOver) {
  const auto dir = test::fresh_temp_dir().string();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds the lock until killed
    ::close(ready[0]);
    try {
      const DirectoryLock held(dir, "train", "--out");
      const char ok = 1;
      if (::write(ready[1], &ok, 1) != 1) ::_exit(2);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(1);
    }
  }
  ::close(ready[1]);
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1) << "the child could not take the lock";
  ::close(ready[0]);
  const std::string holder = "packtrain train (pid " + std::to_string(child) + " on host " + host();
  const std::string m = lock_error(dir);
  EXPECT_NE(m.find("is in use: " + holder), std::string::npos) << m;

  ::kill(child, SIGKILL);  // no chance to release: the kernel drops its flock, its record stays
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  testing::internal::CaptureStderr();
  EXPECT_EQ(lock_error(dir), "");
  const std::string note = testing::internal::GetCapturedStderr();
  EXPECT_NE(note.find("taking over the lock of " + holder), std::string::npos) << note;
  EXPECT_NE(note.find("which ended without releasing it"), std::string::npos) << note;
}

TEST(DirectoryLock, AMissingDirectoryIsAnErrorNamingTheLockFile) {
  const auto dir = (test::fresh_temp_dir() / "missing").string();
  const std::string m = lock_error(dir);
  EXPECT_NE(m.find("cannot open the lock " + dir + "/.packtrain.lock"), std::string::npos) << m;
}

}  // namespace
}  // namespace pt
