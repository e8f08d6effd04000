// GELU with the tanh approximation, the activation of GPT-2's MLP (HF "gelu_new", "gelu_pytorch_tanh"):
// gelu(h) = 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3))).
#pragma once

#include "core/tensor.h"

namespace pt::ops {

// h[T,F] -> out[T,F]; out may be h itself (in place).
void gelu_forward(const Tensor& h, const Tensor& out);

// dout[T,F], h[T,F] -> dh[T,F] (overwritten); dh may be dout (or h) itself.
void gelu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh);

}  // namespace pt::ops
