// LayerNorm with bias as in GPT-2 (torch.nn.LayerNorm): y = (x - mean) * rstd * weight + bias per token,
// with rstd = 1 / sqrt(var + eps) and the biased variance var = mean((x - mean)^2).
#pragma once

#include "core/tensor.h"
#include "ops/write_mode.h"

namespace pt::ops {

// x[T,C], weight[C], bias[C] -> y[T,C], mean[T] and rstd[T] (kept for the backward). weight and bias share
// one type: x's, or f32 beside bf16 x; so do mean and rstd.
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd);

// dy[T,C] -> dx[T,C] (overwritten, or added to: a pre-norm layer's residual gradient takes the norm's
// gradient in the same pass), dweight[C] and dbias[C] (overwritten or added to, sharing one type).
// Given dx_bias[C] (their type), also dx summed over rows as written, as bias_backward(dx) would, in
// param_mode: the gradient of a bias added into the norm's input x (a post-norm layer's projection
// before the residual sum), taken in the same pass. The sums are reduced over tokens in token order per
// column, so they do not depend on the thread count.
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, Write dx_mode, const Tensor& dweight,
                        const Tensor& dbias, Write param_mode, const Tensor& dx_bias = Tensor());

}  // namespace pt::ops
