#include "ops/head_norm_rope.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

namespace {

// The shared inputs' checks; the tensors named after them must match q_pre's and k_pre's shapes.
ArgCheck check_inputs(const char* op, const HeadNormRope& p) {
  ArgCheck a(op);
  a.real("q_pre", p.q_pre, {-1, -1, -1});
  const int64_t T = p.q_pre.size(0), H = p.q_pre.size(1), D = p.q_pre.size(2);
  a.real("k_pre", p.k_pre, {T, -1, D});
  const int64_t Hkv = p.k_pre.size(1);
  a.real_or_f32("q_weight", p.q_weight, {D}).real_or_f32("k_weight", p.k_weight, {D});
  a.real_or_f32("rstd_q", p.rstd_q, {T * H}).real_or_f32("rstd_k", p.rstd_k, {T * Hkv});
  if (p.freq) {
    a.ints("position_ids", p.position_ids, {T});
    if (D % 2 != 0) fail("{}: head dim must be even for rotate_half pairs, got {}", op, D);
    check_frequencies(op, D, *p.freq);
  }
  if (!(p.eps >= 0)) fail("{}: eps must be >= 0, got {}", op, p.eps);
  return a;
}

}  // namespace

void head_norm_rope_forward(const HeadNormRope& p, const Tensor& q, const Tensor& k) {
  ArgCheck a = check_inputs("head_norm_rope_forward", p);
  a.real("q", q, {p.q_pre.size(0), p.q_pre.size(1), p.q_pre.size(2)});
  a.real("k", k, {p.k_pre.size(0), p.k_pre.size(1), p.k_pre.size(2)});
  a.disjoint("q_pre", p.q_pre, "q", q).disjoint("k_pre", p.k_pre, "k", k);
  switch (a.device()) {
    case Device::cpu:
      return cpu::head_norm_rope_forward(p, q, k);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::head_norm_rope_forward(p, q, k);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void head_norm_rope_backward(const HeadNormRope& p, const Tensor& dq, const Tensor& dk, const Tensor& dq_pre,
                             const Tensor& dk_pre, const Tensor& dq_weight, const Tensor& dk_weight) {
  ArgCheck a = check_inputs("head_norm_rope_backward", p);
  const int64_t T = p.q_pre.size(0), H = p.q_pre.size(1), Hkv = p.k_pre.size(1), D = p.q_pre.size(2);
  a.real("dq", dq, {T, H, D}).real("dk", dk, {T, Hkv, D});
  a.real("dq_pre", dq_pre, {T, H, D}).real("dk_pre", dk_pre, {T, Hkv, D});
  a.same_or_disjoint("dq", dq, "dq_pre", dq_pre).same_or_disjoint("dk", dk, "dk_pre", dk_pre);
  a.real_or_f32("dq_weight", dq_weight, {D}).real_or_f32("dk_weight", dk_weight, {D});
  switch (a.device()) {
    case Device::cpu:
      return cpu::head_norm_rope_backward(p, dq, dk, dq_pre, dk_pre, dq_weight, dk_weight);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::head_norm_rope_backward(p, dq, dk, dq_pre, dk_pre, dq_weight, dk_weight);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
