#include "ops/rope.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>
#include <cstring>
#include <vector>

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

// The checks of the packed forms: q, k and v beside qkv, their rows side by side in its rows.
void check_qkv(ArgCheck& a, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& position_ids,
               const Tensor& qkv) {
  a.real("q", q, {-1, -1, -1});
  const int64_t T = q.size(0), D = q.size(2);
  a.real("k", k, {T, -1, D});
  a.real("v", v, {T, k.size(1), D}).ints("position_ids", position_ids, {T});
  a.real("qkv", qkv, {T, (q.size(1) + 2 * k.size(1)) * D});
  if (D % 2 != 0) fail("{}: head dim must be even for rotate_half pairs, got {}", a.op(), D);
  a.disjoint("qkv", qkv, "q", q).disjoint("qkv", qkv, "k", k).disjoint("qkv", qkv, "v", v);
}

// T rows of `width` elements from `from` (rows from_pitch apart, starting from_at in) to `to` (to_pitch,
// to_at): the cpu's moves between a packed q | k | v row and the tensors of its parts.
void copy_part(const Tensor& from, int64_t from_pitch, int64_t from_at, const Tensor& to, int64_t to_pitch,
               int64_t to_at, int64_t width) {
  const int64_t T = from.size(0), size = dtype_size(from.dtype);
  const auto* src = static_cast<const char*>(from.data) + from_at * size;
  auto* dst = static_cast<char*>(to.data) + to_at * size;
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(dst + t * to_pitch * size, src + t * from_pitch * size, static_cast<size_t>(width * size));
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

void rope_forward_qkv(const Tensor& qkv, const Tensor& position_ids, const RopeFrequencies& freq,
                      const Tensor& q, const Tensor& k, const Tensor& v) {
  ArgCheck a("rope_forward_qkv");
  check_qkv(a, q, k, v, position_ids, qkv);
  check_frequencies(a.op(), q.size(2), freq);
  switch (a.device()) {
    case Device::cpu: {  // the parts copied out, then q and k rotated in place
      const int64_t P = qkv.size(1), QD = q.size(1) * q.size(2), KD = k.size(1) * k.size(2);
      copy_part(qkv, P, 0, q, QD, 0, QD);
      copy_part(qkv, P, QD, k, KD, 0, KD);
      copy_part(qkv, P, QD + KD, v, KD, 0, KD);
      cpu::rope_rotate(q, position_ids, freq, +1, q);
      return cpu::rope_rotate(k, position_ids, freq, +1, k);
    }
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::rope_forward_qkv(qkv, position_ids, freq, q, k, v);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void rope_backward_qkv(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& position_ids,
                       const RopeFrequencies& freq, const Tensor& dqkv) {
  ArgCheck a("rope_backward_qkv");
  check_qkv(a, dq, dk, dv, position_ids, dqkv);
  check_frequencies(a.op(), dq.size(2), freq);
  switch (a.device()) {
    case Device::cpu: {  // dq and dk rotated back into scratch, then the parts copied in
      const int64_t P = dqkv.size(1), QD = dq.size(1) * dq.size(2), KD = dk.size(1) * dk.size(2);
      std::vector<char> rq(static_cast<size_t>(dq.bytes())), rk(static_cast<size_t>(dk.bytes()));
      const Tensor q(rq.data(), dq.dtype, {dq.size(0), dq.size(1), dq.size(2)});
      const Tensor k(rk.data(), dk.dtype, {dk.size(0), dk.size(1), dk.size(2)});
      cpu::rope_rotate(dq, position_ids, freq, -1, q);
      cpu::rope_rotate(dk, position_ids, freq, -1, k);
      copy_part(q, QD, 0, dqkv, P, 0, QD);
      copy_part(k, KD, 0, dqkv, P, QD, KD);
      return copy_part(dv, KD, 0, dqkv, P, QD + KD, KD);
    }
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::rope_backward_qkv(dq, dk, dv, position_ids, freq, dqkv);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
