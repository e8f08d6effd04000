// A bias added to every row of a linear layer's output (GPT-2's projections), and its gradient.
#pragma once

#include "core/tensor.h"
#include "ops/write_mode.h"

namespace pt::ops {

// y[M,N] += bias[N] on every row. bias is y's type, or f32 beside bf16 y. y (dy below) may be [M, >= N],
// rows padded past N as linear_forward allows; the columns past N are left alone (unread).
void bias_add(const Tensor& y, const Tensor& bias);

// dbias[N] = (or +=) the sum over rows of dy[M,N]. dbias is dy's type, or f32 beside bf16 dy. Each column
// is reduced over rows in a fixed order, so the result does not depend on the thread count.
void bias_backward(const Tensor& dy, const Tensor& dbias, Write mode);

}  // namespace pt::ops
