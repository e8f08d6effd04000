#include "model/decoder.h"

#include "core/device.h"
#include "core/error.h"
#include "ops/attention.h"
#include "ops/bias.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/sparse24.h"
#include "ops/swiglu.h"

#include <algorithm>
#include <array>
#include <utility>

namespace pt {

using ops::Write;

namespace {

// The cpu backend computes in f32 or f64; the cuda one in bf16, with attention kernels for two head dims.
void check_precision(const ModelConfig& config, Device device, DType dtype) {
  if (device == Device::cpu && dtype != DType::f32 && dtype != DType::f64)
    fail("a cpu model computes in f32 or f64, not {}; use bf16 on cuda", dtype_name(dtype));
  if (device == Device::cuda) {
    if (dtype != DType::bf16)
      fail("a cuda model computes in bf16 (with f32 master weights), not {}; construct it with DType::bf16",
           dtype_name(dtype));
    if (config.head_dim != 64 && config.head_dim != 128)
      fail(
          "model config: head_dim {} is not supported on cuda, whose attention kernels handle head_dim 64 "
          "and 128; choose hidden_size / num_attention_heads (or head_dim) accordingly, or train on cpu",
          config.head_dim);
  }
}

// The config, validated and computable on the device in the dtype (before anything is allocated).
ModelConfig checked(const ModelConfig& config, Device device, DType dtype) {
  config.validate("model config");
  check_precision(config, device, dtype);
  return config;
}

}  // namespace

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "norms") return Recompute::norms_and_swiglu;
  if (name == "layers") return Recompute::layers;
  fail("unknown recompute mode \"{}\"; modes: none, norms, layers", name);
}

DecoderModel::DecoderModel(const ModelConfig& config, int64_t max_tokens, Device device, DType dtype,
                           const SparsityConfig& sparsity, Recompute recompute)
    : config_(checked(config, device, dtype)),
      layout_(config),
      max_tokens_(max_tokens),
      dtype_(dtype),
      arena_(device),
      weight_copy_(device),
      sparse_copy_(device),
      weight_grad_(sparsity.weight_grad_on(device)),
      recompute_(recompute),
      inputs_(device, max_tokens, config.vocab_size,
              config.positions == Positions::learned ? config.max_position_embeddings : 0,
              config.objective()) {
  const int64_t T = max_tokens, C = config.hidden_size, F = config.intermediate_size, D = config.head_dim;
  const int64_t U = config.mlp_up_rows();
  const bool layer_norm = config.norm == Norm::layer, qk_norm = config.qk_norm, post = config.post_norm;
  const int64_t H = config.num_attention_heads, Hkv = config.num_key_value_heads, V = config.vocab_size;
  // Per-token statistics (RMSNorm rstd, attention lse) are kept in the master dtype: f32 beside bf16.
  auto real = [&](std::initializer_list<int64_t> shape) { return arena_.reserve(dtype, shape); };
  auto stat = [&](std::initializer_list<int64_t> shape) { return arena_.reserve(master_dtype(), shape); };
  loss_sums_slot_ = arena_.reserve(DType::f64, {2});
  // The activations a layer keeps for the backward, or shares with every other layer where the backward
  // recomputes them right before use: the first layer reserves the shared buffer, the others name it.
  const bool all = recompute_ == Recompute::layers, norms = recompute_ == Recompute::norms_and_swiglu;
  LayerActs shared;
  const auto buffer = [](int& shared_handle, bool share, auto reserve) {
    if (!share) return reserve();
    if (shared_handle < 0) shared_handle = reserve();
    return shared_handle;
  };
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    LayerActs a;
    a.resid_in = real({T, C});
    if (layer_norm) a.mean1 = buffer(shared.mean1, all, [&] { return stat({T}); });
    a.rstd1 = buffer(shared.rstd1, all, [&] { return stat({T}); });
    if (!post) a.xn1 = buffer(shared.xn1, all || norms, [&] { return real({T, C}); });
    a.q = buffer(shared.q, all, [&] { return real({T, H, D}); });
    a.k = buffer(shared.k, all, [&] { return real({T, Hkv, D}); });
    a.v = buffer(shared.v, all, [&] { return real({T, Hkv, D}); });
    if (qk_norm) {
      a.q_pre = buffer(shared.q_pre, all, [&] { return real({T, H, D}); });
      a.k_pre = buffer(shared.k_pre, all, [&] { return real({T, Hkv, D}); });
      a.rstd_q = buffer(shared.rstd_q, all, [&] { return stat({T * H}); });
      a.rstd_k = buffer(shared.rstd_k, all, [&] { return stat({T * Hkv}); });
    }
    a.attn = buffer(shared.attn, all, [&] { return real({T, H, D}); });
    a.lse = buffer(shared.lse, all, [&] { return stat({H, T}); });
    a.mid = buffer(shared.mid, all, [&] { return real({T, C}); });
    if (layer_norm) a.mean2 = buffer(shared.mean2, all, [&] { return stat({T}); });
    a.rstd2 = buffer(shared.rstd2, all, [&] { return stat({T}); });
    // Recomputing the norms alone, xn1 and xn2 take turns in one buffer (post-norm: xn2 alone is shared).
    if (post) {
      a.xn2 = buffer(shared.xn2, all || norms, [&] { return real({T, C}); });
      a.sum2 = buffer(shared.sum2, all, [&] { return real({T, C}); });
    } else {
      a.xn2 = norms ? a.xn1 : buffer(shared.xn2, all, [&] { return real({T, C}); });
    }
    a.h = buffer(shared.h, all, [&] { return real({T, U}); });
    a.act = buffer(shared.act, all || norms, [&] { return real({T, F}); });
    layers_.push_back(a);
  }
  final_in_ = real({T, C});
  if (config.embedding_norm) {
    emb_sum_ = real({T, C});
    if (layer_norm) emb_mean_ = stat({T});
    emb_rstd_ = stat({T});
  }
  if (config.head_transform) {
    head_h_ = real({T, C});
    head_act_ = real({T, C});
  }
  if (layer_norm) mean_f_ = stat({T});
  rstd_f_ = stat({T});
  xn_f_ = real({T, C});
  const int64_t W = logit_row_width(V);
  logits_ = real({std::min(T, logit_chunk_tokens(V)), W});
  if (W != V) {
    padded_head_ = real({W, C});
    if (layout_.lm_head_bias() >= 0) padded_head_bias_ = real({W});
  }
  dx_ = real({T, C});
  dtmp_ = real({T, C});
  dxn_ = real({T, C});
  if (keeps_activation_grad(config, sparsity.enabled)) dact_ = real({T, F});
  dh_ = real({T, U});
  dq_ = real({T, H, D});
  dk_ = real({T, Hkv, D});
  dv_ = real({T, Hkv, D});
  dattn_ = real({T, H, D});
  if (packs_qkv(config)) qkv_ = real({T, (H + 2 * Hkv) * D});
  arena_.allocate();
  loss_sums_ = arena_.view(loss_sums_slot_);
  for (int padded : {padded_head_, padded_head_bias_}) {  // the padding rows stay 0; the rest is refreshed
    if (padded < 0) continue;
    const Tensor t = arena_.view(padded);
    zero_bytes(t.data, device == Device::cuda, static_cast<size_t>(t.bytes()));
  }
  if (sparsity.enabled) build_sparse(sparsity);
}

void DecoderModel::build_sparse(const SparsityConfig& sparsity) {
  const int64_t C = config_.hidden_size, F = config_.intermediate_size, U = config_.mlp_up_rows();
  // A bf16 model's sparse linears view their masked part of the working copy the passes read (bound with
  // it, bind_sparse); a model reading the masters in place gives them copies of their own, as the masters
  // stay dense.
  const bool own_copies = dtype_ == master_dtype();
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerParams& p = layout_.layer(static_cast<int>(l));
    for (FfnLinear which : {FfnLinear::gate_up, FfnLinear::down}) {
      if (!sparsity.sparse(which)) continue;
      const bool gate_up = which == FfnLinear::gate_up;
      SparsePlan w{l, which, gate_up ? p.w_up : p.w_down, gate_up ? U : C, gate_up ? C : F, -1};
      if (own_copies) w.slot = sparse_copy_.reserve(dtype_, {w.rows, w.cols});
      sparse_plan_.push_back(w);
    }
  }
  sparse_.resize(layers_.size());
  if (!own_copies) return;
  sparse_copy_.allocate();
  for (const SparsePlan& w : sparse_plan_)
    sparse_[w.layer].at(w.which).emplace(sparse_copy_.view(w.slot), max_tokens_, sparse_name(w));
}

std::string DecoderModel::sparse_name(const SparsePlan& w) {
  return fmt::format("layers.{}.mlp.{}_proj", w.layer, ffn_linear_name(w.which));
}

void DecoderModel::bind_sparse(const Tensor& flat) {
  if (dtype_ == master_dtype() || flat.data == sparse_bound_) return;
  // Rebuilt on a new buffer: cheap, as a SparseLinear compresses its weight only when first used after a
  // refresh.
  for (const SparsePlan& w : sparse_plan_)
    sparse_[w.layer].at(w.which).emplace(param(flat, w.offset, {w.rows, w.cols}), max_tokens_,
                                         sparse_name(w));
  sparse_bound_ = flat.data;
}

void DecoderModel::set_masks(const FfnMasks* masks) {
  if (masks) {
    if (sparse_.empty())
      fail("set_masks: this model has no sparse FFN linears; construct it with an enabled SparsityConfig");
    if (!masks->computed()) fail("set_masks: the 2:4 masks have not been computed yet");
    for (size_t l = 0; l < sparse_.size(); ++l)
      for (FfnLinear which : {FfnLinear::gate_up, FfnLinear::down}) {
        const Tensor* mask = masks->find(static_cast<int>(l), which);
        const bool planned = std::any_of(sparse_plan_.begin(), sparse_plan_.end(), [&](const SparsePlan& w) {
          return w.layer == l && w.which == which;
        });
        if (planned != (mask != nullptr) || (mask && mask->device != device()))
          fail("set_masks: the masks are not those of this model's sparse linears on {} (layer {}, {})",
               device_name(device()), l, ffn_linear_name(which));
      }
  }
  masks_ = masks;
}

const ops::SparseLinear* DecoderModel::sparse(size_t layer, FfnLinear which) const {
  if (!masks_) return nullptr;
  const SparseFfn& s = sparse_[layer];
  const auto& linear = which == FfnLinear::gate_up ? s.gate_up : s.down;
  return linear ? &*linear : nullptr;
}

bool DecoderModel::fused_gelu(size_t layer) const {
  return config_.mlp == Mlp::gelu && !sparse(layer, FfnLinear::gate_up) && !sparse(layer, FfnLinear::down);
}

bool DecoderModel::mvue_dw(const ops::SparseLinear& s, const Tensor& dw, int64_t T) const {
  return weight_grad_ == WeightGrad::mvue || (mvue_only_if_sparse() && s.weight_grad_sparse(T, dw.dtype));
}

Tensor DecoderModel::param(const Tensor& flat, int64_t offset, std::initializer_list<int64_t> shape) {
  return Tensor(static_cast<char*>(flat.data) + offset * dtype_size(flat.dtype), flat.dtype, shape,
                flat.device);
}

void DecoderModel::check_master(const char* what, const Tensor& t) const {
  if (t.numel() != layout_.total() || t.dtype != master_dtype() || t.device != device() || t.empty())
    fail("{} {} do not fit this model: it needs {}[{}]@{} (flat, in parameter layout order)", what, t.str(),
         dtype_name(master_dtype()), layout_.total(), device_name(device()));
}

void DecoderModel::load_weights(const Tensor& master_params) {
  check_master("master params", master_params);
  if (dtype_ == master_dtype()) {
    weights_ = master_params;
  } else {
    if (own_copy_.empty()) {  // the first load: a model given working weights only never allocates it
      const int slot = weight_copy_.reserve(dtype_, {layout_.total()});
      weight_copy_.allocate();
      own_copy_ = weight_copy_.view(slot);
    }
    weights_ = own_copy_;
    ops::cast(master_params, weights_);
    bind_sparse(weights_);
  }
  refresh_sparse(master_params);
  refresh_padded_head();
}

void DecoderModel::use_working_weights(const Tensor& weights) {
  if (weights.ndim != 1 || weights.numel() < layout_.total() || weights.dtype != dtype_ ||
      weights.device != device() || weights.empty())
    fail("working weights {} do not fit this model: it reads {}[{}]@{} (flat, in parameter layout order)",
         weights.str(), dtype_name(dtype_), layout_.total(), device_name(device()));
  weights_ = Tensor(weights.data, dtype_, {layout_.total()}, device());
  bind_sparse(weights_);
  refresh_sparse(weights_);
  refresh_padded_head();
}

void DecoderModel::refresh_padded_head() const {
  const int64_t V = config_.vocab_size, C = config_.hidden_size;
  if (padded_head_ >= 0)
    ops::copy(weight(layout_.lm_head(), {V, C}), param(arena_.view(padded_head_), 0, {V, C}));
  if (padded_head_bias_ >= 0)
    ops::copy(bias(layout_.lm_head_bias(), V), param(arena_.view(padded_head_bias_), 0, {V}));
}

void DecoderModel::refresh_sparse(const Tensor& source) {
  if (!masks_) return;
  for (const SparsePlan& w : sparse_plan_) {
    ops::SparseLinear& linear = *sparse_[w.layer].at(w.which);
    // A bf16 model's linear views its part of the caller's working copy, masked there already; other
    // linears get source * mask (masters, or a working copy whose masking this only repeats).
    const Tensor part = param(source, w.offset, {w.rows, w.cols});
    if (linear.weight().data != part.data)
      ops::apply_mask(part, *masks_->find(static_cast<int>(w.layer), w.which), linear.weight());
    linear.refresh();
  }
}

int64_t DecoderModel::logit_chunk_tokens(int64_t vocab) {
  int64_t tokens = 2048;
  while (tokens < 8192 && 2 * tokens * logit_row_width(vocab) * 2 <= (int64_t{5} << 28)) tokens *= 2;
  return tokens;
}

Tensor DecoderModel::logits() const {
  return arena_.view(logits_, {in_.head_rows - logits_begin_, logit_row_width(config_.vocab_size)});
}

void DecoderModel::copy_logits_row(int64_t r, std::span<float> out) const {
  const int64_t V = config_.vocab_size;
  const char* rows = in_.gathered ? "labelled tokens" : "tokens";
  if (r < 0 || r >= in_.head_rows)
    fail("copy_logits_row: row {} is outside the last batch's logits, a row for each of its {} {}", r,
         in_.head_rows, rows);
  if (r < logits_begin_)
    fail(
        "copy_logits_row: row {} is not in the final chunk of the logits (rows {} to {}), the only one the "
        "model keeps",
        r, logits_begin_, in_.head_rows - 1);
  if (static_cast<int64_t>(out.size()) != V)
    fail("copy_logits_row: the output holds {} values, the vocabulary has {}", out.size(), V);
  // The row's logits on the host in the model's dtype, then widened or narrowed to f32.
  const Tensor row = param(logits(), (r - logits_begin_) * logit_row_width(V), {V});
  std::vector<char> host(static_cast<size_t>(row.bytes()));
  copy_bytes(host.data(), false, row.data, row.device == Device::cuda, host.size());
  const Tensor host_row(host.data(), dtype_, {V});
  if (dtype_ == DType::f64)
    std::copy_n(host_row.ptr<double>(), V, out.begin());
  else
    ops::cast(host_row, Tensor::of(out.data(), {V}));
}

void DecoderModel::begin_pass(const StagedBatch& batch) {
  if (weights_.empty())
    fail("the model has no weights: call load_weights(master_params) or use_working_weights before a pass");
  in_ = inputs_.acquire(batch);
  if (config_.positions == Positions::rope)
    rope_ =
        rope_frequencies(config_.rope, config_.head_dim, config_.max_position_embeddings, in_.max_position);
}

ops::AttentionParams DecoderModel::attention_params(size_t l, int64_t T) const {
  const int64_t H = config_.num_attention_heads, Hkv = config_.num_key_value_heads, D = config_.head_dim;
  const LayerActs& a = layers_[l];
  ops::AttentionParams p{arena_.view(a.q, {T, H, D}),
                         arena_.view(a.k, {T, Hkv, D}),
                         arena_.view(a.v, {T, Hkv, D}),
                         in_.cu_seqlens,
                         in_.valid_lens,
                         arena_.view(a.attn, {T, H, D}),
                         arena_.view(a.lse, {H, T})};
  p.window = config_.window(static_cast<int>(l));
  p.causal = config_.causal;
  p.segments_checked = true;  // by BatchInputs::stage
  return p;
}

ops::HeadNormRope DecoderModel::head_norms(size_t l, int64_t T) const {
  const int64_t H = config_.num_attention_heads, Hkv = config_.num_key_value_heads, D = config_.head_dim;
  const LayerActs& a = layers_[l];
  const LayerParams& w = layout_.layer(static_cast<int>(l));
  ops::HeadNormRope p{arena_.view(a.q_pre, {T, H, D}),
                      arena_.view(a.k_pre, {T, Hkv, D}),
                      weight(w.q_norm, {D}),
                      weight(w.k_norm, {D}),
                      arena_.view(a.rstd_q, {T * H}),
                      arena_.view(a.rstd_k, {T * Hkv}),
                      in_.positions};
  if (config_.positions == Positions::rope) p.freq = &rope_;
  p.eps = config_.norm_eps;
  return p;
}

DecoderModel::NormActs DecoderModel::norm_acts(int x, int y, int mean, int rstd, int64_t T) const {
  const int64_t C = config_.hidden_size;
  return {arena_.view(x, {T, C}), arena_.view(y, {T, C}), mean < 0 ? Tensor() : arena_.view(mean, {T}),
          arena_.view(rstd, {T})};
}

int DecoderModel::next_input(size_t l) const {
  return l + 1 < layers_.size() ? layers_[l + 1].resid_in : final_in_;
}

DecoderModel::NormActs DecoderModel::norm1_acts(size_t l, int64_t T) const {
  const LayerActs& a = layers_[l];
  return config_.post_norm ? norm_acts(a.mid, a.xn2, a.mean1, a.rstd1, T)
                           : norm_acts(a.resid_in, a.xn1, a.mean1, a.rstd1, T);
}

DecoderModel::NormActs DecoderModel::norm2_acts(size_t l, int64_t T) const {
  const LayerActs& a = layers_[l];
  return config_.post_norm ? norm_acts(a.sum2, next_input(l), a.mean2, a.rstd2, T)
                           : norm_acts(a.mid, a.xn2, a.mean2, a.rstd2, T);
}

DecoderModel::NormActs DecoderModel::final_norm_acts(int64_t rows) const {
  return norm_acts(config_.head_transform ? head_act_ : head_in(), xn_f_, mean_f_, rstd_f_, rows);
}

void DecoderModel::norm_forward(const NormActs& n, int64_t w, int64_t b) const {
  const int64_t C = config_.hidden_size;
  if (config_.norm == Norm::layer)
    ops::layernorm_forward(n.x, weight(w, {C}), weight(b, {C}), config_.norm_eps, n.y, n.mean, n.rstd);
  else
    ops::rmsnorm_forward(n.x, weight(w, {C}), config_.norm_eps, n.y, n.rstd);
}

void DecoderModel::norm_backward(const Tensor& dy, const NormActs& n, int64_t w, int64_t b, const Tensor& dx,
                                 Write dx_mode, int64_t dx_bias) const {
  const int64_t C = config_.hidden_size;
  if (config_.norm == Norm::layer)
    return ops::layernorm_backward(dy, n.x, weight(w, {C}), n.mean, n.rstd, dx, dx_mode, grad(w, {C}),
                                   grad(b, {C}), Write::accumulate,
                                   dx_bias < 0 ? Tensor() : grad(dx_bias, {C}));
  ops::rmsnorm_backward(dy, n.x, weight(w, {C}), n.rstd, dx, dx_mode, grad(w, {C}), Write::accumulate);
  bias_grad(dx, dx_bias);
}

Tensor DecoderModel::bias(int64_t b, int64_t n, int64_t skip) const {
  return b < 0 ? Tensor() : weight(b + skip, {n});
}

void DecoderModel::bias_grad(const Tensor& dy, int64_t b, int64_t columns) const {
  if (b >= 0) ops::bias_backward(dy, grad(b, {columns < 0 ? dy.size(1) : columns}), Write::accumulate);
}

void DecoderModel::run_forward(int64_t T) {
  embed_forward(T);
  for (size_t l = 0; l < layers_.size(); ++l) layer_forward(l, T, /*add_to_next=*/true);
  head_forward();
}

void DecoderModel::embed_forward(int64_t T) {
  const auto& c = config_;
  const int64_t C = c.hidden_size, V = c.vocab_size;
  const int first_in = layers_.empty() ? final_in_ : layers_[0].resid_in;
  const Tensor sum = arena_.view(c.embedding_norm ? emb_sum_ : first_in, {T, C});
  ops::embedding_forward(in_.ids, weight(layout_.embedding(), {V, C}), sum, /*ids_checked=*/true);
  if (c.positions == Positions::learned) {  // + the positions' rows (dtmp is free until the backward)
    const Tensor pos = arena_.view(dtmp_, {T, C});
    ops::embedding_forward(in_.positions, weight(layout_.positions(), {c.max_position_embeddings, C}), pos,
                           /*ids_checked=*/true);
    ops::add(pos, sum);
  }
  // Every token is of type 0: the table's first row, added to each token as a bias is.
  if (layout_.token_types() >= 0) ops::bias_add(sum, weight(layout_.token_types(), {C}));
  if (c.embedding_norm)
    norm_forward(norm_acts(emb_sum_, first_in, emb_mean_, emb_rstd_, T), layout_.embedding_norm(),
                 layout_.embedding_norm_bias());
}

void DecoderModel::embed_backward(const Tensor& dx, const Tensor& dtmp) const {
  const auto& c = config_;
  const int64_t T = dx.size(0), C = c.hidden_size, V = c.vocab_size;
  Tensor dsum = dx;
  if (c.embedding_norm) {
    const int first_in = layers_.empty() ? final_in_ : layers_[0].resid_in;
    norm_backward(dx, norm_acts(emb_sum_, first_in, emb_mean_, emb_rstd_, T), layout_.embedding_norm(),
                  layout_.embedding_norm_bias(), dtmp);
    dsum = dtmp;
  }
  ops::embedding_backward(in_.ids, dsum, grad(layout_.embedding(), {V, C}), Write::accumulate,
                          /*ids_checked=*/true);
  if (c.positions == Positions::learned)
    ops::embedding_backward(in_.positions, dsum, grad(layout_.positions(), {c.max_position_embeddings, C}),
                            Write::accumulate, /*ids_checked=*/true);
  bias_grad(dsum, layout_.token_types());  // row 0 of the token-type table
}

void DecoderModel::head_forward() {
  const int64_t T = in_.tokens, rows = in_.head_rows, C = config_.hidden_size;
  if (rows == 0) return;  // a gathered batch without a labelled token
  // The labelled rows are a lookup of their token indices in the last layer's output.
  if (in_.gathered)
    ops::embedding_forward(in_.label_rows, arena_.view(final_in_, {T, C}), arena_.view(head_in(), {rows, C}),
                           /*ids_checked=*/true);
  if (config_.head_transform) head_transform_forward(rows);
  norm_forward(final_norm_acts(rows), layout_.final_norm(), layout_.final_norm_bias());
}

void DecoderModel::head_backward(const Tensor& dx) const {
  const int64_t rows = in_.head_rows, C = config_.hidden_size;
  const Tensor dxn = arena_.view(dxn_, {rows, C}), dtmp = arena_.view(dtmp_, {rows, C});
  // The gradient of the head's input: dx itself, or where gathered the labelled rows', in a buffer the
  // head's backward is done with by then, scattered into dx, whose other rows get zeros.
  const bool gather = in_.gathered;
  const Tensor dhead = !gather ? dx : config_.head_transform ? dxn : dtmp;
  if (rows > 0) {
    const NormActs n = final_norm_acts(rows);
    if (config_.head_transform) {
      norm_backward(dxn, n, layout_.final_norm(), layout_.final_norm_bias(), dtmp);
      head_transform_backward(dtmp, dhead);
    } else {
      norm_backward(dxn, n, layout_.final_norm(), layout_.final_norm_bias(), dhead);
    }
  }
  if (gather) ops::embedding_backward(in_.label_rows, dhead, dx, Write::overwrite, /*ids_checked=*/true);
}

void DecoderModel::head_transform_forward(int64_t rows) const {
  const int64_t C = config_.hidden_size;
  const Tensor h = arena_.view(head_h_, {rows, C});
  ops::linear_forward(arena_.view(head_in(), {rows, C}), weight(layout_.head_dense(), {C, C}), h,
                      Write::overwrite, bias(layout_.head_dense_bias(), C));
  activation_forward(h, arena_.view(head_act_, {rows, C}));
}

void DecoderModel::head_transform_backward(const Tensor& dy, const Tensor& dx) const {
  const int64_t rows = dy.size(0), C = config_.hidden_size;
  // In place: dy becomes the gradient of the dense's output.
  activation_backward(dy, arena_.view(head_h_, {rows, C}), dy, layout_.head_dense_bias());
  ops::linear_backward(dy, arena_.view(head_in(), {rows, C}), weight(layout_.head_dense(), {C, C}), dx,
                       Write::overwrite, grad(layout_.head_dense(), {C, C}), Write::accumulate);
}

void DecoderModel::layer_forward(size_t l, int64_t T, bool add_to_next) {
  const auto& c = config_;
  const int64_t C = c.hidden_size, F = c.intermediate_size, D = c.head_dim, U = c.mlp_up_rows();
  const int64_t H = c.num_attention_heads;
  const LayerActs& a = layers_[l];
  const LayerParams& w = layout_.layer(static_cast<int>(l));
  const bool post = c.post_norm;
  const NormActs n1 = norm1_acts(l, T), n2 = norm2_acts(l, T);
  const Tensor x = arena_.view(a.resid_in, {T, C});
  if (!post) norm_forward(n1, w.attn_norm, w.attn_norm_bias);
  const Tensor attn_in = post ? x : n1.y;
  if (packs_qkv(config_))
    qkv_forward(l, T, attn_in);
  else
    separate_qkv_forward(l, T, attn_in);
  ops::attention_forward(attention_params(l, T));
  const Tensor mid = arena_.view(a.mid, {T, C});
  ops::linear_residual_forward(arena_.view(a.attn, {T, H * D}), weight(w.wo, {C, H * D}), x, mid,
                               bias(w.bo, C));
  // The MLP, on xn2: norm 2 of mid (pre-norm) or norm 1 of it (post-norm).
  if (post)
    norm_forward(n1, w.attn_norm, w.attn_norm_bias);
  else
    norm_forward(n2, w.ffn_norm, w.ffn_norm_bias);
  const Tensor mlp_in = arena_.view(a.xn2, {T, C});
  const Tensor h = arena_.view(a.h, {T, U}), act = arena_.view(a.act, {T, F});
  if (fused_gelu(l)) {
    ops::linear_gelu_forward(mlp_in, weight(w.w_up, {U, C}), bias(w.b_up, U), h, act);
  } else {
    if (const ops::SparseLinear* s = sparse(l, FfnLinear::gate_up)) {
      s->forward(mlp_in, h, Write::overwrite);
      if (w.b_up >= 0) ops::bias_add(h, bias(w.b_up, U));
    } else {
      ops::linear_forward(mlp_in, weight(w.w_up, {U, C}), h, Write::overwrite, bias(w.b_up, U));
    }
    activation_forward(h, act);
  }
  // A post-norm layer's backward needs the statistics of its last norm, so recomputing it runs to the end,
  // rewriting the next layer's input with the values it holds.
  if (!add_to_next && !post) return;
  // The residual sum: the output itself (pre-norm) or what norm 2 takes to it (post-norm).
  const Tensor next = post ? n2.x : arena_.view(next_input(l), {T, C}), residual = post ? mlp_in : mid;
  if (const ops::SparseLinear* s = sparse(l, FfnLinear::down)) {
    ops::copy(residual, next);
    s->forward(act, next, Write::accumulate);
    if (w.b_down >= 0) ops::bias_add(next, bias(w.b_down, C));
  } else {
    ops::linear_residual_forward(act, weight(w.w_down, {C, F}), residual, next, bias(w.b_down, C));
  }
  if (post) norm_forward(n2, w.ffn_norm, w.ffn_norm_bias);
}

void DecoderModel::activation_forward(const Tensor& h, const Tensor& act) const {
  switch (config_.mlp) {
    case Mlp::swiglu:
      return ops::swiglu_forward(h, act);
    case Mlp::gelu:
      return ops::gelu_forward(h, act);
    case Mlp::gelu_erf:
      return ops::gelu_erf_forward(h, act);
  }
}

LossSum DecoderModel::forward(const Batch& batch, const Tensor& params, HeadRows rows) {
  load_weights(params);
  return forward(batch, rows);
}

LossSum DecoderModel::forward_backward(const Batch& batch, const Tensor& params, const Tensor& grads,
                                       double grad_scale) {
  load_weights(params);
  return forward_backward(batch, grads, grad_scale);
}

LossSum DecoderModel::forward(const Batch& batch, HeadRows rows) {
  if (passes_pending_ > 0) fail("forward: take_loss() the queued passes' loss first");
  const StagedBatch staged = inputs_.stage_now(batch, rows);
  begin_pass(staged);
  run_forward(in_.tokens);
  head_and_loss(1.0, /*backward=*/false);
  inputs_.release(staged);
  return take_loss();
}

LossSum DecoderModel::forward_backward(const Batch& batch, const Tensor& grads, double grad_scale) {
  if (passes_pending_ > 0) fail("forward_backward: take_loss() the queued passes' loss first");
  forward_backward(inputs_.stage_now(batch), grads, grad_scale);
  return take_loss();
}

void DecoderModel::head_and_loss(double grad_scale, bool backward) {
  const int64_t R = in_.head_rows, C = config_.hidden_size, V = config_.vocab_size;
  const int64_t W = logit_row_width(V);
  // The logits and dxn come from the head's rows padded to W (their zero rows add nothing), dW from the
  // head's own rows.
  const Tensor head = weight(layout_.lm_head(), {V, C});
  const Tensor padded_head = padded_head_ < 0 ? head : arena_.view(padded_head_, {W, C});
  const Tensor padded_bias =
      padded_head_bias_ < 0 ? bias(layout_.lm_head_bias(), V) : arena_.view(padded_head_bias_, {W});
  auto rows = [](const Tensor& t, int64_t begin, int64_t n) {
    return param(t, begin * t.shape[1], {n, t.shape[1]});
  };
  const Tensor xn = arena_.view(xn_f_, {R, C}), dxn = arena_.view(dxn_, {R, C});
  const int64_t chunk_rows = logit_chunk_tokens(V);
  logits_begin_ = 0;  // where there are no rows too
  for (int64_t r0 = 0; r0 < R; r0 += chunk_rows) {
    const int64_t n = std::min(chunk_rows, R - r0);
    logits_begin_ = r0;
    const Tensor x = rows(xn, r0, n), chunk = arena_.view(logits_, {n, W});
    ops::linear_forward(x, padded_head, chunk, Write::overwrite, padded_bias);
    ops::cross_entropy_accumulate(chunk, param(in_.targets, r0, {n}), grad_scale, backward ? chunk : Tensor(),
                                  loss_sums_, V);
    if (!backward) continue;
    bias_grad(chunk, layout_.lm_head_bias(), V);
    ops::linear_backward(chunk, x, padded_head, rows(dxn, r0, n), Write::overwrite, Tensor(),
                         Write::overwrite);
    ops::linear_backward(chunk, x, head, Tensor(), Write::overwrite, grad(layout_.lm_head(), {V, C}),
                         Write::accumulate);
  }
  ++passes_pending_;
}

LossSum DecoderModel::take_loss() {
  double sums[2] = {0, 0};
  copy_bytes(sums, false, loss_sums_.data, device() == Device::cuda, sizeof sums);
  zero_bytes(loss_sums_.data, device() == Device::cuda, sizeof sums);
  passes_pending_ = 0;
  return {sums[0], static_cast<int64_t>(sums[1])};
}

void DecoderModel::forward_backward(const StagedBatch& batch, const Tensor& grads, double grad_scale) {
  check_master("gradients", grads);
  begin_pass(batch);
  grads_ = {};
  grads_.flat = grads;
  forward_backward(grad_scale, nullptr);
  inputs_.release(batch);
}

void DecoderModel::forward_backward(const StagedBatch& batch, const GradientBlocks& blocks,
                                    double grad_scale) {
  begin_pass(batch);
  grads_ = {};
  forward_backward(grad_scale, &blocks);
  inputs_.release(batch);
}

Tensor DecoderModel::grad(int64_t offset, std::initializer_list<int64_t> shape) const {
  if (!grads_.flat.empty()) return param(grads_.flat, offset, shape);
  if (offset < layout_.layer_begin(0)) return param(grads_.embeddings, offset, shape);
  Tensor g = param(grads_.block, offset - grads_.block_begin, shape);
  PT_ASSERT(offset >= grads_.block_begin && offset - grads_.block_begin + g.numel() <= grads_.block.numel());
  return g;
}

void DecoderModel::forward_backward(double grad_scale, const GradientBlocks* blocks) {
  const int64_t T = in_.tokens;
  run_forward(T);
  const auto& c = config_;
  const int64_t C = c.hidden_size, F = c.intermediate_size, D = c.head_dim;
  const int64_t H = c.num_attention_heads, Hkv = c.num_key_value_heads, U = c.mlp_up_rows();
  Tensor dx = arena_.view(dx_, {T, C}), dtmp = arena_.view(dtmp_, {T, C}), dxn = arena_.view(dxn_, {T, C});

  // Backward runs through the layout's blocks from its end: the head (final norm, head transform, untied LM
  // head, its bias), the layers from the last, then the embeddings, which a tied LM head shares, so their
  // gradients are final only after embed_backward. Closing a block reports what follows it final.
  auto open = [&](int64_t begin, int64_t end) {
    if (!blocks) return;
    const Tensor g = blocks->open(begin, end);
    if (g.numel() != end - begin || g.dtype != master_dtype() || g.device != device())
      fail("gradient block [{}, {}): got {}, need {}[{}]@{}", begin, end, g.str(), dtype_name(master_dtype()),
           end - begin, device_name(device()));
    if (begin == 0)
      grads_.embeddings = g;
    else
      grads_.block = g, grads_.block_begin = begin;
  };
  auto close = [&](int64_t begin, int64_t end) {
    if (blocks) blocks->close(begin, end, begin == 0 ? grads_.embeddings : grads_.block);
    if (backward_progress_) backward_progress_(begin);
  };
  open(0, layout_.layer_begin(0));
  open(layout_.head_begin(), layout_.total());
  head_and_loss(grad_scale, /*backward=*/true);
  head_backward(dx);
  close(layout_.head_begin(), layout_.total());
  const bool post = c.post_norm;
  for (size_t l = layers_.size(); l-- > 0;) {
    const LayerActs& a = layers_[l];
    const int li = static_cast<int>(l);
    const LayerParams& w = layout_.layer(li);
    open(layout_.layer_begin(li), layout_.layer_begin(li + 1));
    const NormActs n1 = norm1_acts(l, T), n2 = norm2_acts(l, T);
    const Tensor x = arena_.view(a.resid_in, {T, C}), mlp_in = arena_.view(a.xn2, {T, C});
    // MLP: dx flows into the down projection and, unchanged, along the residual. A sparse linear's dW
    // comes from its MVUE-pruned output gradient: down's lands in dtmp (scratch here), since dx lives
    // on; the up projection's replaces dh, which nothing reads afterwards but its bias gradient,
    // taken before.
    const Tensor dact = dact_ >= 0 ? arena_.view(dact_, {T, F}) : Tensor(), dh = arena_.view(dh_, {T, U});
    const Tensor act = arena_.view(a.act, {T, F}), h = arena_.view(a.h, {T, U});
    // The last layer's activations are still those of the forward.
    if (recompute_ == Recompute::layers && l + 1 < layers_.size()) layer_forward(l, T, /*add_to_next=*/false);
    if (recompute_ == Recompute::norms_and_swiglu) {
      activation_forward(h, act);
      if (post)
        norm_forward(n1, w.attn_norm, w.attn_norm_bias);
      else
        norm_forward(n2, w.ffn_norm, w.ffn_norm_bias);
    }
    // Post-norm: dx goes through norm 2 first, to the residual sum's gradient, which becomes dx (the two
    // buffers trade places; dtmp stays scratch for the sparse down projection's pruned gradient).
    // The down projection's bias gradient is the residual sum's: norm 2's backward takes it (post-norm).
    if (post) {
      norm_backward(dx, n2, w.ffn_norm, w.ffn_norm_bias, dtmp, Write::overwrite, w.b_down);
      std::swap(dx, dtmp);
    } else {
      bias_grad(dx, w.b_down);
    }
    const Tensor dw_down = grad(w.w_down, {C, F}), dw_up = grad(w.w_up, {U, C});
    // Fused GELU: dh comes straight from dx through the down projection and the GELU (no dact).
    const bool fused = fused_gelu(l);
    if (const ops::SparseLinear* s = sparse(l, FfnLinear::down)) {
      s->backward(dx, act, dact, Write::overwrite, dw_down, Write::accumulate,
                  mvue_dw(*s, dw_down, T) ? dtmp : Tensor(),
                  mvue_seed_.at(static_cast<int>(l), FfnLinear::down), false, mvue_only_if_sparse());
    } else if (fused) {
      ops::linear_backward(dx, act, weight(w.w_down, {C, F}), Tensor(), Write::overwrite, dw_down,
                           Write::accumulate);
      ops::linear_dgelu_backward(dx, weight(w.w_down, {C, F}), h, dh);
    } else {
      ops::linear_backward(dx, act, weight(w.w_down, {C, F}), dact, Write::overwrite, dw_down,
                           Write::accumulate);
    }
    // The MLP's (and below, the q/k/v projections') input gradient: added to the residual's in dx
    // (post-norm, as norm 1 then takes their sum), or into dxn for the norm before it (pre-norm).
    const Write dinput_mode = post ? Write::accumulate : Write::overwrite;
    const Tensor dmlp_in = post ? dx : dxn;
    if (const ops::SparseLinear* s = sparse(l, FfnLinear::gate_up)) {
      // With MVUE dW, the activation's backward also prunes and packs dh for the sparse dW GEMM where it can.
      const bool mvue = mvue_dw(*s, dw_up, T);
      const uint64_t seed = mvue_seed_.at(static_cast<int>(l), FfnLinear::gate_up);
      const ops::Activation activation = c.mlp == Mlp::swiglu ? ops::Activation::swiglu
                                         : c.mlp == Mlp::gelu ? ops::Activation::gelu_tanh
                                                              : ops::Activation::gelu_erf;
      const bool packed = mvue ? s->activation_backward(activation, dact, h, dh, seed, dw_up.dtype)
                               : (activation_backward(dact, h, dh, w.b_up), false);
      if (mvue) bias_grad(dh, w.b_up);
      s->backward(dh, mlp_in, dmlp_in, dinput_mode, dw_up, Write::accumulate, mvue ? dh : Tensor(), seed,
                  packed, mvue_only_if_sparse());
    } else {
      if (fused)
        bias_grad(dh, w.b_up);
      else
        activation_backward(dact, h, dh, w.b_up);
      ops::linear_backward(dh, mlp_in, weight(w.w_up, {U, C}), dmlp_in, dinput_mode, dw_up,
                           Write::accumulate);
    }
    // dx becomes mid's gradient: through norm 2 plus the residual (pre-norm), or through norm 1 (post-norm,
    // into dxn, and the two buffers trade places).
    // (The output projection's bias gradient is mid's: norm 1's backward takes it, post-norm.)
    if (post) {
      norm_backward(dx, n1, w.attn_norm, w.attn_norm_bias, dxn, Write::overwrite, w.bo);
      std::swap(dx, dxn);
    } else {
      norm_backward(dxn, n2, w.ffn_norm, w.ffn_norm_bias, dx, Write::accumulate);
      bias_grad(dx, w.bo);
    }
    // Attention.
    const Tensor dq = arena_.view(dq_, {T, H, D}), dk = arena_.view(dk_, {T, Hkv, D}),
                 dv = arena_.view(dv_, {T, Hkv, D});
    ops::linear_backward(dx, arena_.view(a.attn, {T, H * D}), weight(w.wo, {C, H * D}),
                         arena_.view(dattn_, {T, H * D}), Write::overwrite, grad(w.wo, {C, H * D}),
                         Write::accumulate);
    ops::attention_backward(attention_params(l, T), {arena_.view(dattn_, {T, H, D}), dq, dk, dv});
    if (recompute_ == Recompute::norms_and_swiglu && !post) norm_forward(n1, w.attn_norm, w.attn_norm_bias);
    // Pre-norm: norm 1 takes the projections' input gradient and adds its own to dx.
    const Tensor attn_in = post ? x : n1.y, dattn_in = post ? dx : dxn;
    if (packs_qkv(config_))
      qkv_backward(l, T, attn_in, dattn_in, dinput_mode);
    else
      separate_qkv_backward(l, T, attn_in, dattn_in, dinput_mode);
    if (!post) norm_backward(dxn, n1, w.attn_norm, w.attn_norm_bias, dx, Write::accumulate);
    close(layout_.layer_begin(li), layout_.layer_begin(li + 1));
  }
  embed_backward(dx, dtmp);
  close(0, layout_.layer_begin(0));
}

void DecoderModel::qkv_forward(size_t l, int64_t T, const Tensor& attn_in) const {
  const auto& c = config_;
  const int64_t C = c.hidden_size, D = c.head_dim, H = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const int64_t P = (H + 2 * Hkv) * D;  // w.wq, w.wk and w.wv are one [P, C] weight, their biases one [P]
  const LayerActs& a = layers_[l];
  const LayerParams& w = layout_.layer(static_cast<int>(l));
  const Tensor qkv = arena_.view(qkv_, {T, P});
  ops::linear_forward(attn_in, weight(w.wq, {P, C}), qkv, Write::overwrite, bias(w.bqkv, P));
  ops::rope_forward_qkv(qkv, in_.positions, rope_, arena_.view(a.q, {T, H, D}), arena_.view(a.k, {T, Hkv, D}),
                        arena_.view(a.v, {T, Hkv, D}));
}

void DecoderModel::separate_qkv_forward(size_t l, int64_t T, const Tensor& attn_in) const {
  const auto& c = config_;
  const int64_t C = c.hidden_size, D = c.head_dim, H = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const LayerActs& a = layers_[l];
  const LayerParams& w = layout_.layer(static_cast<int>(l));
  // With per-head norms, the projections land in q_pre / k_pre and the norms write q / k.
  const Tensor q_lin = arena_.view(c.qk_norm ? a.q_pre : a.q, {T, H * D});
  const Tensor k_lin = arena_.view(c.qk_norm ? a.k_pre : a.k, {T, Hkv * D});
  const Tensor v_lin = arena_.view(a.v, {T, Hkv * D});
  ops::linear_forward(attn_in, weight(w.wq, {H * D, C}), q_lin, Write::overwrite, bias(w.bqkv, H * D));
  ops::linear_forward(attn_in, weight(w.wk, {Hkv * D, C}), k_lin, Write::overwrite,
                      bias(w.bqkv, Hkv * D, H * D));
  ops::linear_forward(attn_in, weight(w.wv, {Hkv * D, C}), v_lin, Write::overwrite,
                      bias(w.bqkv, Hkv * D, (H + Hkv) * D));
  const Tensor q = arena_.view(a.q, {T, H, D}), k = arena_.view(a.k, {T, Hkv, D});
  if (c.qk_norm)
    ops::head_norm_rope_forward(head_norms(l, T), q, k);
  else if (c.positions == Positions::rope)
    ops::rope_forward_qk(q, k, in_.positions, rope_, q, k);
}

void DecoderModel::qkv_backward(size_t l, int64_t T, const Tensor& attn_in, const Tensor& dattn_in,
                                Write dinput_mode) const {
  const auto& c = config_;
  const int64_t C = c.hidden_size, D = c.head_dim, H = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const int64_t P = (H + 2 * Hkv) * D;
  const LayerParams& w = layout_.layer(static_cast<int>(l));
  const Tensor dqkv = arena_.view(qkv_, {T, P});
  ops::rope_backward_qkv(arena_.view(dq_, {T, H, D}), arena_.view(dk_, {T, Hkv, D}),
                         arena_.view(dv_, {T, Hkv, D}), in_.positions, rope_, dqkv);
  bias_grad(dqkv, w.bqkv);
  ops::linear_backward(dqkv, attn_in, weight(w.wq, {P, C}), dattn_in, dinput_mode, grad(w.wq, {P, C}),
                       Write::accumulate);
}

void DecoderModel::separate_qkv_backward(size_t l, int64_t T, const Tensor& attn_in, const Tensor& dattn_in,
                                         Write dinput_mode) const {
  const auto& c = config_;
  const int64_t C = c.hidden_size, D = c.head_dim, H = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const LayerParams& w = layout_.layer(static_cast<int>(l));
  const Tensor dq = arena_.view(dq_, {T, H, D}), dk = arena_.view(dk_, {T, Hkv, D});
  // Back through the rotation, and the per-head norms where there are any (in place).
  if (c.qk_norm)
    ops::head_norm_rope_backward(head_norms(l, T), dq, dk, dq, dk, grad(w.q_norm, {D}), grad(w.k_norm, {D}));
  else if (c.positions == Positions::rope)
    ops::rope_backward_qk(dq, dk, in_.positions, rope_, dq, dk);
  const Tensor dq_lin = arena_.view(dq_, {T, H * D}), dk_lin = arena_.view(dk_, {T, Hkv * D});
  const Tensor dv_lin = arena_.view(dv_, {T, Hkv * D});
  if (c.qkv_bias) {
    bias_grad(dq_lin, w.bqkv);
    bias_grad(dk_lin, w.bqkv + H * D);
    bias_grad(dv_lin, w.bqkv + (H + Hkv) * D);
  }
  ops::linear_backward(dq_lin, attn_in, weight(w.wq, {H * D, C}), dattn_in, dinput_mode, Tensor(),
                       Write::accumulate);
  ops::linear_backward(dk_lin, attn_in, weight(w.wk, {Hkv * D, C}), dattn_in, Write::accumulate, Tensor(),
                       Write::accumulate);
  ops::linear_backward(dv_lin, attn_in, weight(w.wv, {Hkv * D, C}), dattn_in, Write::accumulate, Tensor(),
                       Write::accumulate);
  // The weights' gradients of the projections of one shape in one batched GEMM: q, k and v (MHA), or k
  // and v (GQA); their gradients, like dq, dk and dv, lie adjacent.
  const Tensor dwq = grad(w.wq, {H * D, C}), dwk = grad(w.wk, {Hkv * D, C}), dwv = grad(w.wv, {Hkv * D, C});
  if (H == Hkv) {
    ops::linear_weight_grads(std::array{dq_lin, dk_lin, dv_lin}, attn_in, std::array{dwq, dwk, dwv},
                             Write::accumulate);
  } else {
    ops::linear_backward(dq_lin, attn_in, weight(w.wq, {H * D, C}), Tensor(), Write::accumulate, dwq,
                         Write::accumulate);
    ops::linear_weight_grads(std::array{dk_lin, dv_lin}, attn_in, std::array{dwk, dwv}, Write::accumulate);
  }
}

void DecoderModel::activation_backward(const Tensor& dact, const Tensor& h, const Tensor& dh,
                                       int64_t b) const {
  const Tensor dbias = b < 0 ? Tensor() : grad(b, {dh.size(1)});
  switch (config_.mlp) {
    case Mlp::swiglu:
      ops::swiglu_backward(dact, h, dh);
      return bias_grad(dh, b);
    case Mlp::gelu:
      return ops::gelu_backward(dact, h, dh, dbias, Write::accumulate);
    case Mlp::gelu_erf:
      return ops::gelu_erf_backward(dact, h, dh, dbias, Write::accumulate);
  }
}

}  // namespace pt
