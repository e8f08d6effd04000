// Which rank this process is, from each launcher's environment variables.
#include "distributed/launch.h"

#include "core/error.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace pt::dist {
namespace {

LaunchInfo launch_with(const std::map<std::string, std::string>& env) {
  return detect_launch([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(Launch, SingleProcessByDefault) {
  const LaunchInfo l = launch_with({});
  EXPECT_EQ(l.launcher, Launcher::kNone);
  EXPECT_EQ(l.rank, 0);
  EXPECT_EQ(l.world_size, 1);
  EXPECT_EQ(l.master_port, 29500);
  EXPECT_EQ(l.device_index(8), 0);
}

TEST(Launch, Mpirun) {
  const LaunchInfo l = launch_with(
      {{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(l.launcher, Launcher::kMpirun);
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.world_size, 8);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.device_index(4), 1);
}

TEST(Launch, SrunStepButNotTheBatchScript) {
  const LaunchInfo l = launch_with(
      {{"SLURM_PROCID", "3"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_LOCALID", "3"}, {"SLURM_NTASKS", "4"}});
  EXPECT_EQ(l.launcher, Launcher::kSrun);
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.world_size, 4);
  // Inside an sbatch script (no step) the allocation's task count does not make this process a rank.
  EXPECT_EQ(launch_with({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}).launcher, Launcher::kNone);
}

TEST(Launch, ExplicitEnvironmentWinsOverLaunchers) {
  const LaunchInfo l = launch_with({{"RANK", "2"},
                                    {"WORLD_SIZE", "3"},
                                    {"MASTER_ADDR", "node7"},
                                    {"MASTER_PORT", "1234"},
                                    {"OMPI_COMM_WORLD_RANK", "0"},
                                    {"OMPI_COMM_WORLD_SIZE", "1"}});
  EXPECT_EQ(l.launcher, Launcher::kEnv);
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.world_size, 3);
  EXPECT_EQ(l.local_rank, -1);
  EXPECT_EQ(l.device_index(2), 0);  // no LOCAL_RANK: the global rank modulo the GPUs
  EXPECT_EQ(l.master_addr, "node7");
  EXPECT_EQ(l.master_port, 1234);
  EXPECT_NE(l.str().find("rank 2 of 3"), std::string::npos);
}

TEST(Launch, BadValuesNameTheVariable) {
  auto message = [](const std::map<std::string, std::string>& env) {
    try {
      launch_with(env);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK=\"x\" is not an integer"),
            std::string::npos);
  EXPECT_NE(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("outside [0, 2)"), std::string::npos);
  EXPECT_NE(message({{"RANK", "0"}}).find("set both RANK and WORLD_SIZE"), std::string::npos);
  EXPECT_NE(message({{"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000"), std::string::npos);
}

}  // namespace
}  // namespace pt::dist
