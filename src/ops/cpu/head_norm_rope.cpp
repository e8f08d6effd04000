#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"

namespace pt::ops::cpu {

namespace {

// x [T,N,D] seen as N T rows of D.
Tensor rows_of(const Tensor& x) { return x.reshape({x.size(0) * x.size(1), x.size(2)}); }

}  // namespace

// The reference composes the two ops it fuses: each norm, then the rotation in place.
void head_norm_rope_forward(const HeadNormRope& p, const Tensor& q, const Tensor& k) {
  rmsnorm_forward(rows_of(p.q_pre), p.q_weight, p.eps, rows_of(q), p.rstd_q);
  rmsnorm_forward(rows_of(p.k_pre), p.k_weight, p.eps, rows_of(k), p.rstd_k);
  if (!p.freq) return;
  rope_rotate(q, p.position_ids, *p.freq, +1, q);
  rope_rotate(k, p.position_ids, *p.freq, +1, k);
}

// Each gradient into a scratch copy, turned back by the transposed rotation there (dq stays as given unless
// dq_pre is dq), then each norm's backward.
void head_norm_rope_backward(const HeadNormRope& p, const Tensor& dq, const Tensor& dk, const Tensor& dq_pre,
                             const Tensor& dk_pre, const Tensor& dq_weight, const Tensor& dk_weight) {
  dispatch_real("head_norm_rope_backward", dq.dtype, [&](auto tag) {
    using R = decltype(tag);
    auto one = [&](const Tensor& d, const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dx,
                   const Tensor& dw) {
      std::vector<R> copy(d.ptr<R>(), d.ptr<R>() + d.numel());
      const Tensor dy = Tensor::of(copy.data(), {d.size(0), d.size(1), d.size(2)});
      if (p.freq) rope_rotate(d, p.position_ids, *p.freq, -1, dy);
      rmsnorm_backward(rows_of(dy), rows_of(x), w, rstd, rows_of(dx), Write::overwrite, dw,
                       Write::accumulate);
    };
    one(dq, p.q_pre, p.q_weight, p.rstd_q, dq_pre, dq_weight);
    one(dk, p.k_pre, p.k_weight, p.rstd_k, dk_pre, dk_weight);
  });
}

}  // namespace pt::ops::cpu
