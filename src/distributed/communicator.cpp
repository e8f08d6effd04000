#include "distributed/communicator.h"

#include "core/error.h"
#include "distributed/backends.h"

#include <numeric>

namespace pt::dist {

std::string_view backend_name(Backend b) {
  switch (b) {
    case Backend::kAuto:
      return "auto";
    case Backend::kLocal:
      return "local";
    case Backend::kMpi:
      return "mpi";
    case Backend::kNccl:
      return "nccl";
  }
  return "?";
}

Backend parse_backend(std::string_view name) {
  for (Backend b : {Backend::kAuto, Backend::kLocal, Backend::kMpi, Backend::kNccl})
    if (backend_name(b) == name) return b;
  fail("unknown distributed backend '{}'; expected auto, local, mpi or nccl", name);
}

bool backend_available(Backend b) {
  switch (b) {
    case Backend::kMpi:
#ifdef PACKTRAIN_MPI
      return true;
#else
      return false;
#endif
    case Backend::kNccl:
#ifdef PACKTRAIN_NCCL
      return true;
#else
      return false;
#endif
    default:
      return true;
  }
}

std::string_view collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kBarrier:
      return "barrier";
    case CollectiveKind::kGatherHost:
      return "all_gather of host values";
  }
  return "?";
}

std::string Collective::str() const {
  if (kind == CollectiveKind::kBarrier) return fmt::format("barrier #{}", id);
  return fmt::format("{} #{} of {}", collective_name(kind), id, x.str());
}

Communicator::Communicator(int rank, int size, Device device, double timeout_s)
    : rank_(rank), size_(size), device_(device), timeout_s_(timeout_s) {
  if (size < 1 || rank < 0 || rank >= size)
    fail("communicator: rank {} of {} is not a valid rank", rank, size);
  if (!(timeout_s > 0)) fail("the collective timeout must be positive (got {} s)", timeout_s);
}

std::vector<int64_t> Communicator::portions(const char* op, const Tensor& x,
                                            std::span<const int64_t> counts) const {
  const int64_t n = x.numel();
  if (counts.empty()) {
    if (n % size_ != 0)
      fail("{}: {} has {} elements, which do not split into {} equal parts; pad it or pass counts", op,
           x.str(), n, size_);
    return std::vector<int64_t>(static_cast<size_t>(size_), n / size_);
  }
  if (std::ssize(counts) != size_) fail("{}: {} counts for {} ranks", op, counts.size(), size_);
  int64_t sum = 0;
  for (int64_t c : counts) {
    if (c < 0) fail("{}: negative count {}", op, c);
    sum += c;
  }
  if (sum != n) fail("{}: counts sum to {} but {} has {} elements", op, sum, x.str(), n);
  return {counts.begin(), counts.end()};
}

namespace {

Collective collective(CollectiveKind kind, const Tensor& x = {}, std::vector<int64_t> counts = {},
                      int root = 0) {
  Collective c;
  c.kind = kind, c.x = x, c.counts = std::move(counts), c.root = root;
  return c;
}

}  // namespace

Communicator::Handle Communicator::launch(Collective c) {
  if (c.kind != CollectiveKind::kBarrier) {
    const Device expected = c.kind == CollectiveKind::kGatherHost ? Device::cpu : device_;
    if (c.x.device != expected)
      fail("{}: the tensor {} is on {}, but this {} communicator works on {}", collective_name(c.kind),
           c.x.str(), device_name(c.x.device), backend(), device_name(expected));
    if (c.x.empty() && c.x.numel() > 0) fail("{}: the tensor has no data", collective_name(c.kind));
  }
  if (!c.counts.empty()) {
    c.offsets.resize(c.counts.size());
    std::exclusive_scan(c.counts.begin(), c.counts.end(), c.offsets.begin(), int64_t{0});
  }
  c.id = next_id_++;
  ++stats_.collectives;
  stats_.bytes += c.kind == CollectiveKind::kBarrier ? 0 : c.x.bytes();
  start(c);
  const Handle h = c.id;
  pending_.emplace(h, std::move(c));
  return h;
}

Communicator::Handle Communicator::start_all_reduce_sum(const Tensor& x) {
  if (x.dtype != DType::f32 && x.dtype != DType::f64) fail("all_reduce_sum: {} must be f32 or f64", x.str());
  return launch(collective(CollectiveKind::kAllReduce, x));
}

Communicator::Handle Communicator::start_reduce_scatter_sum(const Tensor& x,
                                                            std::span<const int64_t> counts) {
  if (x.dtype != DType::f32 && x.dtype != DType::f64)
    fail("reduce_scatter_sum: {} must be f32 or f64", x.str());
  return launch(collective(CollectiveKind::kReduceScatter, x, portions("reduce_scatter", x, counts)));
}

Communicator::Handle Communicator::start_all_gather(const Tensor& x, std::span<const int64_t> counts) {
  return launch(collective(CollectiveKind::kAllGather, x, portions("all_gather", x, counts)));
}

void Communicator::wait(Handle h) {
  auto it = pending_.find(h);
  if (it == pending_.end()) fail("wait: collective #{} was not started or was already waited for", h);
  const auto t0 = Clock::now();
  const auto deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  finish(it->second, deadline);
  pending_.erase(it);
  stats_.wait_s += std::chrono::duration<double>(Clock::now() - t0).count();
}

void Communicator::wait_all() {
  while (!pending_.empty()) wait(pending_.begin()->first);
}

void Communicator::broadcast(const Tensor& x, int root) {
  if (root < 0 || root >= size_) fail("broadcast: root {} is not a rank of {}", root, size_);
  wait(launch(collective(CollectiveKind::kBroadcast, x, {}, root)));
}

void Communicator::barrier() { wait(launch(collective(CollectiveKind::kBarrier))); }

std::vector<double> Communicator::all_gather_host(std::span<const double> mine) {
  const auto k = static_cast<int64_t>(mine.size());
  std::vector<double> all(static_cast<size_t>(k * size_));
  std::copy(mine.begin(), mine.end(), all.begin() + k * rank_);
  if (k == 0) return all;
  Tensor x = Tensor::of(all.data(), {k * size_});
  wait(launch(collective(CollectiveKind::kGatherHost, x, portions("all_gather_host", x, {}))));
  return all;
}

std::vector<double> Communicator::sum_host(std::span<const double> mine) {
  const std::vector<double> all = all_gather_host(mine);
  std::vector<double> sum(mine.size(), 0.0);
  for (int r = 0; r < size_; ++r)
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += all[static_cast<size_t>(r) * sum.size() + i];
  return sum;
}

CommStats Communicator::take_stats() { return std::exchange(stats_, CommStats{}); }

namespace {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(Device device, double timeout_s) : Communicator(0, 1, device, timeout_s) {}
  std::string_view backend() const override { return "local"; }

 protected:
  // In place with one rank, every collective is the identity.
  void start(const Collective&) override {}
  void finish(const Collective&, Clock::time_point) override {}
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator(Device device, double timeout_s) {
  return std::make_unique<LocalCommunicator>(device, timeout_s);
}

std::unique_ptr<Communicator> make_communicator(const CommOptions& o, const LaunchInfo& launch) {
  Backend b = o.backend;
  if (b == Backend::kAuto)
    b = launch.world_size == 1 ? Backend::kLocal : o.device == Device::cuda ? Backend::kNccl : Backend::kMpi;
  if (b == Backend::kLocal) {
    if (launch.world_size != 1)
      fail("the local backend runs one process, but this is {}; use --dist-backend auto, mpi or nccl",
           launch.str());
    return make_local_communicator(o.device, o.timeout_s);
  }
  if (b == Backend::kMpi) {
    if (o.device != Device::cpu)
      fail("the mpi backend moves cpu tensors; train on the cpu or use the nccl backend for cuda");
#ifdef PACKTRAIN_MPI
    return make_mpi_communicator(launch, o.timeout_s);
#else
    fail(
        "this build has no MPI (install libopenmpi-dev and rebuild: scripts/setup.sh does), so {} cannot "
        "use the mpi backend",
        launch.str());
#endif
  }
  if (o.device != Device::cuda)
    fail("the nccl backend moves cuda tensors; use --device cuda or the mpi backend");
#ifdef PACKTRAIN_NCCL
  return make_nccl_communicator(launch, o.timeout_s);
#else
  fail(
      "this build has no NCCL (it is looked for with the CUDA toolkit and in a torch venv's nvidia/nccl), so "
      "{} cannot use the nccl backend",
      launch.str());
#endif
}

std::unique_ptr<Communicator> make_communicator(const CommOptions& options) {
  return make_communicator(options, detect_launch());
}

}  // namespace pt::dist
