// `packtrain train` as a cluster runs it, in a subprocess: SIGTERM, SIGINT or SIGUSR1 at random points
// stop it with exit status 75 and a checkpoint of the step it was in, and rerunning the same command until
// it exits 0 gives the losses and final weights of an uninterrupted run, bit for bit. A second train of
// the same --out fails at once naming the first; once the first is killed, its lock is taken over.
//
// The binary is the packtrain beside this test binary (the build's), or PACKTRAIN_BIN; without one the
// tests skip.
#include "core/file.h"
#include "data/prepare/prepare.h"

#include "test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pt {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kExitStopSignal = 75;

fs::path packtrain_binary() {
  if (const char* path = std::getenv("PACKTRAIN_BIN")) return path;
  return fs::read_symlink("/proc/self/exe").parent_path() / "packtrain";
}

// A child process running args with stdout and stderr appended to log.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string log_path = log.string();
  const pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    // The signals the test sends act as on a fresh login, even where this process inherited them ignored
    // (a shell's background job ignores SIGINT) or a library blocked them in this thread.
    struct sigaction fresh {};
    fresh.sa_handler = SIG_DFL;
    for (int signal : {SIGTERM, SIGINT, SIGUSR1}) ::sigaction(signal, &fresh, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0 || ::dup2(fd, STDERR_FILENO) < 0) ::_exit(126);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Whether the child has not exited yet. WNOWAIT leaves an exited child waitable, so that wait_for still
// reads its status (reaping it here made wait_for wait out its timeout and report "exit 0").
bool running(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

// The child's wait status; a child still running after timeout_s is killed and reported as such.
int wait_for(pid_t pid, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (int status = 0;;) {
    const pid_t waited = ::waitpid(pid, &status, WNOHANG);
    if (waited == pid) return status;
    if (waited < 0) {
      ADD_FAILURE() << "pid " << pid << " cannot be waited for (already reaped?)";
      return -1;
    }
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "pid " << pid << " ran past " << timeout_s << " s";
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Kills a child the test leaves running when it stops early.
struct Reaper {
  pid_t pid;
  ~Reaper() {
    if (::waitpid(pid, nullptr, WNOHANG) != 0) return;  // done and waited for
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

std::string file_text(const fs::path& path) { return fs::exists(path) ? read_file(path.string()) : ""; }

// "step N: loss=... grad_norm=..." of every train record, as printed (so equal means bitwise equal).
std::vector<std::string> printed_steps(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  const auto field = test::printed_field;
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (line.find(R"("type":"train")") != std::string::npos)
      out.push_back("step " + field(line, "step") + ": loss=" + field(line, "loss") +
                    " grad_norm=" + field(line, "grad_norm"));
  return out;
}

class PackedRun : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = packtrain_binary();
    if (!fs::exists(binary_)) GTEST_SKIP() << "no packtrain binary at " << binary_ << " (set PACKTRAIN_BIN)";
    dir_ = test::fresh_temp_dir();
    std::string records;
    for (int i = 0; i < 400; ++i)
      records += "{\"text\": \"the " + std::string(i % 2 ? "cat" : "dog") + " sat on mat " +
                 std::to_string(i % 17) + " and looked at the " + std::to_string(i % 5) + " birds.\"}\n";
    write_file_atomic((dir_ / "records.jsonl").string(), records);
    PrepareOptions o;
    o.inputs = {(dir_ / "records.jsonl").string()};
    o.tokenizer_path = PACKTRAIN_FIXTURES "/prepare/tokenizer.json";
    o.output_dir = (dir_ / "data").string();
    o.max_len = 64;
    o.val_fraction = 0.1;
    o.show_progress = false;
    prepare_dataset(o);
    write_file_atomic((dir_ / "config.json").string(),
                      R"({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2,
      "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 64, "vocab_size": 260})");
  }

  std::vector<std::string> command(const std::string& out, int64_t steps) const {
    return {binary_.string(), "train",
            "--data",         (dir_ / "data").string(),
            "--model",        (dir_ / "config.json").string(),
            "--out",          (dir_ / out).string(),
            "--device",       "cpu",
            "--threads",      "1",
            "--examples",     "8",
            "--steps",        std::to_string(steps),
            "--lr",           "3e-3",
            "--eval-every",   "0",
            "--save-every",   "0"};
  }

  fs::path binary_, dir_;
};

TEST_F(PackedRun, SignalsAtRandomPointsStopWithACheckpointAndTheRunResumesBitForBit) {
  constexpr int64_t kSteps = 100;
  const auto t0 = Clock::now();
  const int ref = wait_for(spawn(command("ref", kSteps), dir_ / "ref.log"), 300);
  ASSERT_EQ(describe(ref), "exit 0") << file_text(dir_ / "ref.log");
  const double run_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto expected = printed_steps(dir_ / "ref");
  ASSERT_EQ(expected.size(), static_cast<size_t>(kSteps));

  std::mt19937 rng(26);
  std::uniform_real_distribution<double> fraction(0, 1);
  // A random point of an invocation: a third of them while the process starts, the others while it
  // trains (from its first logged step to about when it would end, as the reference went).
  const auto signal_at_random_point = [&](pid_t pid, const fs::path& run, int signal) {
    const size_t before = printed_steps(run).size();
    if (rng() % 3 == 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(fraction(rng) * 0.1 * run_s));
    } else {
      const auto deadline = Clock::now() + std::chrono::seconds(120);
      while (printed_steps(run).size() == before && running(pid) && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const double left = static_cast<double>(kSteps - static_cast<int64_t>(before)) / kSteps;
      std::this_thread::sleep_for(std::chrono::duration<double>(fraction(rng) * 0.8 * left * run_s));
    }
    ::kill(pid, signal);
  };
  const int signals[] = {SIGTERM, SIGINT, SIGUSR1};
  int sent = 0, stopped = 0;
  std::string outcomes;  // of every invocation, for the record
  for (int trial = 0; trial < 3; ++trial) {
    const std::string out = "run" + std::to_string(trial);
    const fs::path log = dir_ / (out + ".log");
    // Up to three signals at random points, each to a fresh invocation of the same command; then it
    // runs to the end.
    for (int attempt = 0;; ++attempt) {
      ASSERT_LT(attempt, 10) << file_text(log);
      const pid_t pid = spawn(command(out, kSteps), log);
      const int signal = signals[rng() % 3];
      if (attempt < 3) {
        signal_at_random_point(pid, dir_ / out, signal);
        ++sent;
      }
      const int status = wait_for(pid, 300);
      const std::string what = describe(status);
      outcomes +=
          out + (attempt < 3 ? " signal " + std::to_string(signal) + ": " : " no signal: ") + what + "\n";
      if (what == "exit 0") break;
      if (what == "exit " + std::to_string(kExitStopSignal)) {
        // Stopped after a step: that step is logged, checkpointed and named.
        ++stopped;
        const auto steps = printed_steps(dir_ / out);
        ASSERT_FALSE(steps.empty()) << file_text(log);
        const std::string last = steps.back().substr(5, steps.back().find(':') - 5);
        const std::string latest = file_text(dir_ / out / "checkpoints" / "latest");
        EXPECT_EQ(latest, "step-" + std::string(8 - last.size(), '0') + last + "\n") << file_text(log);
        EXPECT_NE(file_text(log).find("stopped at step " + last + " of " + std::to_string(kSteps)),
                  std::string::npos)
            << file_text(log);
        continue;
      }
      // Killed by the signal before train() installed its handlers (while the process started) or after
      // it restored them (while it exited): either way the next invocation carries on.
      ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == signal) << what << "\n" << file_text(log);
    }
    EXPECT_EQ(printed_steps(dir_ / out), expected) << out << ":\n" << file_text(log);
    EXPECT_TRUE(file_text(dir_ / out / "final/model.safetensors") ==
                file_text(dir_ / "ref/final/model.safetensors"))
        << out << ": the final weights differ";
  }
  std::cout << stopped << " of " << sent << " signals stopped a run with a checkpoint\n";
  EXPECT_GT(stopped, 0) << "no signal landed during training; the test did not test anything:\n" << outcomes;
}

TEST_F(PackedRun, ASecondTrainOfTheSameOutFailsAtOnceAndADeadOnesLockIsTakenOver) {
  const pid_t first = spawn(command("shared", 1'000'000), dir_ / "first.log");
  const Reaper reaper{first};
  // Under way: the lock is taken before the first step.
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (file_text(dir_ / "shared" / "metrics.jsonl").find(R"("type":"train")") == std::string::npos) {
    ASSERT_LT(Clock::now(), deadline) << file_text(dir_ / "first.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto t0 = Clock::now();
  const int second = wait_for(spawn(command("shared", 3), dir_ / "second.log"), 60);
  const double second_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string log = file_text(dir_ / "second.log");
  EXPECT_EQ(describe(second), "exit 1") << log;
  EXPECT_LT(second_s, 30) << "the second writer did not fail at once";
  EXPECT_NE(log.find("is in use: packtrain train (pid " + std::to_string(first) + " on host "),
            std::string::npos)
      << log;

  ::kill(first, SIGKILL);  // it cannot release its lock
  EXPECT_EQ(describe(wait_for(first, 60)), "killed by signal 9");
  const int third = wait_for(spawn(command("shared", 3), dir_ / "third.log"), 300);
  const std::string third_log = file_text(dir_ / "third.log");
  EXPECT_EQ(describe(third), "exit 0") << third_log;
  EXPECT_NE(third_log.find("taking over the lock of packtrain train (pid " + std::to_string(first)),
            std::string::npos)
      << third_log;
}

}  // namespace
}  // namespace pt
