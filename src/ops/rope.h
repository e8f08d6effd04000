// Rotary position embedding, Hugging Face Llama convention ("rotate_half"): dimension i < D/2 is paired
// with i + D/2 and rotated by angle position * inv_freq[i]. Positions come per token, so they restart at
// every example of a packed row. Call once for q[T,H,D] and once for k[T,Hkv,D], or rotate both at once.
// The frequencies of HF's scaled rope types come from model/rope_scaling.h.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <vector>

namespace pt::ops {

// Pair i (< D/2) of a token at position p turns by the angle p * inv_freq[i]; cos and sin are multiplied
// by attention_scale (YaRN's mscale; 1 for the other types), as HF's rotary embedding does.
struct RopeFrequencies {
  std::vector<double> inv_freq;  // D/2 values
  double attention_scale = 1.0;
  static RopeFrequencies plain(int64_t head_dim, double theta);  // theta^(-2i/D), scale 1
};

// Fails, naming op, unless freq holds head_dim / 2 finite frequencies and a finite scale.
void check_frequencies(const char* op, int64_t head_dim, const RopeFrequencies& freq);

// x[T,N,D] (D even), position_ids[T] (i32, >= 0) -> out[T,N,D]. out may be x itself (in place).
// Angles, cos and sin are computed in double, then rounded to the tensor type.
void rope_forward(const Tensor& x, const Tensor& position_ids, const RopeFrequencies& freq,
                  const Tensor& out);

// The transposed (for scale 1, inverse) rotation, scaled alike: dout[T,N,D] -> dx[T,N,D]; dx may be dout.
void rope_backward(const Tensor& dout, const Tensor& position_ids, const RopeFrequencies& freq,
                   const Tensor& dx);

// q[T,H,D] and k[T,Hkv,D] rotated alike: the same results as rope_forward on each, in one CUDA launch
// that computes every token's angles once. Each output may be its input (in place); q and k, and the
// outputs, must not overlap one another.
void rope_forward_qk(const Tensor& q, const Tensor& k, const Tensor& position_ids,
                     const RopeFrequencies& freq, const Tensor& q_out, const Tensor& k_out);
void rope_backward_qk(const Tensor& dq_out, const Tensor& dk_out, const Tensor& position_ids,
                      const RopeFrequencies& freq, const Tensor& dq, const Tensor& dk);

// q, k and v side by side in each token's row, qkv[T, (H + 2 Hkv) D], as one GEMM of the three projections
// makes them: q[T,H,D] and k[T,Hkv,D] rotated out of it as rope_forward_qk rotates them, v[T,Hkv,D] copied.
// The backward packs dq and dk rotated back as rope_backward_qk does, and dv, into dqkv. The packed tensor
// shares no byte with the others.
void rope_forward_qkv(const Tensor& qkv, const Tensor& position_ids, const RopeFrequencies& freq,
                      const Tensor& q, const Tensor& k, const Tensor& v);
void rope_backward_qkv(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& position_ids,
                       const RopeFrequencies& freq, const Tensor& dqkv);

}  // namespace pt::ops
