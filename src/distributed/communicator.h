// Collectives between the ranks of a data-parallel run, on tensor views of one device: MPI for the CPU
// backend (mpi_communicator.cpp), NCCL for CUDA (nccl_communicator.cpp), and a no-op communicator for a
// single process (the default). Collectives are issued in the same order on every rank.
//
// Every collective is non-blocking underneath: start_*() returns a handle at once and the buffer must stay
// untouched until wait(handle); the blocking forms are start + wait. Reductions sum f32 or f64; gathers
// and broadcasts move any dtype. Reduce-scatter and all-gather work IN PLACE on one buffer holding every
// rank's portion back to back (`counts[r]` elements for rank r, equal parts when counts is empty), which
// is how ZeRO-1 shards the flat gradient and parameter buffers.
//
// Failure: a wait that lasts longer than the timeout means a rank died or hangs. MPI then asks every rank
// (over a side channel) where it is, prints which ranks are waiting in which collective and which do not
// answer, and aborts the whole job (MPI_Abort); NCCL aborts its communicator and throws pt::Error naming
// the collective. A rank that throws leaves MPI unfinalized so that mpirun/srun end the other ranks.
//
// Time spent blocked in waits is accumulated for the logs (take_stats()).
#pragma once

#include "core/tensor.h"
#include "distributed/launch.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pt::dist {

enum class Backend { kAuto, kLocal, kMpi, kNccl };
std::string_view backend_name(Backend b);  // "auto", "local", "mpi", "nccl"
Backend parse_backend(std::string_view name);
bool backend_available(Backend b);  // built into this binary (local and auto always are)

struct CommOptions {
  Backend backend = Backend::kAuto;  // auto: local for one process, else nccl on cuda and mpi on cpu
  Device device = Device::cpu;       // where the collectives' tensors live
  double timeout_s = 300;            // longest wait for one collective before the run is aborted
};

struct CommStats {
  double wait_s = 0;        // host time blocked in waits (includes the others' lateness: load imbalance)
  int64_t collectives = 0;  // started
  int64_t bytes = 0;        // this rank's buffer bytes over all started collectives
};

enum class CollectiveKind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kBarrier, kGatherHost };
std::string_view collective_name(CollectiveKind k);

// One started collective, as implementations see it.
struct Collective {
  int64_t id = 0;  // 1, 2, ... in start order, the same on every rank
  CollectiveKind kind = CollectiveKind::kBarrier;
  Tensor x;                     // the buffer (empty for a barrier)
  std::vector<int64_t> counts;  // per rank (reduce-scatter, all-gather), summing to x.numel()
  std::vector<int64_t> offsets;
  int root = 0;             // broadcast
  std::string str() const;  // "all_reduce #12 of f32[1024]@cpu"
};

class Communicator {
 public:
  using Handle = int64_t;
  using Clock = std::chrono::steady_clock;

  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Device device() const { return device_; }
  double timeout_s() const { return timeout_s_; }
  virtual std::string_view backend() const = 0;

  // x summed over ranks, in place (f32 or f64).
  Handle start_all_reduce_sum(const Tensor& x);
  // Rank r's portion x[offset_r, offset_r + counts[r]) ends up holding the sum over ranks of that portion;
  // the rest of x is left unspecified. Empty counts: size() equal parts.
  Handle start_reduce_scatter_sum(const Tensor& x, std::span<const int64_t> counts = {});
  // Every rank's portion is copied from that rank into the same place on all ranks.
  Handle start_all_gather(const Tensor& x, std::span<const int64_t> counts = {});
  void wait(Handle h);
  void wait_all();  // every started collective, in start order
  bool pending() const { return !pending_.empty(); }

  void all_reduce_sum(const Tensor& x) { wait(start_all_reduce_sum(x)); }
  void reduce_scatter_sum(const Tensor& x, std::span<const int64_t> counts = {}) {
    wait(start_reduce_scatter_sum(x, counts));
  }
  void all_gather(const Tensor& x, std::span<const int64_t> counts = {}) {
    wait(start_all_gather(x, counts));
  }
  void broadcast(const Tensor& x, int root);
  void barrier();
  // Small host values (stats, counts): every rank's `mine` back to back in rank order, on every rank.
  std::vector<double> all_gather_host(std::span<const double> mine);
  // Element-wise sums over ranks of small host values, summed in rank order so every rank gets the same.
  std::vector<double> sum_host(std::span<const double> mine);

  // Counters since the last call (or construction), then reset.
  CommStats take_stats();

 protected:
  Communicator(int rank, int size, Device device, double timeout_s);

  // Implementations start the collective (non-blocking) and keep what they need by c.id.
  virtual void start(const Collective& c) = 0;
  // Returns once c is complete; past `deadline` it must fail loudly (abort or throw), never return.
  virtual void finish(const Collective& c, Clock::time_point deadline) = 0;

 private:
  Handle launch(Collective c);
  std::vector<int64_t> portions(const char* op, const Tensor& x, std::span<const int64_t> counts) const;

  int rank_, size_;
  Device device_;
  double timeout_s_;
  int64_t next_id_ = 1;
  std::map<Handle, Collective> pending_;
  CommStats stats_;
};

// The communicator of this process for its launch: a local one for a single process, else the backend
// asked for (auto: nccl on cuda, mpi on cpu). For NCCL, create it before anything is allocated on the GPU:
// it selects this rank's device. Errors say which backend is missing from the build or what the launch
// lacks (MASTER_ADDR for a multi-host env launch, mpirun for the MPI backend).
std::unique_ptr<Communicator> make_communicator(const CommOptions& options, const LaunchInfo& launch);
std::unique_ptr<Communicator> make_communicator(const CommOptions& options);  // detect_launch()

// A world of one: every collective is already complete.
std::unique_ptr<Communicator> make_local_communicator(Device device, double timeout_s = 300);

}  // namespace pt::dist
