// Global gradient norm and clipping, as torch.nn.utils.clip_grad_norm_ with the L2 norm.
#pragma once

#include "core/tensor.h"

#include <span>

namespace pt::ops {

// sqrt of the sum of squares of every element of every tensor, accumulated in double.
double global_norm(std::span<const Tensor> grads);

// Scales every gradient by min(1, max_norm / (norm + 1e-6)); returns the norm before clipping.
double clip_grad_norm(std::span<const Tensor> grads, double max_norm);

// As clip_grad_norm without waiting for the device: writes the norm before clipping to norm (f64 [1] on
// the gradients' device) and scales every gradient by min(1, max_norm / (norm + 1e-6)) on the device.
void clip_grad_norm_deferred(std::span<const Tensor> grads, double max_norm, const Tensor& norm);

// As global_norm without waiting for the device: writes the norm to norm (f64 [1] on the gradients'
// device). For a clip folded into the optimizer step: read the norm later, and scale by clip_factor there
// (AdamWConfig::grad_scale) instead of rewriting every gradient here.
void global_norm_deferred(std::span<const Tensor> grads, const Tensor& norm);

// The factor a clip to max_norm scales by, min(1, max_norm / (norm + 1e-6)), with the IEEE double division
// clip_grad_norm(_deferred) makes on either device, so the same bits. 1 for max_norm 0 (no clipping) or
// inf, and where the factor is not a number (a non-finite norm: the trainer skips that step).
double clip_factor(double max_norm, double norm);

}  // namespace pt::ops
