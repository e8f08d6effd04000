// How this process was started and which rank it is: by mpirun (OpenMPI's OMPI_COMM_WORLD_*, or an MPICH
// Hydra's PMI_*), by srun (SLURM_PROCID within a step), by hand or torchrun-style (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT), or plainly as one process. Explicit RANK/WORLD_SIZE win over a
// launcher's variables, as in torch.distributed.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace pt::dist {

enum class Launcher { kNone, kMpirun, kSrun, kEnv };

std::string_view launcher_name(Launcher l);  // "single process", "mpirun", "srun", "RANK/WORLD_SIZE"

struct LaunchInfo {
  Launcher launcher = Launcher::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = -1;  // rank among the processes of this host; -1 when the launcher does not say
  // Where rank 0 serves the NCCL unique id (env launches); empty when MASTER_ADDR is unset.
  std::string master_addr;
  int master_port = 29500;  // torch.distributed's default

  // The GPU this rank uses out of `devices` visible ones: the local rank, else the global rank, modulo.
  int device_index(int devices) const;
  std::string str() const;  // "rank 1 of 4 (local 1, srun)"
};

// Reads the launch from the environment; `getenv` is injectable for tests. Malformed or inconsistent
// values (RANK=x, RANK >= WORLD_SIZE, MASTER_PORT out of range) throw pt::Error naming the variable.
using EnvLookup = std::function<const char*(const char*)>;
LaunchInfo detect_launch(const EnvLookup& getenv);
LaunchInfo detect_launch();

}  // namespace pt::dist
