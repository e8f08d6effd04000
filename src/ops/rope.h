// Rotary position embedding, Hugging Face Llama convention ("rotate_half"): dimension i < D/2 is paired
// with i + D/2 and rotated by angle position * theta^(-2i/D). Positions come per token, so they restart
// at every example of a packed row. Call once for q[T,H,D] and once for k[T,Hkv,D], or rotate both at once.
#pragma once

#include "core/tensor.h"

namespace pt::ops {

// x[T,N,D] (D even), position_ids[T] (i32, >= 0) -> out[T,N,D]. out may be x itself (in place).
// Angles are computed in double, then rounded to the tensor type.
void rope_forward(const Tensor& x, const Tensor& position_ids, double theta, const Tensor& out);

// The inverse rotation: dout[T,N,D] -> dx[T,N,D]; dx may be dout itself.
void rope_backward(const Tensor& dout, const Tensor& position_ids, double theta, const Tensor& dx);

// q[T,H,D] and k[T,Hkv,D] rotated alike: the same results as rope_forward on each, in one CUDA launch
// that computes every token's angles once. Each output may be its input (in place); q and k, and the
// outputs, must not overlap one another.
void rope_forward_qk(const Tensor& q, const Tensor& k, const Tensor& position_ids, double theta,
                     const Tensor& q_out, const Tensor& k_out);
void rope_backward_qk(const Tensor& dq_out, const Tensor& dk_out, const Tensor& position_ids, double theta,
                      const Tensor& dq, const Tensor& dk);

}  // namespace pt::ops
