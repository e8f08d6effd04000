#include "ops/attention.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/attention.h"
#endif

namespace pt::ops {

namespace {

// Checks the inputs attention_forward reads; returns the argument checker for further outputs.
ArgCheck check_inputs(const char* op, const AttentionParams& p) {
  ArgCheck a(op);
  a.real("q", p.q, {-1, -1, -1});
  const int64_t T = p.q.size(0), H = p.q.size(1), D = p.q.size(2);
  a.real("k", p.k, {T, -1, D});
  const int64_t Hkv = p.k.size(1);
  if (Hkv == 0 || H % Hkv != 0) fail("{}: {} query heads cannot share {} kv heads evenly", op, H, Hkv);
  a.real("v", p.v, {T, Hkv, D}).ints("cu_seqlens", p.cu_seqlens, {-1});
  if (p.cu_seqlens.size(0) < 1) fail("{}: cu_seqlens needs at least one entry (0)", op);
  if (!p.valid_lens.empty()) a.ints("valid_lens", p.valid_lens, {p.cu_seqlens.size(0) - 1});
  if (p.softmax_scale < 0)
    fail("{}: softmax_scale must be > 0 (or 0 for 1/sqrt(D)), got {}", op, p.softmax_scale);
  if (p.window < 0) fail("{}: window must be >= 0 (0: no sliding window), got {}", op, p.window);
  if (p.window > 0 && !p.causal)
    fail("{}: a sliding window (window {}) needs causal attention; bidirectional takes window 0", op,
         p.window);
  a.real("out", p.out, {T, H, D});
  // lse is fp32 beside bf16 activations: the backward exponentiates scores minus lse, where bf16's three
  // significant digits would be percent-level errors.
  const DType lse_dtype = p.q.dtype == DType::bf16 ? DType::f32 : p.q.dtype;
  ArgCheck lse(op);
  lse.real("lse", p.lse, {H, T});
  if (p.lse.dtype != lse_dtype || lse.device() != a.device())
    fail("{}: lse must be {} on {} to go with {} q, got {}", op, dtype_name(lse_dtype),
         device_name(a.device()), dtype_name(p.q.dtype), p.lse.str());
  return a;
}

}  // namespace

void attention_forward(const AttentionParams& p) {
  ArgCheck a = check_inputs("attention_forward", p);
  switch (a.device()) {
    case Device::cpu:
      return cpu::attention_forward(p);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::attention_forward(p);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void attention_backward(const AttentionParams& p, const AttentionGrads& g) {
  ArgCheck a = check_inputs("attention_backward", p);
  a.real("dout", g.dout, {p.q.size(0), p.q.size(1), p.q.size(2)})
      .real("dq", g.dq, {p.q.size(0), p.q.size(1), p.q.size(2)});
  a.real("dk", g.dk, {p.k.size(0), p.k.size(1), p.k.size(2)})
      .real("dv", g.dv, {p.k.size(0), p.k.size(1), p.k.size(2)});
  switch (a.device()) {
    case Device::cpu:
      return cpu::attention_backward(p, g);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::attention_backward(p, g);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
