#include "distributed/data_parallel.h"

#include "core/device.h"
#include "core/error.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/grad_norm.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <algorithm>
#include <cmath>

namespace pt::dist {
namespace {

// The clip of ZeRO-1 runs on pieces of a distributed vector, so it uses the backends' halves of
// ops::clip_grad_norm (sum of squares, scale) with a sum over ranks in between.
double sum_of_squares(std::span<const Tensor> pieces, Device device) {
#ifdef PACKTRAIN_CUDA
  if (device == Device::cuda) return pieces.empty() ? 0.0 : ops::cuda::sum_of_squares(pieces);
#endif
  PT_ASSERT(device == Device::cpu);
  double sum = 0;
  for (const Tensor& t : pieces) sum += ops::cpu::sum_of_squares(t);
  return sum;
}

void scale(std::span<const Tensor> pieces, Device device, double factor) {
#ifdef PACKTRAIN_CUDA
  if (device == Device::cuda) {
    if (!pieces.empty()) ops::cuda::scale(pieces, factor);
    return;
  }
#endif
  PT_ASSERT(device == Device::cpu);
  for (const Tensor& t : pieces) ops::cpu::scale(t, factor);
}

}  // namespace

int64_t DataParallelOptimizer::flat_size(int64_t total, int world_size, bool zero1) {
  return zero1 ? make_shard_layout(total, world_size).padded_total() : total;
}

namespace {

// The caller's flat buffers, checked before anything (the reducer) is built on them.
const Tensor& checked(const char* what, const Tensor& t, int64_t n, Device device) {
  if (t.dtype != DType::f32 || t.device != device || t.numel() != n || t.empty())
    fail("data-parallel optimizer: the {} must be f32[{}] on {} (flat_size elements), got {}", what, n,
         device_name(device), t.str());
  return t;
}

}  // namespace

DataParallelOptimizer::DataParallelOptimizer(Communicator& comm, const ParameterLayout& layout,
                                             const Tensor& params, const Tensor& grads,
                                             const DataParallelOptions& options)
    : comm_(comm),
      layout_(layout),
      zero1_(options.zero1),
      shards_(make_shard_layout(layout.total(), comm.size())),
      params_(checked("parameters", params, flat_size(layout.total(), comm.size(), zero1_), comm.device())),
      grads_(checked("gradients", grads, flat_size(layout.total(), comm.size(), zero1_), comm.device())),
      moments_(comm.device()),
      reducer_(comm, grads, make_buckets(layout.params(), std::max<int64_t>(1, options.bucket_bytes / 4)),
               options.zero1 ? GradientReducer::Mode::kReduceScatter : GradientReducer::Mode::kAllReduce,
               shards_) {
  begin_ = zero1_ ? shards_.begin(comm.rank()) : 0;
  end_ = zero1_ ? begin_ + shards_.real_count(comm.rank()) : layout.total();
  const int64_t moments = zero1_ ? shards_.shard : layout.total();
  const int hm = moments_.reserve(DType::f32, {moments}), hv = moments_.reserve(DType::f32, {moments});
  moments_.allocate();
  m_ = moments_.view(hm), v_ = moments_.view(hv);
  adamw_ = adamw_range(layout.params(), begin_, end_, params_, grads_, m_, v_);
  for (const auto& a : adamw_) owned_grads_.push_back(a.grad);
}

double DataParallelOptimizer::clip_grad_norm(double max_norm) {
  if (!zero1_) return ops::clip_grad_norm(owned_grads_, max_norm);  // every rank holds every summed gradient
  if (!(max_norm > 0)) fail("clip_grad_norm: max_norm must be > 0, got {}", max_norm);
  const double local = sum_of_squares(owned_grads_, comm_.device());
  const double norm = std::sqrt(comm_.sum_host(std::span<const double>(&local, 1))[0]);
  const double factor = max_norm / (norm + 1e-6);
  if (factor < 1) scale(owned_grads_, comm_.device(), factor);
  return norm;
}

void DataParallelOptimizer::step(const ops::AdamWConfig& config, int64_t step) {
  ops::adamw_step(adamw_, config, step);
  if (zero1_) comm_.all_gather(params_);
}

std::vector<float> DataParallelOptimizer::to_host(const Tensor& t, int64_t offset, int64_t n) const {
  std::vector<float> out(static_cast<size_t>(n));
  copy_bytes(out.data(), false, t.ptr<float>() + offset, t.device == Device::cuda,
             out.size() * sizeof(float));
  return out;
}

void DataParallelOptimizer::from_host(const Tensor& t, int64_t offset, std::span<const float> values) const {
  PT_ASSERT(offset + std::ssize(values) <= t.numel());
  copy_bytes(t.ptr<float>() + offset, t.device == Device::cuda, values.data(), false,
             values.size() * sizeof(float));
}

FullState DataParallelOptimizer::gather_state() {
  FullState s;
  s.params = to_host(params_, 0, layout_.total());
  if (!zero1_) {
    s.m = to_host(m_, 0, layout_.total());
    s.v = to_host(v_, 0, layout_.total());
    return s;
  }
  const bool gpu = comm_.device() == Device::cuda;
  for (auto [moment, out] : {std::pair{&m_, &s.m}, {&v_, &s.v}}) {
    copy_bytes(grads_.ptr<float>() + begin_, gpu, moment->data, gpu, static_cast<size_t>(moment->bytes()));
    comm_.all_gather(grads_);
    *out = to_host(grads_, 0, layout_.total());
  }
  return s;
}

void DataParallelOptimizer::load_state(std::span<const float> params, std::span<const float> m,
                                       std::span<const float> v) {
  const int64_t total = layout_.total();
  for (auto [what, x] : {std::pair{"parameters", params}, {"first moments", m}, {"second moments", v}})
    if (std::ssize(x) != total)
      fail("checkpoint {} have {} elements but the model has {} parameters; it belongs to another model",
           what, x.size(), total);
  from_host(params_, 0, params);
  if (!zero1_) {
    from_host(m_, 0, m);
    from_host(v_, 0, v);
    return;
  }
  from_host(m_, 0, slice_shard(m, shards_, comm_.rank()));
  from_host(v_, 0, slice_shard(v, shards_, comm_.rank()));
}

StepStats gather_step_stats(Communicator& comm, int64_t rank_real_tokens, double step_s, double wait_s) {
  const double mine[3] = {static_cast<double>(rank_real_tokens), step_s, wait_s};
  const std::vector<double> all = comm.all_gather_host(mine);
  StepStats s;
  s.wait_s = wait_s;
  s.rank_tokens_per_s = step_s > 0 ? mine[0] / step_s : 0;
  double tokens = 0, max_tokens = 0, slowest = 0;
  s.min_rank_tokens_per_s = s.rank_tokens_per_s;
  s.max_rank_tokens_per_s = s.rank_tokens_per_s;
  for (int r = 0; r < comm.size(); ++r) {
    const double t = all[static_cast<size_t>(3 * r)], sec = all[static_cast<size_t>(3 * r + 1)];
    tokens += t;
    max_tokens = std::max(max_tokens, t);
    slowest = std::max(slowest, sec);
    s.max_wait_s = std::max(s.max_wait_s, all[static_cast<size_t>(3 * r + 2)]);
    const double rate = sec > 0 ? t / sec : 0;
    s.min_rank_tokens_per_s = std::min(s.min_rank_tokens_per_s, rate);
    s.max_rank_tokens_per_s = std::max(s.max_rank_tokens_per_s, rate);
  }
  s.global_tokens_per_s = slowest > 0 ? tokens / slowest : 0;
  s.token_imbalance = tokens > 0 ? max_tokens / (tokens / comm.size()) : 1;
  return s;
}

}  // namespace pt::dist
