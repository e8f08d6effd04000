// RMSNorm as in Llama: y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps) per token.
#pragma once

#include "core/tensor.h"
#include "ops/write_mode.h"

namespace pt::ops {

// x[T,C], weight[C] -> y[T,C], rstd[T] (kept for the backward).
void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd);

// dy[T,C] -> dx[T,C] and dweight[C], each overwritten or added to (dx: a pre-norm layer's residual gradient
// takes the norm's gradient in the same pass). dweight is reduced over
// tokens in token order per column, so it does not depend on the thread count.
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dx, Write dx_mode, const Tensor& dweight, Write dweight_mode);

}  // namespace pt::ops
