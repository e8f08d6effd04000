#include "ops/layernorm.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

namespace {

// The backends read both tensors of a pair (weight and bias, or their gradients) as one element type.
void same_type(const ArgCheck& a, const char* name, const Tensor& t, const char* other_name,
               const Tensor& other) {
  if (t.dtype != other.dtype)
    fail("{}: {} is {} but {} is {}; use one type for both", a.op(), name, dtype_name(t.dtype), other_name,
         dtype_name(other.dtype));
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd) {
  ArgCheck a("layernorm_forward");
  a.real("x", x, {-1, -1});
  const int64_t T = x.size(0), C = x.size(1);
  a.real_or_f32("weight", weight, {C}).real_or_f32("bias", bias, {C}).real("y", y, {T, C});
  a.real_or_f32("mean", mean, {T}).real_or_f32("rstd", rstd, {T});
  same_type(a, "weight", weight, "bias", bias);
  if (!(eps >= 0)) fail("layernorm_forward: eps must be >= 0, got {}", eps);
  switch (a.device()) {
    case Device::cpu:
      return cpu::layernorm_forward(x, weight, bias, eps, y, mean, rstd);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::layernorm_forward(x, weight, bias, eps, y, mean, rstd);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, Write dx_mode, const Tensor& dweight,
                        const Tensor& dbias, Write param_mode, const Tensor& dx_bias) {
  ArgCheck a("layernorm_backward");
  a.real("x", x, {-1, -1});
  const int64_t T = x.size(0), C = x.size(1);
  a.real("dy", dy, {T, C}).real_or_f32("weight", weight, {C});
  a.real_or_f32("mean", mean, {T}).real_or_f32("rstd", rstd, {T});
  a.real("dx", dx, {T, C}).real_or_f32("dweight", dweight, {C}).real_or_f32("dbias", dbias, {C});
  same_type(a, "dweight", dweight, "dbias", dbias);
  if (!dx_bias.empty()) {
    a.real_or_f32("dx_bias", dx_bias, {C});
    same_type(a, "dweight", dweight, "dx_bias", dx_bias);
  }
  switch (a.device()) {
    case Device::cpu:
      cpu::layernorm_backward(dy, x, weight, mean, rstd, dx, dx_mode, dweight, dbias, param_mode);
      if (!dx_bias.empty()) cpu::bias_backward(dx, dx_bias, param_mode);
      return;
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::layernorm_backward(dy, x, weight, mean, rstd, dx, dx_mode, dweight, dbias, param_mode,
                                      dx_bias);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
