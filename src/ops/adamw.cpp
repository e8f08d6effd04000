#include "ops/adamw.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <fmt/format.h>

namespace pt::ops {

void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step) {
  if (step < 1)
    fail("adamw_step: step counts from 1 (bias correction divides by 1 - beta^step), got {}", step);
  if (!(config.beta1 >= 0 && config.beta1 < 1 && config.beta2 >= 0 && config.beta2 < 1))
    fail("adamw_step: betas must lie in [0, 1), got ({}, {})", config.beta1, config.beta2);
  if (tensors.empty()) return;
  ArgCheck a("adamw_step");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const AdamWTensor& t = tensors[i];
    const int64_t n = t.param.numel();
    // Shapes are compared by element count: the optimizer sees every tensor as a flat vector.
    for (const auto& [name, x] :
         {std::pair{"param", &t.param}, {"grad", &t.grad}, {"m", &t.m}, {"v", &t.v}}) {
      const std::string what = fmt::format("{} of tensor {}", name, i);
      if (x->numel() != n) fail("adamw_step: {} has {} elements, its param has {}", what, x->numel(), n);
      a.real(what.c_str(), Tensor(x->data, x->dtype, {n}, x->device), {n});
    }
  }
  switch (a.device()) {
    case Device::cpu:
      return cpu::adamw_step(tensors, config, step);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::adamw_step(tensors, config, step);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
