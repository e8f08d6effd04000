// Data-parallel optimizer step for the trainer: gradient reduction in buckets, the global gradient-norm
// clip, AdamW on the parameters this rank owns, and (ZeRO-1) the all-gather of the updated parameters.
//
// Modes. Replicated (default): gradients are all-reduced and every rank runs the full AdamW with full
// moments; the replicas stay identical because every rank gets the same sums. ZeRO-1: gradients are
// reduce-scattered, each rank keeps the AdamW moments of its shard only (zero.h), updates the fp32 master
// weights of its shard, and the parameter buffer is all-gathered. (The full fp32 parameter buffer still
// exists on every rank, because the model reads its weights from it; sharding the masters themselves
// needs the model to take its bf16 working copy by all-gather, a later step.)
//
// How the trainer uses it (train/trainer.cpp; suggested flags --dist-backend auto|local|mpi|nccl, --zero1,
// --dist-timeout SECONDS, --bucket-mb 25):
//
//   setup
//     auto comm = dist::make_communicator({backend, device, timeout_s});  // first: NCCL picks the GPU here
//     dist::RankStepStream data(data.train(), packing, grad_accum, comm->rank(), comm->size(),
//                               state.epoch, state.position);   // replaces BatchStream + next_step_batches
//     arena capacity: replay a second RankStepStream for the run's steps, max Batch::num_tokens() of its
//     micro const int64_t n = dist::DataParallelOptimizer::flat_size(layout.total(), comm->size(), zero1);
//     allocate params and grads with n f32 elements (was layout.total()); drop OptimizerState's m and v
//     the model takes views of the first layout.total() elements: Tensor(params.data, f32, {total}, device)
//     dist::DataParallelOptimizer dp(*comm, layout, params, grads, {.zero1 = zero1, .bucket_bytes = ...});
//     resume: every rank reads the checkpoint, then dp.load_state(ckpt.params, ckpt.adam_m, ckpt.adam_v)
//     fresh: every rank computes the same init_params(seed) and writes it into params[0, total)
//   each step
//     const dist::RankStep s = data.next();           // this rank's micro-batches (none is possible)
//     local = {targets over s.micro, loss_sum later}; the counts, real and processed tokens, flops as now
//     const double targets = comm->sum_host({local_targets})[0];
//     const double grad_scale = 1.0 / std::max(1.0, targets);   // global mean: the reduction only sums
//     zero the grads (all n elements); model.load_weights(params_view)
//     loss_sum = sum over s.micro of model.forward_backward(b, grads_view, grad_scale).loss_sum
//       (overlap, for more than one rank: during the last micro-batch, model.set_backward_progress calls
//        dp.ready_from(offset) as each layer's backward finishes)
//     dp.reduce_gradients();
//     const double grad_norm = dp.clip_grad_norm(max_grad_norm);
//     dp.step(adamw, state.step);                      // AdamW on the owned range, ZeRO-1 all-gather
//     const double loss = comm->sum_host({loss_sum})[0] * grad_scale;   // the same on every rank
//     state.epoch = data.epoch(), state.position = data.position() (a new TrainerState field replacing
//       batches_in_epoch for these runs), state.tokens_seen += s.global_real_tokens()
//     log (every rank calls, rank 0 writes): dist::gather_step_stats(*comm, s.real_tokens(), step_s,
//       comm->take_stats().wait_s): global and per-rank real tokens/s, time in collectives, token imbalance
//   checkpoint: every rank calls dp.gather_state() (collective); rank 0 saves its params, m and v
//   Only rank 0 writes metrics, checkpoints and the final model. Validation issues no collective: run it on
//   rank 0 alone or on every rank.
#pragma once

#include "core/arena.h"
#include "distributed/communicator.h"
#include "distributed/grad_reducer.h"
#include "distributed/zero.h"
#include "model/parameters.h"
#include "ops/adamw.h"

#include <cstdint>
#include <span>
#include <vector>

namespace pt::dist {

struct DataParallelOptions {
  bool zero1 = false;
  int64_t bucket_bytes = int64_t{25} << 20;  // gradient bucket size, as torch DDP
};

struct FullState {  // host copies of unpadded flat buffers (layout.total() elements), as checkpoints hold
  std::vector<float> params, m, v;
};

class DataParallelOptimizer {
 public:
  // Elements of the flat params and grads buffers the trainer allocates: the layout's total, padded to
  // the shards with ZeRO-1.
  static int64_t flat_size(int64_t total, int world_size, bool zero1);

  // params and grads: flat f32 buffers of flat_size() elements on comm.device(), zero in the padding, the
  // same parameters on every rank. The optimizer allocates the moments and keeps references to all.
  DataParallelOptimizer(Communicator& comm, const ParameterLayout& layout, const Tensor& params,
                        const Tensor& grads, const DataParallelOptions& options);

  bool zero1() const { return zero1_; }
  const ShardLayout& shards() const { return shards_; }
  int64_t owned_begin() const { return begin_; }  // the flat range this rank updates
  int64_t owned_end() const { return end_; }
  const GradientReducer& reducer() const { return reducer_; }

  // Backward has finished every gradient at flat offset >= offset (last micro-batch): start those buckets.
  void ready_from(int64_t offset) { reducer_.ready_from(offset); }
  // Sums the gradients over ranks (all of them, or this rank's shard with ZeRO-1) and waits.
  void reduce_gradients() { reducer_.finish(); }
  // The global L2 norm of the summed gradients; scales them by min(1, max_norm / (norm + 1e-6)) as
  // ops::clip_grad_norm does. Returns the norm before clipping, the same on every rank.
  double clip_grad_norm(double max_norm);
  // AdamW (step counts from 1) on the owned parameters, then (ZeRO-1) the all-gather of the parameters.
  void step(const ops::AdamWConfig& config, int64_t step);

  // Full host buffers for a checkpoint, on every rank (collective: every rank calls). With ZeRO-1 the
  // moments are gathered through the gradient buffer, whose contents are lost (the next step zeroes it).
  FullState gather_state();
  // Restores from full buffers of layout.total() elements (a checkpoint of any rank count).
  void load_state(std::span<const float> params, std::span<const float> m, std::span<const float> v);

 private:
  std::vector<float> to_host(const Tensor& t, int64_t offset, int64_t n) const;
  void from_host(const Tensor& t, int64_t offset, std::span<const float> values) const;

  Communicator& comm_;
  const ParameterLayout& layout_;
  bool zero1_;
  ShardLayout shards_;
  Tensor params_, grads_;
  int64_t begin_ = 0, end_ = 0;
  Arena moments_;
  Tensor m_, v_;  // owned range only
  std::vector<ops::AdamWTensor> adamw_;
  std::vector<Tensor> owned_grads_;
  GradientReducer reducer_;
};

// Per-step throughput and balance across ranks, from each rank's own figures (collective).
struct StepStats {
  double global_tokens_per_s = 0;  // real tokens of all ranks / the slowest rank's step time
  double rank_tokens_per_s = 0;    // this rank's real tokens / its step time
  double min_rank_tokens_per_s = 0, max_rank_tokens_per_s = 0;
  double wait_s = 0, max_wait_s = 0;  // this rank's and the longest time blocked in collectives
  double token_imbalance = 1;         // max / mean real tokens per rank
};
StepStats gather_step_stats(Communicator& comm, int64_t rank_real_tokens, double step_s, double wait_s);

}  // namespace pt::dist
