// GELU in its two forms:
// - with the tanh approximation, the activation of GPT-2's MLP (HF "gelu_new", "gelu_pytorch_tanh"):
//   gelu(h) = 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3)));
// - exact, with the error function, the activation of BERT's MLP and MLM head (HF "gelu", torch's default):
//   gelu_erf(h) = 0.5 h (1 + erf(h / sqrt(2))).
#pragma once

#include "core/tensor.h"
#include "ops/write_mode.h"

namespace pt::ops {

// h[T,F] -> out[T,F]; out may be h itself (in place).
void gelu_forward(const Tensor& h, const Tensor& out);

// dout[T,F], h[T,F] -> dh[T,F] (overwritten); dh may be dout (or h) itself. Given dbias[F] (dh's type, or
// f32 beside bf16 dh), also dbias (=|+=) dh summed over rows, as bias_backward(dh) would: the gradient of
// the bias the linear layer making h adds, taken in the same pass over dh.
void gelu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh, const Tensor& dbias = Tensor(),
                   Write dbias_mode = Write::accumulate);

// The exact form, with the same arguments.
void gelu_erf_forward(const Tensor& h, const Tensor& out);
void gelu_erf_backward(const Tensor& dout, const Tensor& h, const Tensor& dh, const Tensor& dbias = Tensor(),
                       Write dbias_mode = Write::accumulate);

}  // namespace pt::ops
