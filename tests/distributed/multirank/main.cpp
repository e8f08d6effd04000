// The multi-rank test binary: every rank of a job runs it, and the tests issue the same collectives in the
// same order on every rank. Runs:
//   mpirun -np 3 packtrain_dist_tests --backend mpi                  (cpu; CTest runs -np 2 and -np 3)
//   for r in 0 1; do RANK=$r WORLD_SIZE=2 MASTER_PORT=29511 packtrain_dist_tests --backend nccl & done; wait
//                                                                    (one GPU per rank)
//   ... --hang-rank R: rank R stops taking part in collectives; the others must fail within the 1 s
//   timeout, naming it (MPI) or the collective (NCCL), instead of hanging. --exit-rank R: rank R exits;
//   the job must end (the launcher ends it, or the timeout does).
// Only rank 0 prints gtest's progress; failures print on every rank with the rank's number; the exit
// status is non-zero on every rank when any rank failed.
#include "distributed/communicator.h"
#include "distributed/multirank/dist_env.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

namespace pt::dist::test {
namespace {

std::unique_ptr<Communicator> g_comm;

// On ranks other than 0: only failed assertions, prefixed with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "rank %d: %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

// One rank hangs (sleeps) or dies (exits) between two collectives.
int failure_demo(int failing_rank, bool die) {
  Communicator& c = comm();
  Buffer<float> x(std::vector<float>(16, 1.0f));
  c.all_reduce_sum(x.t());  // everybody is up
  if (c.rank() == failing_rank) {
    std::fprintf(stderr, "rank %d: %s on purpose\n", c.rank(),
                 die ? "exiting" : "hanging outside collectives");
    if (die) std::_Exit(3);
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 0;
  }
  c.all_reduce_sum(x.t());  // never completes: must fail within the timeout
  std::fprintf(stderr, "rank %d: the collective completed without rank %d\n", c.rank(), failing_rank);
  return 1;
}

}  // namespace

Communicator& comm() { return *g_comm; }

}  // namespace pt::dist::test

int main(int argc, char** argv) {
  using namespace pt::dist;
  ::testing::InitGoogleTest(&argc, argv);
  Backend backend = backend_available(Backend::kMpi) ? Backend::kMpi : Backend::kNccl;
  int failing_rank = -1;
  bool die = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
      backend = parse_backend(argv[++i]);
    else if (std::strcmp(argv[i], "--hang-rank") == 0 && i + 1 < argc)
      failing_rank = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--exit-rank") == 0 && i + 1 < argc)
      failing_rank = std::atoi(argv[++i]), die = true;
    else {
      std::fprintf(stderr, "usage: %s [gtest flags] [--backend mpi|nccl] [--hang-rank R | --exit-rank R]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    CommOptions o;
    o.backend = backend;
    o.device = backend == Backend::kNccl ? pt::Device::cuda : pt::Device::cpu;
    o.timeout_s = failing_rank >= 0 ? 1.0 : 60.0;
    test::g_comm = make_communicator(o);
    if (failing_rank >= 0) return test::failure_demo(failing_rank, die);
    Communicator& c = test::comm();
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (c.rank() != 0) {
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new test::FailurePrinter(c.rank()));
    }
    const int failed = RUN_ALL_TESTS() != 0;
    const double any[1] = {static_cast<double>(failed)};
    const double failures = c.sum_host(any)[0];
    if (c.rank() == 0)
      std::fprintf(stderr, "%s: %d ranks, %g failed\n", failures > 0 ? "FAILED" : "PASSED", c.size(),
                   failures);
    test::g_comm.reset();  // before MPI is finalized at exit
    return failures > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
