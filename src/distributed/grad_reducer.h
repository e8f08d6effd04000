// Gradient reduction in buckets, overlapped with the backward pass. The flat gradient buffer (layout
// order) is cut at tensor boundaries into buckets of about bucket_bytes; backward produces gradients from
// the end of the layout (LM head, last layer) to its start (embedding), so buckets are listed and started
// in that order. The trainer (or the model, layer by layer during the step's last micro-batch) reports how
// far backward has got with ready_from(offset); every bucket lying entirely at or after the offset starts
// its collective at once, while backward continues; finish() starts the rest and waits for all.
//
// Modes: all-reduce (plain data parallelism: every rank gets every summed gradient) or reduce-scatter
// (ZeRO-1: each rank gets the sum of the part of each bucket that lies in its shard).
//
// Scaling: the model adds gradients of loss_sum * grad_scale with grad_scale = 1 / (loss tokens of the
// whole step over all ranks), so the sum over ranks IS the gradient of the global mean loss; the reducer
// only sums, and never divides by the world size.
#pragma once

#include "distributed/communicator.h"
#include "distributed/zero.h"
#include "model/parameters.h"

#include <cstdint>
#include <span>
#include <vector>

namespace pt::dist {

struct Bucket {
  int64_t begin = 0, end = 0;  // flat element range
};

// Buckets of whole tensors of about bucket_elems elements (a larger tensor is a bucket of its own) covering
// [0, last tensor's end), listed from the end of the layout to its start.
std::vector<Bucket> make_buckets(std::span<const ParamInfo> params, int64_t bucket_elems);

class GradientReducer {
 public:
  enum class Mode { kAllReduce, kReduceScatter };

  // grads: the flat f32 gradient buffer on comm.device(), padded to shards.padded_total() for
  // kReduceScatter. The reducer keeps references to comm and the buffer.
  GradientReducer(Communicator& comm, const Tensor& grads, std::vector<Bucket> buckets, Mode mode,
                  const ShardLayout& shards = {});

  // Gradients at flat offsets >= offset are final for this step: starts every bucket inside them.
  void ready_from(int64_t offset);
  // Starts the buckets not started yet, waits for all, and rearms for the next step.
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Of the last finished step: buckets started before finish(), i.e. overlapped with backward.
  int started_early() const { return last_started_early_; }

 private:
  void start_next();

  Communicator& comm_;
  Tensor grads_;
  std::vector<Bucket> buckets_;
  Mode mode_;
  ShardLayout shards_;
  size_t next_ = 0;
  int started_early_ = 0, last_started_early_ = 0;
  std::vector<Communicator::Handle> handles_;
};

}  // namespace pt::dist
