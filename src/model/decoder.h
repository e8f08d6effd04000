// A transformer as a sequence of ops, built from its ModelConfig (model/config.h): token embedding
// (+ learned positions, + token type 0, then a norm for BERT), per layer a pre-norm (RMSNorm or LayerNorm)
// -> q/k/v (+ biases) -> per-head q/k RMSNorm -> RoPE -> varlen attention, causal (sliding-window where the
// layer has one) or bidirectional within each example -> o_proj (+ bias) (+ residual), a pre-norm -> the
// MLP's up projection -> SwiGLU or GELU -> down (+ biases) (+ residual), then a final norm, the LM head and
// cross-entropy. Post-norm models (BERT) norm after each residual add instead and end in the MLM head's
// transform (dense, GELU, norm) before the LM head (+ bias). The head (transform, norm, LM head, loss) runs
// on the labelled tokens alone where that pays (model/batch_inputs.h): masked LM's 15% or so, and an SFT
// batch's answers without their prompts. They are gathered from the last layer's output, whose gradient
// the backward scatters back (zeros elsewhere): ModernBERT's sparse prediction, with the same loss. The
// model never names a backend or a family: it hands tensor views on its arena's device to the ops, which
// dispatch. Activations for `max_tokens` tokens are sized once at construction.
//
// Precision: on the cpu everything (master weights, activations, gradients) is f32, or f64 for gradient
// checks. On cuda the model computes in bf16 with f32 master weights: it keeps a bf16 working copy of the
// weights in device memory, activations are bf16 except the per-token statistics (norm mean/rstd, attention
// log-sum-exp, f32), every op accumulates in fp32, and parameter gradients are written in f32.
//
// 2:4 sparsity (model/sparsity.h): the MLP linears a SparsityConfig names run through ops::SparseLinear
// on a masked working copy W * mask (in the bf16 working copy on cuda, the model's or a caller's; in a
// copy of their own where the model reads the masters in place) while masks are set; their weight gradient
// is that of the masked weight, added to the dense master's (straight-through). Without masks they are
// ordinary dense linears.
#pragma once

#include "core/arena.h"
#include "core/tensor.h"
#include "data/packing/batch.h"
#include "model/batch_inputs.h"
#include "model/config.h"
#include "model/parameters.h"
#include "model/sparsity.h"
#include "ops/attention.h"
#include "ops/head_norm_rope.h"
#include "ops/rope.h"
#include "ops/sparse_linear.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace pt {

struct LossSum {
  double loss_sum = 0;  // sum of -log p over targets
  int64_t tokens = 0;   // targets counted
};

// Activations the backward recomputes instead of keeping per layer, which then share one buffer each across
// layers: none; the RMSNorm outputs and the SwiGLU output (about 29% of a layer's activation memory for a
// few percent more step time); or all of a layer's, from its input (activation checkpointing: each layer's
// forward runs twice, and one layer's activations are held at a time).
enum class Recompute { none, norms_and_swiglu, layers };
// "none", "norms" (norms_and_swiglu) or "layers"; throws pt::Error on any other name.
Recompute parse_recompute(const std::string& name);

class DecoderModel {
 public:
  // dtype is what the model computes in: f32 (training) or f64 (gradient checks) on the cpu, bf16 on cuda
  // (whose attention supports head_dim 64 and 128). Master params and gradients live on `device` in
  // master_dtype(): the compute dtype, or f32 for bf16. sparsity names the FFN linears that can run 2:4
  // sparse (its schedule is the trainer's business).
  DecoderModel(const ModelConfig& config, int64_t max_tokens, Device device = Device::cpu,
               DType dtype = DType::f32, const SparsityConfig& sparsity = {},
               Recompute recompute = Recompute::none);

  const ModelConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  int64_t max_tokens() const { return max_tokens_; }
  Device device() const { return arena_.device(); }
  DType dtype() const { return dtype_; }
  DType master_dtype() const { return dtype_ == DType::bf16 ? DType::f32 : dtype_; }
  int64_t activation_bytes() const { return arena_.bytes(); }
  // The bytes of every buffer the model allocated on its device, for the memory plan's checks
  // (train/memory_plan.h). The working copy is allocated by the first load_weights.
  struct Memory {
    int64_t activations, working_copy, sparse_copies, batch_inputs;
  };
  Memory memory() const {
    return {arena_.bytes(), weight_copy_.bytes(), sparse_copy_.bytes(), inputs_.bytes()};
  }

  // The weights of the following passes, from the flat master params (layout order). A model computing in
  // the master dtype reads them in place (keep them alive and at this address); a bf16 model casts them
  // into its working copy (allocated by the first call), so call this again after every optimizer step.
  void load_weights(const Tensor& master_params);
  // The weights of the following passes read in place from a caller's flat working copy in the compute
  // dtype (layout order, at least layout().total() elements; keep it alive), as ZeRO-1 gathers it
  // (distributed/data_parallel.h): what load_weights would make of the masters, so masked where the sparse
  // linears are while masks are set. A bf16 model then holds no working copy of its own. Call it again
  // after the values change (every optimizer step) and after the masks do.
  //
  // What the passes derive from the weights stays right because this redoes what load_weights does after
  // its cast: the bf16 sparse linears are (re)bound to views of this buffer, so they read its masked
  // values, and refreshed, so their cuSPARSELt compressed forms are made again from them; a cpu model's
  // sparse linears refill their own masked copies from it. The masks themselves are set_masks'; the
  // caller must have masked the copy with the same ones.
  void use_working_weights(const Tensor& weights);

  // The masks of the sparse FFN linears (on the model's device, computed), or nullptr to run them dense.
  // load_weights / use_working_weights apply them: set them before, and load again after they change.
  void set_masks(const FfnMasks* masks);
  bool sparse_active() const { return masks_ != nullptr; }
  // The MVUE draws that prune the sparse linears' output gradients in the following forward_backward.
  void set_mvue_seed(const MvueSeed& seed) { mvue_seed_ = seed; }

  // Batches run in two steps so that the host never waits for the device in between: stage() checks a
  // batch on the host and starts copying it to the device (model/batch_inputs.h), and a pass on the staged
  // batch queues its work. Stage the next batch while a pass runs to hide its copy.
  using StagedBatch = BatchInputs::Ticket;
  StagedBatch stage(const Batch& batch) { return inputs_.stage(batch); }
  // Loss and gradients of one staged micro-batch with the loaded weights. Gradients of (loss_sum *
  // grad_scale) are ADDED to grads (flat, layout order, master dtype, on the model's device), so
  // micro-batches accumulate; grad_scale is 1 / (targets of the whole optimizer step). The loss is summed
  // on the device: take_loss() reads it.
  void forward_backward(const StagedBatch& batch, const Tensor& grads, double grad_scale);
  // The optimizer step fused into the backward (--optimizer-in-backward): instead of one flat buffer, the
  // pass writes each block of the layout (ParameterLayout::layer_begin) into a buffer of its own, asking
  // `open` for one (master dtype, zeroed, the block's elements) as it reaches the block, and hands it to
  // `close` as soon as the block's gradients are final (queued on the device after them), before the next
  // block's are written. The embeddings' buffer is opened first (a tied LM head adds to it) and closed last;
  // the head's and then each layer's, from the top, in between: two blocks' gradients exist at a time.
  struct GradientBlocks {
    std::function<Tensor(int64_t begin, int64_t end)> open;
    std::function<void(int64_t begin, int64_t end, const Tensor& grads)> close;
  };
  void forward_backward(const StagedBatch& batch, const GradientBlocks& blocks, double grad_scale);
  // The loss summed over the passes since the last take_loss (this waits for them), then cleared.
  LossSum take_loss();
  // One pass on a batch staged for it, loss returned (evaluation, tests): stage, pass, take_loss. There
  // must be no pass whose loss is not taken yet.
  LossSum forward_backward(const Batch& batch, const Tensor& grads, double grad_scale);
  // A forward alone, its loss returned; HeadRows::every leaves the logits of every token (generation).
  LossSum forward(const Batch& batch, HeadRows rows = HeadRows::labelled);
  // Progress of the backward passes that follow (empty: none reported): called after the LM head and final
  // norm, after each decoder layer (last to first) and after the embedding with the smallest flat offset
  // from which this pass writes no more gradients, so that data-parallel reduction of the gradients at or
  // after it can start (queued after the pass's work on the device's current stream). Non-increasing,
  // ending at 0.
  void set_backward_progress(std::function<void(int64_t first_final_offset)> fn) {
    backward_progress_ = std::move(fn);
  }
  // Shorthands for load_weights(params) and then the pass.
  LossSum forward_backward(const Batch& batch, const Tensor& params, const Tensor& grads, double grad_scale);
  LossSum forward(const Batch& batch, const Tensor& params, HeadRows rows = HeadRows::labelled);
  // The LM head and the loss run over chunks of at most logit_chunk_tokens(vocab) rows, so no
  // [tokens, vocab] buffer exists (at 32k tokens and a 128k vocabulary it would take 8 GiB in bf16): each
  // chunk's logits become its gradient in place, and the chunk's backward GEMMs run before the next
  // chunk's logits. The head's rows are the batch's tokens or, where gathered, its labelled tokens in token
  // order. A chunk's logits take up to 1.25 GiB in bf16 (2048 to 8192 rows, a power of two): every chunk
  // adds its share to the head's f32 weight gradient, a full read and write of it, so fewer and larger
  // chunks spend less on that traffic (GPT-2: 8192 rows; Llama 3 and Qwen's 152k vocabulary: 4096).
  static int64_t logit_chunk_tokens(int64_t vocab);
  // The logits' rows are padded to a multiple of 64 values: cuBLASLt's fast GEMM kernels need 16-byte
  // aligned rows, and with an odd vocabulary (GPT-2's 50257, BERT's 30522) the LM head's GEMMs otherwise
  // fall back to kernels several times slower. Such a head computes its logits and their input gradient
  // from a copy of its weight (and bias) padded alike with zero rows, refreshed whenever the weights are
  // loaded; the loss gives the padding a zero gradient.
  static int64_t logit_row_width(int64_t vocab) { return (vocab + 63) / 64 * 64; }
  // Whether the q/k/v projections run as one GEMM into a packed [T, (H + 2 Hkv) D] buffer that the rotation
  // takes q and k out of (and v is copied from): where k and v are narrower than q (GQA), whose own GEMMs
  // would be narrow, and no per-head norms sit in between (Qwen3's read buffers of their own).
  static bool packs_qkv(const ModelConfig& c) {
    return c.positions == Positions::rope && !c.qk_norm && c.num_key_value_heads < c.num_attention_heads;
  }
  // Whether the backward needs a buffer for the MLP activation's gradient: not where every layer can run
  // GPT-2's GELU in the GEMMs' epilogues (fused_gelu), whose backward goes from dx to dh directly.
  static bool keeps_activation_grad(const ModelConfig& config, bool sparse) {
    return config.mlp != Mlp::gelu || sparse;
  }
  // The logits of the last forward's final chunk (its head rows from the last multiple of logit_chunk_tokens
  // on), on the model's device in its dtype: [rows, logit_row_width(vocab)], the first vocab_size columns
  // of each row the logits; valid until the next pass, and forward_backward overwrites them with their
  // gradient. Head row r is token r's, or where the last pass gathered the labelled tokens (head_gathered),
  // the r-th labelled token's: the unlabelled tokens have none.
  Tensor logits() const;
  bool head_gathered() const { return in_.gathered; }
  // Head row r of the last forward's logits as f32 on the host, from any device (generation samples from
  // it); r must lie in the final chunk.
  void copy_logits_row(int64_t r, std::span<float> out) const;

 private:
  struct LayerActs {  // arena handles (-1: none)
    int resid_in = -1, mean1 = -1, rstd1 = -1, xn1 = -1, q = -1, k = -1, v = -1, attn = -1, lse = -1,
        mid = -1, mean2 = -1, rstd2 = -1, xn2 = -1, h = -1, act = -1;
    int q_pre = -1, k_pre = -1, rstd_q = -1, rstd_k = -1;  // per-head q/k norms: their inputs and rstd
    // Post-norm: the attention reads resid_in (no xn1), norm 1 takes mid to xn2 (the MLP's input and
    // residual), and norm 2 takes sum2 = xn2 + mlp(xn2) to the next layer's input.
    int sum2 = -1;
  };
  struct NormActs {  // a norm's input, output and statistics (mean only for LayerNorm)
    Tensor x, y, mean, rstd;
  };
  struct SparseFfn {  // one layer's sparse linears (disengaged: dense)
    std::optional<ops::SparseLinear> gate_up, down;
    std::optional<ops::SparseLinear>& at(FfnLinear which) {
      return which == FfnLinear::gate_up ? gate_up : down;
    }
  };
  struct SparsePlan {  // one sparse linear: where its weight lies in the flat layout
    size_t layer;
    FfnLinear which;
    int64_t offset, rows, cols;
    int slot;  // of its own masked copy in sparse_copy_ (models reading the masters in place), else -1
  };
  void build_sparse(const SparsityConfig& sparsity);
  static std::string sparse_name(const SparsePlan& w);
  // bf16 models: the sparse linears view their weights in `flat`, the working copy the passes read.
  void bind_sparse(const Tensor& flat);
  // With masks set: the sparse linears' weights masked from `source` (flat, layout order) and refreshed.
  void refresh_sparse(const Tensor& source);
  // The padded copy of the LM head's weight and bias from the working weights (see logit_row_width).
  void refresh_padded_head() const;
  // The layer's linear as it runs now: sparse while masks are set, else nullptr (dense).
  const ops::SparseLinear* sparse(size_t layer, FfnLinear which) const;
  // Whether the layer's MLP runs GPT-2's GELU in its GEMMs' epilogues (ops::linear_gelu_forward and
  // linear_dgelu_backward): the tanh GELU between two dense linears (the 2:4 sparse path keeps its own).
  bool fused_gelu(size_t layer) const;
  // Whether a sparse linear's dW of this T-token pass comes from the MVUE-pruned output gradient.
  bool mvue_dw(const ops::SparseLinear& s, const Tensor& dw, int64_t T) const;
  // Automatic dW: MVUE only where the dW GEMM runs sparse, which the first pass of a shape decides as it
  // runs.
  bool mvue_only_if_sparse() const { return weight_grad_ == WeightGrad::automatic; }
  // The pass's inputs: the staged batch's, acquired (its copy ordered before the pass's kernels).
  void begin_pass(const StagedBatch& batch);
  // The attention inputs of layer l for the pass's batch of T tokens.
  ops::AttentionParams attention_params(size_t l, int64_t T) const;
  // Layer l's per-head q/k norms (Qwen3) and the rotation after them, for the pass's batch of T tokens.
  ops::HeadNormRope head_norms(size_t l, int64_t T) const;
  // The pre-norm at weight offset w (bias b, -1 for none) as the config says: RMSNorm or LayerNorm.
  void norm_forward(const NormActs& n, int64_t w, int64_t b) const;
  // dy -> dx (overwritten, or added to: a pre-norm layer's residual gradient); the weight's (and bias's)
  // gradients added to the pass's. With dx_bias >= 0, also the gradient of that bias, added into the norm's
  // input (a post-norm layer's projection): dx's column sums, which LayerNorm takes in its own pass.
  void norm_backward(const Tensor& dy, const NormActs& n, int64_t w, int64_t b, const Tensor& dx,
                     ops::Write dx_mode = ops::Write::overwrite, int64_t dx_bias = -1) const;
  NormActs norm_acts(int x, int y, int mean, int rstd, int64_t T) const;
  // A layer's two norms (pre- or post-norm, see LayerActs); `next` is the following layer's input buffer.
  NormActs norm1_acts(size_t l, int64_t T) const;
  NormActs norm2_acts(size_t l, int64_t T) const;
  // The buffer a layer's output goes to: the next layer's input, or the final one's.
  int next_input(size_t l) const;
  // The head's input: the last layer's output, or its labelled rows gathered into dx, which the backward
  // writes only once the head's backward has read them.
  int head_in() const { return in_.gathered ? dx_ : final_in_; }
  // The final norm's acts over the head's `rows`: over the head transform's activation where there is one,
  // else the head's input.
  NormActs final_norm_acts(int64_t rows) const;
  // The n bias values from skip past weight offset b (an empty Tensor when b < 0: no bias), which
  // ops::linear_forward adds to every row; and a bias's gradient, the column sums of dy's first columns
  // (default: all; the logits' rows are padded).
  Tensor bias(int64_t b, int64_t n, int64_t skip = 0) const;
  void bias_grad(const Tensor& dy, int64_t b, int64_t columns = -1) const;
  void run_forward(int64_t T);
  // The embeddings summed (token, learned positions, token type 0) and normed where the config says so,
  // into layer 0's input; and their gradients from dx, that input's gradient (dtmp is scratch).
  void embed_forward(int64_t T);
  void embed_backward(const Tensor& dx, const Tensor& dtmp) const;
  // The head's input rows (gathered where the pass does), the head transform and the final norm, into xn_f;
  // and their backward from dxn, xn_f's gradient, to dx, the last layer's output's (overwritten).
  void head_forward();
  void head_backward(const Tensor& dx) const;
  // The head transform (dense + activation) from the head's input into the final norm's input; and its
  // backward from dy, the final norm's input gradient (clobbered), into dx (overwritten).
  void head_transform_forward(int64_t rows) const;
  void head_transform_backward(const Tensor& dy, const Tensor& dx) const;
  // Layer l's forward from its input; with add_to_next, also its output (the next layer's input).
  void layer_forward(size_t l, int64_t T, bool add_to_next);
  // The MLP's activation, SwiGLU or GELU, and its backward; with b >= 0 (the bias of the linear making h),
  // also that bias's gradient from dh (GELU's backward sums it in the same pass).
  void activation_forward(const Tensor& h, const Tensor& act) const;
  void activation_backward(const Tensor& dact, const Tensor& h, const Tensor& dh, int64_t b) const;
  // Layer l's q, k and v from its attention input, rotated (and normed, where the family has per-head norms);
  // one GEMM where packed.
  void qkv_forward(size_t l, int64_t T, const Tensor& attn_in) const;
  void separate_qkv_forward(size_t l, int64_t T, const Tensor& attn_in) const;
  // Layer l's q/k/v backward from attention's dq, dk and dv: the projections' input gradient into dattn_in
  // (written as dinput_mode says), their weight and bias gradients added; one GEMM each where packed.
  void qkv_backward(size_t l, int64_t T, const Tensor& attn_in, const Tensor& dattn_in,
                    ops::Write dinput_mode) const;
  void separate_qkv_backward(size_t l, int64_t T, const Tensor& attn_in, const Tensor& dattn_in,
                             ops::Write dinput_mode) const;
  // The LM head and the loss over the final norm's output, chunk by chunk, added to loss_sums_. With
  // backward, the head's backward too: dlogits in place of each chunk's logits, then dxn and the head's
  // weight gradient (added to the pass's).
  void head_and_loss(double grad_scale, bool backward);
  // The forward and backward of a begun pass into grads_, opening and closing blocks (nullptr: grads_.flat
  // takes them all).
  void forward_backward(double grad_scale, const GradientBlocks* blocks);
  // The gradient of the parameter at a flat offset, where the pass in progress adds it.
  Tensor grad(int64_t offset, std::initializer_list<int64_t> shape) const;
  void check_master(const char* what, const Tensor& t) const;
  // A parameter tensor inside a flat buffer (weights or gradients) at an element offset.
  static Tensor param(const Tensor& flat, int64_t offset, std::initializer_list<int64_t> shape);
  Tensor weight(int64_t offset, std::initializer_list<int64_t> shape) const {
    return param(weights_, offset, shape);
  }

  ModelConfig config_;
  ParameterLayout layout_;
  int64_t max_tokens_;
  DType dtype_;
  Arena arena_;        // activations and the loss sums
  Arena weight_copy_;  // the bf16 working copy load_weights casts into (bf16 models that load masters)
  Tensor own_copy_;    // its view, once allocated
  Tensor weights_;     // what the ops read: the masters in place, the own working copy or the caller's
  Arena sparse_copy_;  // masked copies of the sparse weights (models that read the masters in place)
  std::vector<SparsePlan> sparse_plan_;
  std::vector<SparseFfn> sparse_;       // per layer, when sparsity is configured
  const void* sparse_bound_ = nullptr;  // the flat buffer the bf16 sparse linears view
  const FfnMasks* masks_ = nullptr;
  MvueSeed mvue_seed_;
  std::function<void(int64_t)> backward_progress_;
  // Where the pass in progress adds gradients: one flat buffer, or the embeddings block's buffer and the
  // buffer of the block it is in (GradientBlocks).
  struct GradientTarget {
    Tensor flat, embeddings, block;
    int64_t block_begin = 0;
  } grads_;
  WeightGrad weight_grad_ = WeightGrad::dense;  // automatic: per shape (mvue_dw)
  Recompute recompute_ = Recompute::none;
  BatchInputs inputs_;
  BatchInputs::View in_;  // the current pass's inputs
  Tensor loss_sums_;      // f64 [2] on the device: loss_sum, tokens since the last take_loss
  int passes_pending_ = 0;
  std::vector<LayerActs> layers_;
  ops::RopeFrequencies rope_;  // the current pass's rotary (dynamic scaling depends on its positions)
  int final_in_, mean_f_ = -1, rstd_f_, xn_f_, logits_, loss_sums_slot_;
  int emb_sum_ = -1, emb_mean_ = -1, emb_rstd_ = -1;  // the embedding norm's input and statistics
  int head_h_ = -1, head_act_ = -1;                   // the head transform's dense output and activation
  int64_t logits_begin_ = 0;                          // the first head row of the chunk logits_ holds
  int padded_head_ = -1, padded_head_bias_ = -1;      // [logit_row_width, C] and [logit_row_width]
  int dx_, dtmp_, dxn_, dh_, dq_, dk_, dv_, dattn_, dact_ = -1;
  int qkv_ = -1;  // the packed q/k/v projection and, in the backward, its gradient (packs_qkv)
};

}  // namespace pt
