// Global gradient norm and clipping, as torch.nn.utils.clip_grad_norm_ with the L2 norm.
#pragma once

#include "core/tensor.h"

#include <span>

namespace pt::ops {

// sqrt of the sum of squares of every element of every tensor, accumulated in double.
double global_norm(std::span<const Tensor> grads);

// Scales every gradient by min(1, max_norm / (norm + 1e-6)); returns the norm before clipping.
double clip_grad_norm(std::span<const Tensor> grads, double max_norm);

}  // namespace pt::ops
