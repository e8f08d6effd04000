// NCCL communicator for the CUDA backend. Collectives run on a stream of their own, ordered after the
// compute stream's work by an event, so bucketed gradient reduction overlaps the backward pass; wait()
// polls the completion event on the host, checking NCCL's asynchronous error state, until a deadline,
// past which the communicator is aborted (ncclCommAbort) and the wait throws. The communicator is
// non-blocking (config.blocking = 0) so that initialization and group launches can be abandoned too.
// Equal portions use ncclReduceScatter/ncclAllGather in place; unequal ones a group of ncclReduce or
// ncclBroadcast, one per rank.
#include "core/error.h"
#include "distributed/backends.h"
#include "distributed/tcp_bootstrap.h"
#include "ops/cuda/stream.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

namespace pt::dist {
namespace {

void cuda_check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) fail("{} failed: {} ({})", call, cudaGetErrorName(err), cudaGetErrorString(err));
}
#define PT_CUDA(call) cuda_check((call), #call)

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i32:
      return ncclInt32;
    case DType::u8:
      return ncclUint8;
  }
  return ncclUint8;
}

using Clock = Communicator::Clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Waits out ncclInProgress (a non-blocking communicator's answer while it works) until the deadline.
ncclResult_t settle(ncclComm_t comm, ncclResult_t rc, Clock::time_point deadline) {
  while (rc == ncclInProgress) {
    if (Clock::now() > deadline) return ncclInProgress;
    std::this_thread::yield();
    if (ncclCommGetAsyncError(comm, &rc) != ncclSuccess) return ncclInternalError;
  }
  return rc;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int size, int device, ncclComm_t comm, double timeout_s)
      : Communicator(rank, size, Device::cuda, timeout_s), device_(device), comm_(comm) {
    PT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    PT_CUDA(cudaMalloc(&scratch_, kScratchBytes));
  }

  ~NcclCommunicator() override {
    // A clean end finalizes (flushing the communicator's work) within the timeout; anything else aborts.
    bool clean = !aborted_ && std::uncaught_exceptions() == 0;
    if (clean) clean = settle(comm_, ncclCommFinalize(comm_), deadline_after(timeout_s())) == ncclSuccess;
    if (clean)
      ncclCommDestroy(comm_);
    else if (!aborted_)
      ncclCommAbort(comm_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (auto& [id, op] : ops_) cudaEventDestroy(op.done);
    cudaFree(scratch_);
    cudaStreamDestroy(stream_);
  }

  std::string_view backend() const override { return "nccl"; }

 protected:
  void start(const Collective& c) override {
    if (aborted_) fail("{}: the NCCL communicator was aborted after an earlier failure", c.str());
    const cudaStream_t compute = ops::cuda::current_stream();
    cudaEvent_t ready = event();
    PT_CUDA(cudaEventRecord(ready, compute));
    PT_CUDA(cudaStreamWaitEvent(stream_, ready, 0));
    events_.push_back(ready);  // reusable once recorded: the wait above captured its state

    auto* base = static_cast<char*>(c.x.data);
    const ncclDataType_t type = nccl_type(c.x.dtype);
    const auto elem = static_cast<size_t>(dtype_size(c.x.dtype));
    if (c.kind == CollectiveKind::kGatherHost) {  // host values travel through a small device buffer
      if (static_cast<size_t>(c.x.bytes()) > kScratchBytes)
        fail("{}: over {} bytes of host values", c.str(), kScratchBytes);
      PT_CUDA(cudaMemcpyAsync(scratch_, c.x.data, static_cast<size_t>(c.x.bytes()), cudaMemcpyHostToDevice,
                              stream_));
      base = static_cast<char*>(scratch_);
    }
    auto at = [&](int r) { return base + static_cast<size_t>(c.offsets[static_cast<size_t>(r)]) * elem; };
    auto count = [&](int r) { return static_cast<size_t>(c.counts[static_cast<size_t>(r)]); };
    const bool equal = !c.counts.empty() && std::all_of(c.counts.begin(), c.counts.end(),
                                                        [&](int64_t n) { return n == c.counts[0]; });
    const auto n = static_cast<size_t>(c.x.numel());
    const auto deadline = deadline_after(timeout_s());
    check(ncclGroupStart(), c, deadline);
    switch (c.kind) {
      case CollectiveKind::kAllReduce:
        check(ncclAllReduce(base, base, n, type, ncclSum, comm_, stream_), c, deadline);
        break;
      case CollectiveKind::kReduceScatter:
        if (equal) {
          check(ncclReduceScatter(base, at(rank()), count(0), type, ncclSum, comm_, stream_), c, deadline);
        } else {
          for (int r = 0; r < size(); ++r)
            if (count(r) > 0)
              check(ncclReduce(at(r), at(r), count(r), type, ncclSum, r, comm_, stream_), c, deadline);
        }
        break;
      case CollectiveKind::kAllGather:
      case CollectiveKind::kGatherHost:
        if (equal) {
          check(ncclAllGather(at(rank()), base, count(0), type, comm_, stream_), c, deadline);
        } else {
          for (int r = 0; r < size(); ++r)
            if (count(r) > 0)
              check(ncclBroadcast(at(r), at(r), count(r), type, r, comm_, stream_), c, deadline);
        }
        break;
      case CollectiveKind::kBroadcast:
        check(ncclBroadcast(base, base, n, type, c.root, comm_, stream_), c, deadline);
        break;
      case CollectiveKind::kBarrier:  // a one-element sum: complete only when every rank has joined
        check(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_), c, deadline);
        break;
    }
    check(ncclGroupEnd(), c, deadline);
    cudaEvent_t done = event();
    PT_CUDA(cudaEventRecord(done, stream_));
    ops_[c.id] = {done};
  }

  void finish(const Collective& c, Clock::time_point deadline) override {
    const cudaEvent_t done = ops_.at(c.id).done;
    for (;;) {
      const cudaError_t state = cudaEventQuery(done);
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady) cuda_check(state, "cudaEventQuery");
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) abort_with(c, ncclGetErrorString(async));
      if (Clock::now() > deadline)
        abort_with(c,
                   fmt::format("it did not complete within {} s: a rank died or hangs (see the other ranks' "
                               "output; raise the collective timeout if one is just slow)",
                               timeout_s()));
      std::this_thread::yield();
    }
    // Work queued later on the compute stream sees the result (the host has seen it already).
    PT_CUDA(cudaStreamWaitEvent(ops::cuda::current_stream(), done, 0));
    if (c.kind == CollectiveKind::kGatherHost)
      PT_CUDA(cudaMemcpy(c.x.data, scratch_, static_cast<size_t>(c.x.bytes()), cudaMemcpyDeviceToHost));
    events_.push_back(done);
    ops_.erase(c.id);
  }

 private:
  static constexpr size_t kScratchBytes = 1 << 16;

  struct Op {
    cudaEvent_t done;
  };

  cudaEvent_t event() {
    if (!events_.empty()) {
      cudaEvent_t e = events_.back();
      events_.pop_back();
      return e;
    }
    cudaEvent_t e;
    PT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  void check(ncclResult_t rc, const Collective& c, Clock::time_point deadline) {
    rc = settle(comm_, rc, deadline);
    if (rc == ncclInProgress) abort_with(c, "NCCL did not accept it before the timeout");
    if (rc != ncclSuccess) abort_with(c, ncclGetErrorString(rc));
  }

  [[noreturn]] void abort_with(const Collective& c, const std::string& why) {
    const std::string detail = ncclGetLastError(comm_);
    aborted_ = true;
    ncclCommAbort(comm_);
    fail("rank {} of {} (GPU {}): NCCL {} failed: {}{}{}; the communicator is aborted", rank(), size(),
         device_, c.str(), why, detail.empty() ? "" : ": ", detail);
  }

  int device_;
  ncclComm_t comm_;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  bool aborted_ = false;
  std::vector<cudaEvent_t> events_;  // free
  std::map<int64_t, Op> ops_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const LaunchInfo& launch, double timeout_s) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    fail("{}: the nccl backend needs a GPU, and none is visible", launch.str());
  const int device = launch.device_index(devices);
  PT_CUDA(cudaSetDevice(device));
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // no NVLink SHARP multicast unless asked for explicitly

  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (launch.rank == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) fail("ncclGetUniqueId failed: {}", ncclGetErrorString(rc));
  }
  const std::vector<uint8_t> blob = tcp_broadcast_blob(
      launch, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&id), sizeof id), timeout_s);
  if (blob.size() != sizeof id)
    fail(
        "rank {}: rank 0 sent a {}-byte NCCL id, this build expects {}; build every rank from the same "
        "packtrain",
        launch.rank, blob.size(), sizeof id);
  std::memcpy(&id, blob.data(), sizeof id);

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t rc = ncclCommInitRankConfig(&comm, launch.world_size, id, launch.rank, &config);
  if (comm != nullptr) rc = settle(comm, rc, deadline_after(timeout_s));
  if (rc != ncclSuccess) {
    const std::string detail = comm != nullptr ? ncclGetLastError(comm) : "";
    if (comm != nullptr) ncclCommAbort(comm);
    fail("{} (GPU {}): NCCL initialization {}{}{}", launch.str(), device,
         rc == ncclInProgress
             ? fmt::format("did not complete within {} s (a rank is missing or hangs)", timeout_s)
             : fmt::format("failed: {}", ncclGetErrorString(rc)),
         detail.empty() ? "" : ": ", detail);
  }
  return std::make_unique<NcclCommunicator>(launch.rank, launch.world_size, device, comm, timeout_s);
}

}  // namespace pt::dist
