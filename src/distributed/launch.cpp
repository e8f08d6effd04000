#include "distributed/launch.h"

#include "core/error.h"

#include <charconv>
#include <cstdlib>

namespace pt::dist {
namespace {

// The value of an integer variable, or `fallback` when unset; anything but a whole number is an error.
int int_var(const EnvLookup& getenv, const char* name, int fallback) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  std::string_view s(text);
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size())
    fail("environment variable {}=\"{}\" is not an integer; unset it or give a whole number", name, s);
  return value;
}

bool has(const EnvLookup& getenv, const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0';
}

}  // namespace

std::string_view launcher_name(Launcher l) {
  switch (l) {
    case Launcher::kNone:
      return "single process";
    case Launcher::kMpirun:
      return "mpirun";
    case Launcher::kSrun:
      return "srun";
    case Launcher::kEnv:
      return "RANK/WORLD_SIZE";
  }
  return "?";
}

int LaunchInfo::device_index(int devices) const {
  if (devices <= 0) return 0;
  return (local_rank >= 0 ? local_rank : rank) % devices;
}

std::string LaunchInfo::str() const {
  return fmt::format("rank {} of {} (local {}, {})", rank, world_size, local_rank, launcher_name(launcher));
}

LaunchInfo detect_launch(const EnvLookup& getenv) {
  LaunchInfo info;
  const char *rank_var = nullptr, *size_var = nullptr, *local_var = nullptr;
  if (has(getenv, "RANK") || has(getenv, "WORLD_SIZE")) {
    if (!has(getenv, "RANK") || !has(getenv, "WORLD_SIZE"))
      fail("set both RANK and WORLD_SIZE for a multi-process launch (only {} is set)",
           has(getenv, "RANK") ? "RANK" : "WORLD_SIZE");
    info.launcher = Launcher::kEnv, rank_var = "RANK", size_var = "WORLD_SIZE", local_var = "LOCAL_RANK";
  } else if (has(getenv, "OMPI_COMM_WORLD_SIZE")) {
    info.launcher = Launcher::kMpirun, rank_var = "OMPI_COMM_WORLD_RANK", size_var = "OMPI_COMM_WORLD_SIZE";
    local_var = "OMPI_COMM_WORLD_LOCAL_RANK";
  } else if (has(getenv, "PMI_SIZE")) {
    info.launcher = Launcher::kMpirun, rank_var = "PMI_RANK", size_var = "PMI_SIZE",
    local_var = "MPI_LOCALRANKID";
  } else if (has(getenv, "SLURM_STEP_NUM_TASKS")) {
    // SLURM_NTASKS is also set inside an sbatch script, which is one process; a step's count is not.
    info.launcher = Launcher::kSrun, rank_var = "SLURM_PROCID", size_var = "SLURM_STEP_NUM_TASKS";
    local_var = "SLURM_LOCALID";
  }
  if (info.launcher != Launcher::kNone) {
    info.world_size = int_var(getenv, size_var, 1);
    info.rank = int_var(getenv, rank_var, 0);
    info.local_rank = int_var(getenv, local_var, -1);
    if (info.world_size < 1) fail("{}={} must be at least 1", size_var, info.world_size);
    if (info.rank < 0 || info.rank >= info.world_size)
      fail("{}={} is outside [0, {}) given by {}", rank_var, info.rank, info.world_size, size_var);
  }
  if (const char* addr = getenv("MASTER_ADDR")) info.master_addr = addr;
  info.master_port = int_var(getenv, "MASTER_PORT", info.master_port);
  if (info.master_port < 1 || info.master_port > 65535)
    fail("MASTER_PORT={} is not a TCP port (1..65535)", info.master_port);
  return info;
}

LaunchInfo detect_launch() {
  return detect_launch([](const char* name) { return std::getenv(name); });
}

}  // namespace pt::dist
