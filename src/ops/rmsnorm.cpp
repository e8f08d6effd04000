#include "ops/rmsnorm.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) {
  ArgCheck a("rmsnorm_forward");
  a.real("x", x, {-1, -1});
  const int64_t T = x.size(0), C = x.size(1);
  a.real_or_f32("weight", weight, {C}).real("y", y, {T, C}).real_or_f32("rstd", rstd, {T});
  if (!(eps >= 0)) fail("rmsnorm_forward: eps must be >= 0, got {}", eps);
  switch (a.device()) {
    case Device::cpu:
      return cpu::rmsnorm_forward(x, weight, eps, y, rstd);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::rmsnorm_forward(x, weight, eps, y, rstd);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dx, Write dx_mode, const Tensor& dweight, Write dweight_mode) {
  ArgCheck a("rmsnorm_backward");
  a.real("x", x, {-1, -1});
  const int64_t T = x.size(0), C = x.size(1);
  a.real("dy", dy, {T, C}).real_or_f32("weight", weight, {C}).real_or_f32("rstd", rstd, {T});
  a.real("dx", dx, {T, C}).real_or_f32("dweight", dweight, {C});
  switch (a.device()) {
    case Device::cpu:
      return cpu::rmsnorm_backward(dy, x, weight, rstd, dx, dx_mode, dweight, dweight_mode);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::rmsnorm_backward(dy, x, weight, rstd, dx, dx_mode, dweight, dweight_mode);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
