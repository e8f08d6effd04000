// Whole-tensor copies, conversions and sums that glue ops together (residual stream, gradient paths,
// the bf16 working copy of fp32 master weights).
#pragma once

#include "core/tensor.h"

namespace pt::ops {

void copy(const Tensor& src, const Tensor& dst);  // same shape, dtype and device
void add(const Tensor& src, const Tensor& dst);   // dst += src
// dst = src converted element by element (same element count and device): f32 -> bf16 rounds to nearest
// even exactly as pt::float_to_bf16 does (NaN stays NaN), bf16 -> f32 is exact, equal types copy.
void cast(const Tensor& src, const Tensor& dst);

}  // namespace pt::ops
