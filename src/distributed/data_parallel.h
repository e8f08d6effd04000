// Data-parallel optimizer step for the trainer: gradient reduction in buckets, the global gradient norm
// (and clip), AdamW on the parameters this rank owns, and (ZeRO-1) the all-gather of the weights the model
// computes with.
//
// Modes. Replicated (default): gradients are all-reduced and every rank runs the full AdamW on full fp32
// masters with full moments; the replicas stay identical because every rank gets the same sums. A model
// computing in f32 reads the masters (DecoderModel::load_weights); a bf16 one (a GPU's) reads a bf16
// working copy kept here (DecoderModel::use_working_weights), which AdamW writes as it updates each master
// (ops::AdamWTensor::working): no cast of every master after the step. ZeRO-1: gradients are
// reduce-scattered, and each rank keeps the fp32 masters and the AdamW moments of its shard only (zero.h):
// 12 bytes a parameter of optimizer state (8 with bf16 moments, about 6 with 8-bit ones:
// DataParallelOptions::moments) become 12 / world_size. A rank's shard of a padded working copy in the
// model's compute dtype holds its masters' cast (written by AdamW for a bf16 model, else cast after it;
// while masks are set, cast with the 2:4 sparse FFN weights masked, as load_weights would), and is
// all-gathered (bf16 on a GPU: half the bytes of an fp32 all-gather) and read in place by the model. What
// needs the full masters (checkpoints, the exported model, 2:4 mask computation) gathers them through the
// gradient buffer when the gradients are not needed.
//
// Without fp32 masters (DataParallelOptions::masters bf16, --master-weights bf16) the parameters this rank
// owns are bf16 and AdamW rounds each update stochastically (ops/adamw.h): on a GPU the model reads them
// in place (replicated) or gathers them as they are (ZeRO-1); the cpu model, computing in f32, reads an
// f32 copy. Everything else (reduction, clip, moments, checkpoints) is as with masters; 2:4 training,
// which keeps the pruned weights in the masters, needs them.
//
// How the trainer uses it (train/trainer.cpp; flags --dist-backend auto|local|mpi|nccl, --zero1,
// --dist-timeout SECONDS, --bucket-mb 25):
//
//   setup
//     auto comm = dist::make_communicator({backend, device, timeout_s});  // first: NCCL picks the GPU here
//     dist::RankStepStream data(data.train(), packing, grad_accum, comm->rank(), comm->size(),
//                               state.epoch, state.position);
//     grads: flat f32 of dist::DataParallelOptimizer::flat_size(layout.total(), comm->size(), zero1)
//       elements; the model takes a view of the first layout.total()
//     dist::DataParallelOptimizer dp(*comm, layout, grads, {.zero1 = zero1, .bucket_bytes = ...,
//                                                          .compute_dtype = model.dtype()});
//     resume: every rank reads the checkpoint, then dp.load_state(ckpt.params, ckpt.adam_m, ckpt.adam_v)
//     fresh: every rank computes the same init_params(seed), then dp.set_params(init)
//   each step
//     const dist::RankStep s = data.next();           // this rank's micro-batches (none is possible)
//     const double targets = comm->sum_host({local_targets})[0];
//     const double grad_scale = 1.0 / std::max(1.0, targets);   // global mean: the reduction only sums
//     masks due: masks.recompute(dp.gather_masters())  // before the gradients are zeroed (ZeRO-1 uses them)
//     weights: dp.gathers_weights() ? model.use_working_weights(dp.gather_weights(sparse ? &masks : nullptr))
//       (after set_masks) : model.load_weights(dp.masters())
//     zero the grads (all flat_size elements)
//     loss_sum = sum over s.micro of model.forward_backward(b, grads_view, grad_scale).loss_sum
//       (overlap, for more than one rank: during the last micro-batch, model.set_backward_progress calls
//        dp.ready_from(offset) as each layer's backward finishes)
//     dp.reduce_gradients();
//     dp.grad_norm_deferred(norm);                     // the norm, read before the step
//     adamw.grad_scale = ops::clip_factor(max_grad_norm, norm);   // the clip, applied as AdamW reads
//     (2:4 with masked decay: dp.clip_grad_norm_deferred(max_grad_norm, norm), then dp.masked_decay(masks,
//      lambda): the decay is added after the clip, unscaled)
//     dp.step(adamw, state.step);                      // AdamW on the owned masters
//     const double loss = comm->sum_host({loss_sum})[0] * grad_scale;   // the same on every rank
//     log (every rank calls, rank 0 writes): dist::gather_step_stats(*comm, s.real_tokens(), step_s,
//       comm->take_stats().wait_s): global and per-rank real tokens/s, time in collectives, token imbalance
//   checkpoint: every rank calls dp.gather_state() (collective); rank 0 saves its params, m and v
//   final model: every rank calls dp.params_to_host() (collective); rank 0 saves it
//   Only rank 0 writes metrics, checkpoints and the final model. Validation issues no collective once the
//   model holds the step's weights: run it on rank 0 alone or on every rank.
#pragma once

#include "core/arena.h"
#include "distributed/communicator.h"
#include "distributed/grad_reducer.h"
#include "distributed/state_offload.h"
#include "distributed/zero.h"
#include "model/parameters.h"
#include "model/sparsity.h"
#include "ops/adamw.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace pt::dist {

struct DataParallelOptions {
  bool zero1 = false;
  int64_t bucket_bytes = int64_t{25} << 20;  // gradient bucket size, as torch DDP
  DType compute_dtype = DType::f32;          // the model's: of the working weights it reads from here
  ops::MomentFormat moments = ops::MomentFormat::f32;  // how the AdamW moments are stored (ops/adamw.h)
  DType masters = DType::f32;  // f32 masters, or bf16: none, the weights themselves (see above)
  // The optimizer step fused into the backward (train/step_in_backward.h): one rank, no flat gradient
  // buffer (grads empty), and step_block in place of reduce, clip and step.
  bool step_in_backward = false;
  // The masters and moments in pinned host memory, each block updated on the device through two slots
  // (--offload-optimizer; distributed/state_offload.h); the model reads a working copy. Not with ZeRO-1.
  bool offload = false;
};

struct FullState {  // host copies of unpadded flat buffers (layout.total() elements), as checkpoints hold
  std::vector<float> params;
  ops::HostMoment m, v;
};

class DataParallelOptimizer {
 public:
  // Elements of the flat gradient buffer the trainer allocates (and of the ZeRO-1 working copy): the
  // layout's total, padded to the shards with ZeRO-1.
  static int64_t flat_size(int64_t total, int world_size, bool zero1);

  // grads: flat f32 buffer of flat_size() elements on comm.device(), zero in the padding (empty with
  // step_in_backward). The optimizer allocates the masters and the moments of the range it owns (zero until
  // set_params or load_state), the working copy where the model reads one from it (ZeRO-1; bf16 masters for
  // an f32 model), and keeps a reference to grads.
  DataParallelOptimizer(Communicator& comm, const ParameterLayout& layout, const Tensor& grads,
                        const DataParallelOptions& options);

  bool zero1() const { return zero1_; }
  const ShardLayout& shards() const { return shards_; }
  int64_t owned_begin() const { return begin_; }  // the flat range this rank updates
  int64_t owned_end() const { return end_; }
  const GradientReducer& reducer() const { return reducer_; }
  // The masters this rank holds: element 0 is flat offset owned_begin(). Replicated, all of them
  // (layout.total() elements, what load_weights takes when f32); ZeRO-1, its shard (shards().shard
  // elements, zero past owned_end()). f32, or bf16 without fp32 masters.
  const Tensor& masters() const { return masters_; }
  // Whether the model takes its weights from gather_weights (a working copy kept here, or bf16 masters in
  // place) rather than from load_weights(masters()): all but replicated fp32 masters for an f32 model.
  bool gathers_weights() const { return !working_weights_.empty() || masters_.dtype != DType::f32; }
  ops::MomentFormat moment_format() const { return format_; }
  // This rank's optimizer state: the masters and the two AdamW moments (with 8-bit moments, their codes and
  // block absmax values), on its device or, offloaded, in host memory.
  int64_t state_bytes() const { return state_.bytes(); }
  bool offloaded() const { return offload_ != nullptr; }
  // Offloaded: the device slots the blocks' state passes through.
  int64_t offload_slot_bytes() const { return offload_ ? offload_->bytes() : 0; }
  // The state_bytes() of rank `rank` of such an optimizer, before allocating anything (the memory plan).
  static int64_t state_bytes(const ParameterLayout& layout, int world_size, int rank, bool zero1,
                             ops::MomentFormat moments, DType masters);
  // The working copy of the weights the model reads from here: ZeRO-1's gathered one, the offloaded or
  // replicated masters' copy in the model's dtype (0 when there is none).
  int64_t working_bytes() const { return working_.bytes(); }

  // Sets the parameters from a full host buffer of layout.total() elements, the same on every rank (each
  // keeps what it owns); the moments are left as they are.
  void set_params(std::span<const float> params);

  // Backward has finished every gradient at flat offset >= offset (last micro-batch): start those buckets.
  void ready_from(int64_t offset) { reducer_.ready_from(offset); }
  // Sums the gradients over ranks (all of them, or this rank's shard with ZeRO-1) and waits.
  void reduce_gradients() { reducer_.finish(); }
  // The global L2 norm of the summed gradients; scales them by min(1, max_norm / (norm + 1e-6)) as
  // ops::clip_grad_norm does. Returns the norm before clipping, the same on every rank.
  double clip_grad_norm(double max_norm);
  // The same with the norm left on the device in norm (f64 [1] on the gradients' device) for a later read:
  // without ZeRO-1 the host does not wait here (ops::clip_grad_norm_deferred); with it, it does (the sum
  // over ranks' shards is a host collective).
  void clip_grad_norm_deferred(double max_norm, const Tensor& norm);
  // The norm alone, as clip_grad_norm_deferred leaves it, the gradients unscaled: for the clip folded into
  // AdamW (ops::AdamWConfig::grad_scale = ops::clip_factor(max_norm, norm)), which reads every gradient as
  // the scaled ones, so the same step without a pass rewriting them.
  void grad_norm_deferred(const Tensor& norm);
  // grads += lambda (1 - mask) W on the owned range of the sparse linears (FfnMasks::masked_decay): the
  // gradients outside it are not summed here and AdamW does not read them.
  void masked_decay(const FfnMasks& masks, double lambda);
  // AdamW (step counts from 1) on the owned masters.
  void step(const ops::AdamWConfig& config, int64_t step);
  // step_in_backward: AdamW on the parameters of the flat range [begin, end), which holds whole tensors,
  // with their gradients in grads (f32, element 0 at flat offset begin).
  void step_block(const ops::AdamWConfig& config, int64_t step, int64_t begin, int64_t end,
                  const Tensor& grads);
  // step_in_backward, offloaded: the state of the block about to be stepped starts on its way to the device
  // (a no-op otherwise).
  void prefetch_block(int64_t begin, int64_t end);

  // When gathers_weights() (collective with ZeRO-1): the weights of the following passes. The working
  // copy of this rank's masters in the compute dtype, with `masks` applied where they cover sparse linears
  // (nullptr: none): as AdamW wrote it, or cast now (after set_params or load_state, with masks, or where
  // AdamW does not write it); with ZeRO-1 then all-gathered. bf16 masters of a bf16 model: themselves.
  // Flat, layout.total() elements in layout order, valid until the next call: what
  // DecoderModel::use_working_weights reads, and the values load_weights makes of the full masters with
  // the same masks set.
  Tensor gather_weights(const FfnMasks* masks);
  // The full fp32 masters on the device (layout.total() elements). Replicated, the masters themselves;
  // ZeRO-1 all-gathers them into the gradient buffer (collective), whose gradients are lost: call it
  // before they are zeroed for the next step, and use the result before they are written. f32 masters only
  // (2:4 mask computation).
  Tensor gather_masters();
  // Full host copies (collective with ZeRO-1, through the gradient buffer as gather_masters): the
  // parameters, and everything a checkpoint holds.
  std::vector<float> params_to_host();
  FullState gather_state();
  // Restores from full buffers of layout.total() elements (a checkpoint of any rank count). Moments of
  // another format than this optimizer's are refused, naming both (no silent conversion); bf16 masters
  // take params as bf16 values (a checkpoint of such a run holds them exactly).
  void load_state(std::span<const float> params, const ops::HostMoment& m, const ops::HostMoment& v);

 private:
  std::vector<float> to_host(const Tensor& t, int64_t n) const;
  void from_host(const Tensor& t, std::span<const float> values) const;
  // ZeRO-1: every rank's `mine` (shard elements) gathered into the gradient buffer; its first
  // layout.total() elements.
  Tensor gather_through_grads(const Tensor& mine);
  // The bytes of a per-rank buffer of every rank, joined in rank order on the host: rank r contributes
  // the first count(r) elements of its `mine` (collective with ZeRO-1, through the gradient buffer).
  template <class CountOf>
  std::vector<std::byte> gather_bytes(const Tensor& mine, CountOf count);
  // Fails naming `what` unless the masters are f32 (what 2:4 training needs).
  void require_fp32_masters(const char* what) const;
  // ZeRO-1: the global norm of the summed gradients from every rank's shard (a host collective).
  double sharded_norm();
  // Fails naming op unless norm is an f64[1] tensor on this rank's device.
  void check_norm(const char* op, const Tensor& norm) const;
  // AdamW on entries of the owned range, keeping track of whether the working copy is the masters' cast.
  void adamw(std::span<const ops::AdamWTensor> entries, const ops::AdamWConfig& config, int64_t step);
  // The AdamW entries of the parameters in [begin, end) with their gradients in grads (element 0 at flat
  // offset begin).
  std::vector<ops::AdamWTensor> block_entries(int64_t begin, int64_t end, const Tensor& grads) const;
  // Offloaded: the host state is about to be read or written.
  void drain_offload() const;
  // Rank r's real elements of a per-rank buffer of the owned range (every element when replicated).
  int64_t owned_count(int rank) const;
  // The full moment (codes and absmax too) and this rank's part of one, in the optimizer's format.
  ops::HostMoment gather_moment(const Tensor& values, const Tensor& absmax);
  void load_moment(const ops::HostMoment& full, const char* what, const Tensor& values, const Tensor& absmax);
  // Absmax values of the quantization blocks of rank r's range (the flat range this rank owns: rank 0 of
  // one when replicated).
  int64_t rank_blocks(int rank) const;

  Communicator& comm_;
  const ParameterLayout& layout_;
  bool zero1_;
  bool step_in_backward_;
  ops::MomentFormat format_;
  ShardLayout shards_;
  Tensor grads_;
  int64_t begin_ = 0, end_ = 0;
  Arena state_;  // the owned range's masters and moments
  Tensor masters_, m_, v_, m_absmax_, v_absmax_;
  Arena working_;  // the working copy of every weight the model reads (flat_size elements), where it
                   // does not read the masters in place
  Tensor working_weights_;
  bool fused_working_ = false;    // AdamW writes it (bf16, beside f32 masters not offloaded)
  bool working_current_ = false;  // this rank's part is the cast of its masters, unmasked
  bool working_masked_ = false;   // the last gather masked it
  std::unique_ptr<StateOffload> offload_;
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
