// AdamW as torch.optim.AdamW: decoupled weight decay (p -= lr * wd * p), bias-corrected moments.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <span>

namespace pt::ops {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// One parameter: master weights, gradient and both moments, all of one shape and dtype (f32 in training).
// The caller decides decay per tensor (Llama recipes leave norms and embeddings undecayed).
struct AdamWTensor {
  Tensor param, grad, m, v;
  bool decay = true;
};

// Updates every tensor in place. step is the 1-based count of optimizer steps including this one.
void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step);

}  // namespace pt::ops
