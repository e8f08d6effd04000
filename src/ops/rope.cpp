#include "ops/rope.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace pt::ops {

RopeFrequencies RopeFrequencies::plain(int64_t head_dim, double theta) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    fail("RopeFrequencies::plain: head dim must be positive and even, got {}", head_dim);
  if (!(theta > 0) || !std::isfinite(theta))
    fail("RopeFrequencies::plain: rope theta must be > 0 and finite, got {}", theta);
  RopeFrequencies f;
  f.inv_freq.resize(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < f.inv_freq.size(); ++i)
    f.inv_freq[i] = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
  return f;
}

void check_frequencies(const char* op, int64_t head_dim, const RopeFrequencies& freq) {
  if (static_cast<int64_t>(freq.inv_freq.size()) != head_dim / 2)
    fail("{}: {} rope frequencies for head dim {}; need head_dim / 2 = {}", op, freq.inv_freq.size(),
         head_dim, head_dim / 2);
  for (size_t i = 0; i < freq.inv_freq.size(); ++i)
    if (!std::isfinite(freq.inv_freq[i])) fail("{}: rope frequency {} is {}", op, i, freq.inv_freq[i]);
  if (!std::isfinite(freq.attention_scale)) fail("{}: rope attention scale is {}", op, freq.attention_scale);
}

namespace {

// The checks of one tensor's rotation (forward or backward).
void check_rope(ArgCheck& a, const char* in_name, const Tensor& x, const Tensor& position_ids,
                const char* out_name, const Tensor& out) {
  a.real(in_name, x, {-1, -1, -1});
  a.ints("position_ids", position_ids, {x.size(0)}).real(out_name, out, {x.size(0), x.size(1), x.size(2)});
  if (x.size(2) % 2 != 0)
    fail("{}: head dim of {} must be even for rotate_half pairs, got {}", a.op(), in_name, x.size(2));
  a.same_or_disjoint(in_name, x, out_name, out);
}

void rope(const char* op, const Tensor& x, const Tensor& position_ids, const RopeFrequencies& freq, int sign,
          const Tensor& out) {
  ArgCheck a(op);
  check_rope(a, "input", x, position_ids, "output", out);
  check_frequencies(op, x.size(2), freq);
  switch (a.device()) {
    case Device::cpu:
      return cpu::rope_rotate(x, position_ids, freq, sign, out);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::rope_rotate(x, Tensor(), position_ids, freq, sign, out, Tensor());
#else
      break;
#endif
  }
  a.unsupported_device();
}

bool overlap(const Tensor& a, const Tensor& b) {
  const auto *pa = static_cast<const char*>(a.data), *pb = static_cast<const char*>(b.data);
  return pa < pb + b.bytes() && pb < pa + a.bytes();
}

// The cpu runs the per-tensor reference twice; cuda rotates both tensors in one launch.
void rope_qk(const char* op, const Tensor& q, const Tensor& k, const Tensor& position_ids,
             const RopeFrequencies& freq, int sign, const Tensor& q_out, const Tensor& k_out) {
  ArgCheck a(op);
  check_rope(a, "q", q, position_ids, "q output", q_out);
  check_rope(a, "k", k, position_ids, "k output", k_out);
  if (k.size(2) != q.size(2)) fail("{}: q and k head dims differ: {} and {}", op, q.size(2), k.size(2));
  check_frequencies(op, q.size(2), freq);
  if (overlap(q, k) || overlap(q_out, k_out) || overlap(q_out, k) || overlap(k_out, q))
    fail("{}: q and k (and their outputs) overlap one another; rotate them as separate buffers", op);
  switch (a.device()) {
    case Device::cpu:
      cpu::rope_rotate(q, position_ids, freq, sign, q_out);
      return cpu::rope_rotate(k, position_ids, freq, sign, k_out);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::rope_rotate(q, k, position_ids, freq, sign, q_out, k_out);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace

void rope_forward(const Tensor& x, const Tensor& position_ids, const RopeFrequencies& freq,
                  const Tensor& out) {
  rope("rope_forward", x, position_ids, freq, +1, out);
}

void rope_backward(const Tensor& dout, const Tensor& position_ids, const RopeFrequencies& freq,
                   const Tensor& dx) {
  rope("rope_backward", dout, position_ids, freq, -1, dx);
}

void rope_forward_qk(const Tensor& q, const Tensor& k, const Tensor& position_ids,
                     const RopeFrequencies& freq, const Tensor& q_out, const Tensor& k_out) {
  rope_qk("rope_forward_qk", q, k, position_ids, freq, +1, q_out, k_out);
}

void rope_backward_qk(const Tensor& dq_out, const Tensor& dk_out, const Tensor& position_ids,
                      const RopeFrequencies& freq, const Tensor& dq, const Tensor& dk) {
  rope_qk("rope_backward_qk", dq_out, dk_out, position_ids, freq, -1, dq, dk);
}

}  // namespace pt::ops
