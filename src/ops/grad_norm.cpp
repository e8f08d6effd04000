#include "ops/grad_norm.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"

#include <cmath>

namespace pt::ops {

double global_norm(std::span<const Tensor> grads) {
  double sum = 0;
  for (const Tensor& g : grads) {
    ArgCheck a("global_norm");
    a.real("grad", Tensor(g.data, g.dtype, {g.numel()}, g.device), {g.numel()});
    switch (a.device()) {
      case Device::cpu:
        sum += cpu::sum_of_squares(g);
        continue;
      case Device::cuda:
        break;
    }
    a.unsupported_device();
  }
  return std::sqrt(sum);
}

double clip_grad_norm(std::span<const Tensor> grads, double max_norm) {
  if (!(max_norm > 0)) fail("clip_grad_norm: max_norm must be > 0, got {}", max_norm);
  const double norm = global_norm(grads);
  const double factor = max_norm / (norm + 1e-6);
  if (factor >= 1) return norm;
  for (const Tensor& g : grads) {
    switch (g.device) {
      case Device::cpu:
        cpu::scale(g, factor);
        continue;
      case Device::cuda:
        break;
    }
    fail("clip_grad_norm: no {} implementation in this build; run it on cpu", device_name(g.device));
  }
  return norm;
}

}  // namespace pt::ops
