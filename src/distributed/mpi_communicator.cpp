// MPI communicator for the CPU backend. Collectives are MPI's non-blocking ones (MPI_Iallreduce, ...)
// polled with MPI_Test until a deadline: MPI has no timeout of its own, and a blocking call on a dead
// peer waits forever. Past the deadline the rank asks every other rank over a second communicator which
// collective it is in (ranks answer while they poll their own waits), prints the answers, and calls
// MPI_Abort, which ends every process of the job.
#include "core/error.h"
#include "distributed/backends.h"

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <thread>

namespace pt::dist {
namespace {

constexpr int kQueryTag = 1, kReplyTag = 2;

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail("{} failed: {}", call, std::string_view(text, static_cast<size_t>(len)));
}
#define PT_MPI(call) check((call), #call)

// MPI is initialized once per process and finalized at exit, unless a communicator was destroyed by an
// exception: finalizing then could wait on ranks that are stuck in a collective, while exiting unfinalized
// makes mpirun (or srun) end the job at once.
bool g_failed = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !g_failed) MPI_Finalize();
}

void ensure_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  PT_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
  std::atexit(finalize_at_exit);
}

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::bf16:
      return MPI_UINT16_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::u8:
      return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

int to_int(int64_t n, const Collective& c) {
  if (n > INT_MAX)
    fail("{}: {} elements are over MPI's count limit of {}; use smaller buckets", c.str(), n, INT_MAX);
  return static_cast<int>(n);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int rank, int size, MPI_Comm comm, MPI_Comm control, double timeout_s)
      : Communicator(rank, size, Device::cpu, timeout_s), comm_(comm), control_(control) {}

  ~MpiCommunicator() override {
    if (std::uncaught_exceptions() > 0) {
      g_failed = true;  // leave MPI alone: the process exits with the error and the launcher ends the job
      return;
    }
    MPI_Comm_free(&comm_);
    MPI_Comm_free(&control_);
  }

  std::string_view backend() const override { return "mpi"; }

 protected:
  void start(const Collective& c) override {
    Op& op = ops_[c.id];
    void* data = c.x.data;
    const MPI_Datatype type = mpi_type(c.x.dtype);
    switch (c.kind) {
      case CollectiveKind::kAllReduce:
        PT_MPI(MPI_Iallreduce(MPI_IN_PLACE, data, to_int(c.x.numel(), c), type, MPI_SUM, comm_, &op.request));
        break;
      case CollectiveKind::kReduceScatter: {
        // In place, MPI leaves the rank's part at the start of the buffer; finish() moves it to its offset.
        for (int64_t n : c.counts) op.counts.push_back(to_int(n, c));
        PT_MPI(MPI_Ireduce_scatter(MPI_IN_PLACE, data, op.counts.data(), type, MPI_SUM, comm_, &op.request));
        break;
      }
      case CollectiveKind::kAllGather:
      case CollectiveKind::kGatherHost:
        for (size_t r = 0; r < c.counts.size(); ++r) {
          op.counts.push_back(to_int(c.counts[r], c));
          op.displs.push_back(to_int(c.offsets[r], c));
        }
        PT_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, op.counts.data(), op.displs.data(),
                               type, comm_, &op.request));
        break;
      case CollectiveKind::kBroadcast:
        PT_MPI(MPI_Ibcast(data, to_int(c.x.numel(), c), type, c.root, comm_, &op.request));
        break;
      case CollectiveKind::kBarrier:
        PT_MPI(MPI_Ibarrier(comm_, &op.request));
        break;
    }
  }

  void finish(const Collective& c, Clock::time_point deadline) override {
    Op& op = ops_.at(c.id);
    poll_until(op.request, c, deadline);
    if (c.kind == CollectiveKind::kReduceScatter && rank() > 0 && c.counts[rank()] > 0) {
      auto* base = static_cast<char*>(c.x.data);
      const int64_t elem = dtype_size(c.x.dtype);
      std::memmove(base + c.offsets[rank()] * elem, base, static_cast<size_t>(c.counts[rank()] * elem));
    }
    ops_.erase(c.id);
  }

 private:
  struct Op {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<int> counts, displs;  // MPI reads them until the collective completes
  };

  // Spins briefly (small collectives complete in microseconds), then yields the core between polls:
  // ranks may share cores (CI oversubscribes), and MPI progresses only inside MPI calls.
  void poll_until(MPI_Request& request, const Collective& c, Clock::time_point deadline) {
    const auto spin_until = Clock::now() + std::chrono::microseconds(200);
    for (int64_t polls = 0;; ++polls) {
      int done = 0;
      PT_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (done) return;
      if (polls % 64 == 0) {
        answer_queries(c);
        const auto now = Clock::now();
        if (now > deadline) abort_on_timeout(c);
        if (now > spin_until) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  // Another rank timed out and asks where this one is: in collective c.
  void answer_queries(const Collective& c) {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, control_, &flag, &status);
      if (!flag) return;
      int64_t query = 0;
      MPI_Recv(&query, 1, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, control_, MPI_STATUS_IGNORE);
      const int64_t reply[2] = {c.id, static_cast<int64_t>(c.kind)};
      MPI_Send(reply, 2, MPI_INT64_T, status.MPI_SOURCE, kReplyTag, control_);
    }
  }

  [[noreturn]] void abort_on_timeout(const Collective& c) {
    std::string report = fmt::format("packtrain: rank {} of {}: {} did not complete within {} s", rank(),
                                     size(), c.str(), timeout_s());
    // Ask the others where they are; give them a grace period to answer from their own wait loops.
    const int n = size();
    std::vector<int64_t> replies(static_cast<size_t>(2 * n), -1);
    std::vector<MPI_Request> requests;
    std::vector<int> asked;
    for (int r = 0; r < n; ++r) {
      if (r == rank()) continue;
      MPI_Request send, recv;
      MPI_Isend(&c.id, 1, MPI_INT64_T, r, kQueryTag, control_, &send);
      MPI_Irecv(&replies[static_cast<size_t>(2 * r)], 2, MPI_INT64_T, r, kReplyTag, control_, &recv);
      MPI_Request_free(&send);
      requests.push_back(recv);
      asked.push_back(r);
    }
    const double grace_s = std::clamp(timeout_s() / 4, 0.5, 10.0);
    const auto grace_end =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s));
    std::vector<int> answered(requests.size(), 0);
    while (Clock::now() < grace_end) {
      bool all = true;
      for (size_t i = 0; i < requests.size(); ++i) {
        if (!answered[i]) MPI_Test(&requests[i], &answered[i], MPI_STATUS_IGNORE);
        all = all && answered[i];
      }
      if (all) break;
      answer_queries(c);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (size_t i = 0; i < asked.size(); ++i) {
      const int r = asked[i];
      if (!answered[i]) {
        report += fmt::format("\n  rank {}: no answer within {} s (dead, hung, or busy outside collectives)",
                              r, grace_s);
        continue;
      }
      const int64_t id = replies[static_cast<size_t>(2 * r)];
      const auto kind = static_cast<CollectiveKind>(replies[static_cast<size_t>(2 * r + 1)]);
      report += fmt::format("\n  rank {}: waiting in {} #{}{}", r, collective_name(kind), id,
                            id == c.id ? "" : " (out of step: the ranks issued different collectives)");
    }
    report += "\n  aborting every rank (raise the collective timeout if a rank is just slow)\n";
    std::fputs(report.c_str(), stderr);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  }

  MPI_Comm comm_, control_;
  std::map<int64_t, Op> ops_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const LaunchInfo& launch, double timeout_s) {
  if (launch.launcher == Launcher::kEnv)
    fail(
        "the mpi backend needs an MPI launcher (mpirun, or srun with MPI support); a RANK/WORLD_SIZE launch "
        "works with the nccl backend");
  ensure_initialized();
  int rank = 0, size = 0;
  PT_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  PT_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (size != launch.world_size || rank != launch.rank)
    fail(
        "MPI says this is rank {} of {}, but the launch environment says {}; launch with mpirun or srun only",
        rank, size, launch.str());
  MPI_Comm comm, control;
  PT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  PT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &control));
  // Errors come back as return codes, which become pt::Error, instead of MPI's own abort.
  PT_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  PT_MPI(MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN));
  return std::make_unique<MpiCommunicator>(rank, size, comm, control, timeout_s);
}

}  // namespace pt::dist
