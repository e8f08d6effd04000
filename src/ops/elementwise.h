// Whole-tensor copies and sums that glue ops together (residual stream, gradient paths).
#pragma once

#include "core/tensor.h"

namespace pt::ops {

void copy(const Tensor& src, const Tensor& dst);  // same shape, dtype and device
void add(const Tensor& src, const Tensor& dst);   // dst += src

}  // namespace pt::ops
