#include "distributed/data_parallel.h"

#include "core/device.h"
#include "core/error.h"
#include "core/float16.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/elementwise.h"
#include "ops/grad_norm.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

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

// The caller's flat buffer, checked before anything (the reducer) is built on it.
// Absmax values of the quantization blocks of rank r's owned range (every parameter when replicated).
int64_t owned_blocks(const ParameterLayout& layout, const ShardLayout& shards, bool zero1, int rank) {
  if (!zero1) return range_quant_blocks(layout.params(), 0, layout.total());
  return range_quant_blocks(layout.params(), shards.begin(rank),
                            shards.begin(rank) + shards.real_count(rank));
}

struct StateSlots {
  int masters, m, v, m_absmax = -1, v_absmax = -1;
};

// The masters and moments of rank `rank`: the shard with ZeRO-1 (padding included), else everything.
StateSlots reserve_state(Arena& arena, const ParameterLayout& layout, const ShardLayout& shards, bool zero1,
                         int rank, ops::MomentFormat format, DType masters) {
  const int64_t owned = zero1 ? shards.shard : layout.total();
  const DType moment = ops::moment_dtype(format);
  StateSlots s{arena.reserve(masters, {owned}), arena.reserve(moment, {owned}),
               arena.reserve(moment, {owned})};
  if (format == ops::MomentFormat::q8) {
    // At least one absmax element so that a rank owning nothing still has a buffer to gather from.
    const int64_t blocks = std::max<int64_t>(1, owned_blocks(layout, shards, zero1, rank));
    s.m_absmax = arena.reserve(DType::f32, {blocks});
    s.v_absmax = arena.reserve(DType::f32, {blocks});
  }
  return s;
}

const Tensor& checked_grads(const Tensor& t, int64_t n, Device device, bool in_blocks) {
  if (in_blocks) {
    if (!t.empty())
      fail("data-parallel optimizer: the step in the backward takes no flat gradient buffer, got {}",
           t.str());
  } else if (t.dtype != DType::f32 || t.device != device || t.numel() != n || t.empty()) {
    fail("data-parallel optimizer: the gradients must be f32[{}] on {} (flat_size elements), got {}", n,
         device_name(device), t.str());
  }
  return t;
}

// Where the masters and moments live: on the device, or offloaded to host memory, pinned for a GPU's copies.
Arena state_arena(Device device, bool offload) {
  if (!offload) return Arena(device);
  return device == Device::cuda ? Arena(Device::cpu, Arena::Pinned{}) : Arena(Device::cpu);
}

}  // namespace

DataParallelOptimizer::DataParallelOptimizer(Communicator& comm, const ParameterLayout& layout,
                                             const Tensor& grads, const DataParallelOptions& options)
    : comm_(comm),
      layout_(layout),
      zero1_(options.zero1),
      step_in_backward_(options.step_in_backward),
      format_(options.moments),
      shards_(make_shard_layout(layout.total(), comm.size())),
      grads_(checked_grads(grads, flat_size(layout.total(), comm.size(), zero1_), comm.device(),
                           step_in_backward_)),
      state_(state_arena(comm.device(), options.offload)),
      working_(comm.device()),
      reducer_(comm, grads,
               step_in_backward_
                   ? std::vector<Bucket>{}
                   : make_buckets(layout.params(), std::max<int64_t>(1, options.bucket_bytes / 4)),
               options.zero1 ? GradientReducer::Mode::kReduceScatter : GradientReducer::Mode::kAllReduce,
               shards_) {
  if (step_in_backward_ && (zero1_ || comm.size() > 1))
    fail("data-parallel optimizer: the step in the backward runs on one rank without ZeRO-1, not {} ranks{}",
         comm.size(), zero1_ ? " with ZeRO-1" : "");
  begin_ = zero1_ ? shards_.begin(comm.rank()) : 0;
  end_ = zero1_ ? begin_ + shards_.real_count(comm.rank()) : layout.total();
  if (options.masters != DType::f32 && options.masters != DType::bf16)
    fail("data-parallel optimizer: masters are f32 or bf16 (none: the weights themselves), not {}",
         dtype_name(options.masters));
  const StateSlots slots =
      reserve_state(state_, layout, shards_, zero1_, comm.rank(), format_, options.masters);
  state_.allocate();  // zero: a moment of zero codes and zero absmax decodes to 0 in every format
  masters_ = state_.view(slots.masters), m_ = state_.view(slots.m), v_ = state_.view(slots.v);
  if (slots.m_absmax >= 0) m_absmax_ = state_.view(slots.m_absmax), v_absmax_ = state_.view(slots.v_absmax);
  if (options.offload && zero1_)
    fail(
        "data-parallel optimizer: --offload-optimizer keeps every parameter's state on each rank's host; "
        "drop --zero1");
  // The model's copy to read, unless it reads the masters in place (replicated, in their dtype): ZeRO-1
  // gathers one, offloaded masters are cast into one, and the model's bf16 copy of f32 masters (or f32 copy
  // of bf16 ones) lives here.
  if (zero1_ || options.offload || options.masters != options.compute_dtype) {
    if (options.compute_dtype != DType::f32 && options.compute_dtype != DType::bf16)
      fail("data-parallel optimizer: the model reads weights in f32 or bf16, not {}",
           dtype_name(options.compute_dtype));
    const int hw =
        working_.reserve(options.compute_dtype, {zero1_ ? shards_.padded_total() : layout.total()});
    working_.allocate();
    working_weights_ = working_.view(hw);
  }
  adamw_ = adamw_range(layout.params(), begin_, end_, masters_, grads_, {m_, v_, m_absmax_, v_absmax_});
  // AdamW writes the bf16 copy of f32 masters as it updates them (the offload casts each block itself).
  fused_working_ = !options.offload && options.masters == DType::f32 && options.compute_dtype == DType::bf16;
  if (fused_working_)
    for (ops::AdamWTensor& t : adamw_) t.working = working_weights_.elements(t.offset, t.param.numel());
  for (const auto& a : adamw_) owned_grads_.push_back(a.grad);
  if (options.offload)
    offload_ = std::make_unique<StateOffload>(layout, StateTensors{masters_, m_, v_, m_absmax_, v_absmax_},
                                              comm.device());
}

void DataParallelOptimizer::drain_offload() const {
  if (offload_) offload_->drain();
}

void DataParallelOptimizer::set_params(std::span<const float> params) {
  if (std::ssize(params) != layout_.total())
    fail("parameters of {} elements for a model of {}; they belong to another model", params.size(),
         layout_.total());
  drain_offload();
  working_current_ = false;
  if (zero1_)
    from_host(masters_, slice_shard(params, shards_, comm_.rank()));
  else
    from_host(masters_, params);
}

double DataParallelOptimizer::sharded_norm() {
  const double local = sum_of_squares(owned_grads_, comm_.device());
  return std::sqrt(comm_.sum_host(std::span<const double>(&local, 1))[0]);
}

double DataParallelOptimizer::clip_grad_norm(double max_norm) {
  if (!zero1_) return ops::clip_grad_norm(owned_grads_, max_norm);  // every rank holds every summed gradient
  if (!(max_norm > 0)) fail("clip_grad_norm: max_norm must be > 0, got {}", max_norm);
  const double norm = sharded_norm();
  if (const double factor = ops::clip_factor(max_norm, norm); factor < 1)
    scale(owned_grads_, comm_.device(), factor);
  return norm;
}

void DataParallelOptimizer::check_norm(const char* op, const Tensor& norm) const {
  if (norm.dtype != DType::f64 || norm.numel() != 1 || norm.device != comm_.device())
    fail("{}: the norm goes to an f64[1] tensor on {}, got {}", op, device_name(comm_.device()), norm.str());
}

namespace {

void write_norm(const Tensor& norm, double value) {
  copy_bytes(norm.data, norm.device == Device::cuda, &value, false, sizeof value);
}

}  // namespace

void DataParallelOptimizer::clip_grad_norm_deferred(double max_norm, const Tensor& norm) {
  if (!zero1_) return ops::clip_grad_norm_deferred(owned_grads_, max_norm, norm);  // checks norm too
  check_norm("clip_grad_norm_deferred", norm);
  write_norm(norm, clip_grad_norm(max_norm));
}

void DataParallelOptimizer::grad_norm_deferred(const Tensor& norm) {
  if (!zero1_) return ops::global_norm_deferred(owned_grads_, norm);  // checks norm too
  check_norm("grad_norm_deferred", norm);
  write_norm(norm, sharded_norm());
}

void DataParallelOptimizer::require_fp32_masters(const char* what) const {
  if (masters_.dtype != DType::f32)
    fail(
        "{} needs fp32 master weights (2:4 training keeps the pruned weights there); this run keeps none "
        "(--master-weights bf16): use --master-weights f32",
        what);
}

void DataParallelOptimizer::masked_decay(const FfnMasks& masks, double lambda) {
  require_fp32_masters("the masked decay of 2:4 weights");
  const int64_t n = end_ - begin_;
  masks.masked_decay_range(masters_.elements(0, n), begin_, lambda, grads_.elements(begin_, n));
}

void DataParallelOptimizer::adamw(std::span<const ops::AdamWTensor> entries, const ops::AdamWConfig& config,
                                  int64_t step) {
  // Where AdamW writes the working copy it stays the cast of the masters. A masked one (the passes' while
  // masks are set) the next gather casts again, masked or not, so AdamW leaves it.
  if (fused_working_ && !working_masked_) return ops::adamw_step(entries, config, step);
  working_current_ = false;
  if (!fused_working_) return ops::adamw_step(entries, config, step);
  std::vector<ops::AdamWTensor> plain(entries.begin(), entries.end());
  for (ops::AdamWTensor& t : plain) t.working = {};
  ops::adamw_step(plain, config, step);
}

void DataParallelOptimizer::step(const ops::AdamWConfig& config, int64_t step) {
  if (step_in_backward_) fail("step: this optimizer steps in the backward, block by block (step_block)");
  if (!offload_) return adamw(adamw_, config, step);
  // Block by block through the device slots, each block's fetch queued before the one before it is
  // updated.
  const std::vector<ParameterLayout::Block> blocks = layout_.blocks();
  offload_->prefetch(blocks[0].begin, blocks[0].end);
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto [begin, end] = blocks[i];
    if (i + 1 < blocks.size()) offload_->prefetch(blocks[i + 1].begin, blocks[i + 1].end);
    offload_->update(begin, end, block_entries(begin, end, grads_.elements(begin, end - begin)), config, step,
                     working_weights_.elements(begin, end - begin));
  }
}

std::vector<ops::AdamWTensor> DataParallelOptimizer::block_entries(int64_t begin, int64_t end,
                                                                   const Tensor& grads) const {
  if (grads.dtype != DType::f32 || grads.device != comm_.device() || grads.numel() != end - begin)
    fail("step_block: the gradients of [{}, {}) must be f32[{}] on {}, got {}", begin, end, end - begin,
         device_name(comm_.device()), grads.str());
  std::vector<ops::AdamWTensor> block;
  for (ops::AdamWTensor t : adamw_) {
    const int64_t n = t.param.numel();
    if (t.offset + n <= begin || t.offset >= end) continue;
    if (t.offset < begin || t.offset + n > end)
      fail("step_block: [{}, {}) cuts the parameter at [{}, {})", begin, end, t.offset, t.offset + n);
    t.grad = grads.elements(t.offset - begin, n);
    block.push_back(t);
  }
  return block;
}

void DataParallelOptimizer::prefetch_block(int64_t begin, int64_t end) {
  if (offload_) offload_->prefetch(begin, end);
}

void DataParallelOptimizer::step_block(const ops::AdamWConfig& config, int64_t step, int64_t begin,
                                       int64_t end, const Tensor& grads) {
  if (!step_in_backward_) fail("step_block: this optimizer was not made to step in the backward");
  const std::vector<ops::AdamWTensor> block = block_entries(begin, end, grads);
  if (!offload_) return adamw(block, config, step);
  offload_->update(begin, end, block, config, step, working_weights_.elements(begin, end - begin));
}

Tensor DataParallelOptimizer::gather_weights(const FfnMasks* masks) {
  if (!gathers_weights())
    fail(
        "gather_weights: the replicated optimizer with fp32 masters for an f32 model gathers no weights; the "
        "model loads them");
  if (masks) require_fp32_masters("2:4 masked weights");
  if (working_weights_.empty()) return masters_;  // bf16 masters read in place by a bf16 model
  // Offloaded: kept current by each update once filled.
  if (offload_) {
    if (!working_current_)
      for (const auto& [begin, end] : layout_.blocks())
        offload_->load_working(begin, end, working_weights_.elements(begin, end - begin));
    working_current_ = true;
    return working_weights_;
  }
  // This rank's part, unless AdamW has kept it the cast of the masters: cast, masked while masks are set.
  const Tensor mine = working_weights_.elements(begin_, zero1_ ? shards_.shard : layout_.total());
  if (masks)
    masks->masked_cast_range(masters_, begin_, mine);
  else if (!working_current_)
    ops::cast(masters_, mine);
  working_current_ = !masks;
  working_masked_ = masks != nullptr;
  if (zero1_) comm_.all_gather(working_weights_);
  return working_weights_.elements(0, layout_.total());
}

Tensor DataParallelOptimizer::gather_through_grads(const Tensor& mine) {
  PT_ASSERT(zero1_ && mine.numel() == shards_.shard);
  const bool gpu = comm_.device() == Device::cuda;
  copy_bytes(grads_.ptr<float>() + begin_, gpu, mine.data, gpu, static_cast<size_t>(mine.bytes()));
  comm_.all_gather(grads_);
  return grads_.elements(0, layout_.total());
}

Tensor DataParallelOptimizer::gather_masters() {
  require_fp32_masters("gather_masters");
  return zero1_ ? gather_through_grads(masters_) : masters_;
}

namespace {

template <class T>
std::vector<T> as_vector(const std::vector<std::byte>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

std::vector<float> widen_bf16(std::span<const uint16_t> bits) {
  std::vector<float> out(bits.size());
  std::transform(bits.begin(), bits.end(), out.begin(), bf16_to_float);
  return out;
}

}  // namespace

std::vector<float> DataParallelOptimizer::to_host(const Tensor& t, int64_t n) const {
  PT_ASSERT(t.dtype == DType::f32 && n <= t.numel());
  std::vector<float> out(static_cast<size_t>(n));
  copy_bytes(out.data(), false, t.data, t.device == Device::cuda, out.size() * sizeof(float));
  return out;
}

void DataParallelOptimizer::from_host(const Tensor& t, std::span<const float> values) const {
  PT_ASSERT(std::ssize(values) <= t.numel());
  const bool gpu = t.device == Device::cuda;
  if (t.dtype == DType::f32)
    return copy_bytes(t.data, gpu, values.data(), false, values.size() * sizeof(float));
  PT_ASSERT(t.dtype == DType::bf16);
  std::vector<uint16_t> bits(values.size());
  std::transform(values.begin(), values.end(), bits.begin(), float_to_bf16);
  copy_bytes(t.data, gpu, bits.data(), false, bits.size() * sizeof(uint16_t));
}

std::vector<float> DataParallelOptimizer::params_to_host() {
  drain_offload();
  if (masters_.dtype == DType::f32) return to_host(gather_masters(), layout_.total());
  return widen_bf16(as_vector<uint16_t>(gather_bytes(masters_, [&](int r) { return owned_count(r); })));
}

int64_t DataParallelOptimizer::owned_count(int rank) const {
  return zero1_ ? shards_.real_count(rank) : layout_.total();
}

int64_t DataParallelOptimizer::rank_blocks(int rank) const {
  return owned_blocks(layout_, shards_, zero1_, rank);
}

int64_t DataParallelOptimizer::state_bytes(const ParameterLayout& layout, int world_size, int rank,
                                           bool zero1, ops::MomentFormat moments, DType masters) {
  Arena arena(Device::cpu);  // never allocated: its reservations are the figure
  reserve_state(arena, layout, make_shard_layout(layout.total(), world_size), zero1, rank, moments, masters);
  return arena.bytes();
}

template <class CountOf>
std::vector<std::byte> DataParallelOptimizer::gather_bytes(const Tensor& mine, CountOf count) {
  const size_t element = static_cast<size_t>(dtype_size(mine.dtype));
  const bool gpu = mine.device == Device::cuda;
  std::vector<std::byte> out;
  if (!zero1_) {
    out.resize(static_cast<size_t>(count(0)) * element);
    copy_bytes(out.data(), false, mine.data, gpu, out.size());
    return out;
  }
  // A rank's shard of the gradient buffer (4 bytes an element) holds any of its buffers: moments of at
  // most 4 bytes an element, absmax values of at most one block an element.
  PT_ASSERT(mine.bytes() <= grads_.bytes() / comm_.size());
  copy_bytes(grads_.ptr<float>() + begin_, gpu, mine.data, gpu, static_cast<size_t>(mine.bytes()));
  comm_.all_gather(grads_);
  std::vector<std::byte> all(static_cast<size_t>(grads_.bytes()));
  copy_bytes(all.data(), false, grads_.data, gpu, all.size());
  for (int r = 0; r < comm_.size(); ++r) {
    const auto first = all.begin() + shards_.begin(r) * int64_t{sizeof(float)};
    out.insert(out.end(), first, first + count(r) * static_cast<int64_t>(element));
  }
  return out;
}

ops::HostMoment DataParallelOptimizer::gather_moment(const Tensor& values, const Tensor& absmax) {
  ops::HostMoment out{.format = format_};
  const std::vector<std::byte> bytes = gather_bytes(values, [&](int r) { return owned_count(r); });
  switch (format_) {
    case ops::MomentFormat::f32:
      out.values = as_vector<float>(bytes);
      break;
    case ops::MomentFormat::bf16:
      out.values = widen_bf16(as_vector<uint16_t>(bytes));
      break;
    case ops::MomentFormat::q8:
      out.codes = as_vector<uint8_t>(bytes);
      out.absmax = as_vector<float>(gather_bytes(absmax, [&](int r) { return rank_blocks(r); }));
      break;
  }
  return out;
}

FullState DataParallelOptimizer::gather_state() {
  drain_offload();
  FullState s;
  s.params = params_to_host();
  s.m = gather_moment(m_, m_absmax_);
  s.v = gather_moment(v_, v_absmax_);
  return s;
}

void DataParallelOptimizer::load_moment(const ops::HostMoment& full, const char* what, const Tensor& values,
                                        const Tensor& absmax) {
  const auto name = [](ops::MomentFormat f) { return ops::moment_format_name(f); };
  if (full.format != format_)
    fail(
        "the checkpoint holds AdamW moments in {} but this run keeps them in {}; resume with "
        "--optimizer-state {} (a checkpoint's moments are not converted), or start afresh with --no-resume",
        name(full.format), name(format_), name(full.format));
  const int64_t total = layout_.total(), n = end_ - begin_;
  const size_t have = format_ == ops::MomentFormat::q8 ? full.codes.size() : full.values.size();
  if (static_cast<int64_t>(have) != total)
    fail("checkpoint {} have {} elements but the model has {} parameters; it belongs to another model", what,
         have, total);
  const bool gpu = values.device == Device::cuda;
  const auto first = static_cast<size_t>(begin_), count = static_cast<size_t>(n);
  switch (format_) {
    case ops::MomentFormat::f32:
    case ops::MomentFormat::bf16:  // values rounded to the moments' dtype: exact for a bf16 checkpoint's
      from_host(values, std::span(full.values).subspan(first, count));
      break;
    case ops::MomentFormat::q8: {
      const int64_t blocks = range_quant_blocks(layout_.params(), 0, total);
      if (std::ssize(full.absmax) != blocks)
        fail(
            "checkpoint {} have {} block absmax values, the model's 8-bit moments {}; it belongs to another "
            "model",
            what, full.absmax.size(), blocks);
      copy_bytes(values.data, gpu, full.codes.data() + first, false, count);
      const auto block = static_cast<size_t>(range_quant_blocks(layout_.params(), 0, begin_));
      copy_bytes(absmax.data, gpu, full.absmax.data() + block, false,
                 static_cast<size_t>(rank_blocks(comm_.rank())) * sizeof(float));
      break;
    }
  }
}

void DataParallelOptimizer::load_state(std::span<const float> params, const ops::HostMoment& m,
                                       const ops::HostMoment& v) {
  if (std::ssize(params) != layout_.total())
    fail(
        "checkpoint parameters have {} elements but the model has {} parameters; it belongs to another model",
        params.size(), layout_.total());
  drain_offload();
  load_moment(m, "first moments", m_, m_absmax_);
  load_moment(v, "second moments", v_, v_absmax_);
  set_params(params);
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
