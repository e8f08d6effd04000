#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <cmath>

namespace pt::ops::cpu {

void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step) {
  const double bias1 = 1 - std::pow(config.beta1, double(step));
  const double bias2 = 1 - std::pow(config.beta2, double(step));
  for (const AdamWTensor& t : tensors) {
    dispatch_real("adamw_step", t.param.dtype, [&](auto tag) {
      using R = decltype(tag);
      R *p = t.param.ptr<R>(), *m = t.m.ptr<R>(), *v = t.v.ptr<R>();
      const R* g = t.grad.ptr<R>();
      const R b1 = R(config.beta1), b2 = R(config.beta2), eps = R(config.eps);
      const R decay = t.decay ? R(1 - config.lr * config.weight_decay) : R(1);
      const R step_size = R(config.lr / bias1), sqrt_bias2 = R(std::sqrt(bias2));
      parallel_for(t.param.numel(), cpu_threads(), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          p[i] *= decay;  // decoupled: the decay never passes through the moments
          m[i] = b1 * m[i] + (R(1) - b1) * g[i];
          v[i] = b2 * v[i] + (R(1) - b2) * g[i] * g[i];
          p[i] -= step_size * m[i] / (std::sqrt(v[i]) / sqrt_bias2 + eps);
        }
      });
    });
  }
}

}  // namespace pt::ops::cpu
