#include "distributed/grad_reducer.h"

#include "core/error.h"

#include <algorithm>
#include <utility>

namespace pt::dist {

std::vector<Bucket> make_buckets(std::span<const ParamInfo> params, int64_t bucket_elems) {
  if (bucket_elems < 1) fail("gradient buckets must hold at least one element (got {})", bucket_elems);
  std::vector<ParamInfo> sorted(params.begin(), params.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const ParamInfo& a, const ParamInfo& b) { return a.offset > b.offset; });
  std::vector<Bucket> buckets;
  for (const ParamInfo& p : sorted) {
    if (p.numel == 0) continue;
    // Tensors are contiguous in the layout: a bucket grows downwards until it is full.
    if (!buckets.empty() && buckets.back().begin == p.offset + p.numel &&
        buckets.back().end - p.offset <= bucket_elems)
      buckets.back().begin = p.offset;
    else
      buckets.push_back({p.offset, p.offset + p.numel});
  }
  return buckets;
}

GradientReducer::GradientReducer(Communicator& comm, const Tensor& grads, std::vector<Bucket> buckets,
                                 Mode mode, const ShardLayout& shards)
    : comm_(comm), grads_(grads), buckets_(std::move(buckets)), mode_(mode), shards_(shards) {
  if (grads.dtype != DType::f32) fail("gradient reducer: gradients {} must be f32", grads.str());
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const Bucket& b = buckets_[i];
    if (b.begin >= b.end || b.end > grads.numel() || (i > 0 && b.end > buckets_[i - 1].begin))
      fail("gradient reducer: bucket [{}, {}) is empty, past the buffer {} or out of backward order", b.begin,
           b.end, grads.str());
  }
  if (mode == Mode::kReduceScatter) {
    if (shards.world_size != comm.size() || grads.numel() != shards.padded_total())
      fail("gradient reducer: ZeRO-1 needs gradients padded to {} shards ({} elements), got {}", comm.size(),
           shards.padded_total(), grads.str());
    if (!buckets_.empty() && buckets_.front().end > shards.total)
      fail("gradient reducer: buckets end at {}, past the {} parameters of the shard layout",
           buckets_.front().end, shards.total);
  }
}

void GradientReducer::start_next() {
  const Bucket& b = buckets_[next_++];
  const Tensor x(grads_.ptr<float>() + b.begin, DType::f32, {b.end - b.begin}, grads_.device);
  if (mode_ == Mode::kAllReduce) {
    handles_.push_back(comm_.start_all_reduce_sum(x));
  } else {
    const std::vector<int64_t> counts = shards_.counts_in(b.begin, b.end);
    handles_.push_back(comm_.start_reduce_scatter_sum(x, counts));
  }
}

void GradientReducer::ready_from(int64_t offset) {
  while (next_ < buckets_.size() && buckets_[next_].begin >= offset) {
    start_next();
    ++started_early_;
  }
}

void GradientReducer::finish() {
  while (next_ < buckets_.size()) start_next();
  for (auto h : handles_) comm_.wait(h);
  handles_.clear();
  next_ = 0;
  last_started_early_ = std::exchange(started_early_, 0);
}

}  // namespace pt::dist
