// The Llama decoder as a sequence of ops: embedding, per layer RMSNorm -> q/k/v -> RoPE -> varlen causal
// attention -> o_proj (+ residual), RMSNorm -> gate|up -> SwiGLU -> down (+ residual), final RMSNorm, LM
// head, cross-entropy. The model never names a backend: it hands tensor views on its arena's device to
// the ops, which dispatch. Activations for `max_tokens` tokens are sized once at construction.
#pragma once

#include "core/arena.h"
#include "core/tensor.h"
#include "data/packing/batch.h"
#include "model/config.h"
#include "model/parameters.h"

#include <cstdint>
#include <vector>

namespace pt {

struct LossSum {
  double loss_sum = 0;  // sum of -log p over targets
  int64_t tokens = 0;   // targets counted
};

// Targets aligned with the logits, from HF-convention labels: target[t] = labels[t + 1] within a row,
// -100 at the last token of every row (nothing follows it there).
std::vector<int32_t> shifted_targets(const Batch& batch);

class LlamaModel {
 public:
  // dtype f32 for training; f64 for gradient checks. device: where the activations live (the params and
  // grads tensors passed in must be on the same device).
  LlamaModel(const LlamaConfig& config, int64_t max_tokens, Device device = Device::cpu, DType dtype = DType::f32);

  const LlamaConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  int64_t max_tokens() const { return max_tokens_; }
  int64_t activation_bytes() const { return arena_.bytes(); }

  // Loss of one micro-batch; gradients of (loss_sum * grad_scale) are ADDED to grads (flat, layout order),
  // so micro-batches accumulate. grad_scale is 1 / (targets of the whole optimizer step).
  LossSum forward_backward(const Batch& batch, const Tensor& params, const Tensor& grads, double grad_scale);
  LossSum forward(const Batch& batch, const Tensor& params);
  // Logits [tokens, vocab] of the last forward (valid until the next call).
  Tensor logits() const;

 private:
  struct LayerActs {
    int resid_in, rstd1, xn1, q, k, v, attn, lse, mid, rstd2, xn2, h, act;
  };
  void upload(const Batch& batch);
  void run_forward(const Tensor& params, int64_t T);
  Tensor param(const Tensor& params, int64_t offset, std::initializer_list<int64_t> shape) const;
  Tensor act(int handle, int64_t T) const;  // the first T tokens of an activation buffer

  LlamaConfig config_;
  ParameterLayout layout_;
  int64_t max_tokens_;
  DType dtype_;
  Arena arena_;
  std::vector<LayerActs> layers_;
  int ids_, positions_, targets_, cu_seqlens_, valid_lens_, final_in_, rstd_f_, xn_f_, logits_;
  int dx_, dtmp_, dxn_, dact_, dh_, dq_, dk_, dv_, dattn_;
  int64_t segments_ = 0, tokens_ = 0;
  bool use_valid_lens_ = false;
};

}  // namespace pt
