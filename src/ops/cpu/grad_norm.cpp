#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"

namespace pt::ops::cpu {

// Serial on purpose: a fixed summation order keeps the norm bitwise reproducible, and it is memory bound.
double sum_of_squares(const Tensor& t) {
  double sum = 0;
  dispatch_real("global_norm", t.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* x = t.ptr<R>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) sum += double(x[i]) * double(x[i]);
  });
  return sum;
}

void scale(const Tensor& t, double factor) {
  dispatch_real("clip_grad_norm", t.dtype, [&](auto tag) {
    using R = decltype(tag);
    R* x = t.ptr<R>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) x[i] = R(double(x[i]) * factor);
  });
}

}  // namespace pt::ops::cpu
