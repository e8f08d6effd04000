// SwiGLU activation of the Llama FFN. The gate and up projections share one [T,2F] buffer, gate in the
// first half of each row and up in the second, so one fused kernel reads both halves of a row together.
#pragma once

#include "core/tensor.h"

namespace pt::ops {

// h[T,2F] -> out[T,F], out = silu(h[:, :F]) * h[:, F:], silu(g) = g * sigmoid(g).
void swiglu_forward(const Tensor& h, const Tensor& out);

// dout[T,F], h[T,2F] -> dh[T,2F] (overwritten).
void swiglu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh);

}  // namespace pt::ops
