// Qwen3's per-head q/k RMSNorm and the rotary embedding after it, as one op: q = rope(rmsnorm(q_pre) w_q)
// and k alike, over rows of head_dim columns, one per (token, head). On CUDA one kernel does both, so q and
// k each cross memory once each way instead of three times (the norm's write, then the rotation's read and
// write); the cpu composes its rmsnorm and rope references.
#pragma once

#include "core/tensor.h"
#include "ops/rope.h"

namespace pt::ops {

// What both directions take. q_pre [T,H,D] and k_pre [T,Hkv,D] are the projections; q_weight and k_weight
// [D] the norms' weights (f32 or the activations' type); rstd_q [T*H] and rstd_k [T*Hkv] (f32) the norms'
// statistics, which the forward writes and the backward reads. freq null: the norms alone, no rotation.
struct HeadNormRope {
  Tensor q_pre, k_pre, q_weight, k_weight, rstd_q, rstd_k, position_ids;
  const RopeFrequencies* freq = nullptr;
  double eps = 0;
};

// -> q [T,H,D] and k [T,Hkv,D], and rstd_q, rstd_k.
void head_norm_rope_forward(const HeadNormRope& p, const Tensor& q, const Tensor& k);

// dq [T,H,D] and dk [T,Hkv,D], the gradients of the forward's q and k -> dq_pre and dk_pre (overwritten;
// dq_pre may be dq, dk_pre dk), and the weights' gradients dq_weight and dk_weight [D] (added to, reduced
// over rows in a fixed order).
void head_norm_rope_backward(const HeadNormRope& p, const Tensor& dq, const Tensor& dk, const Tensor& dq_pre,
                             const Tensor& dk_pre, const Tensor& dq_weight, const Tensor& dk_weight);

}  // namespace pt::ops
