#include "ops/bias.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

void bias_add(const Tensor& y, const Tensor& bias) {
  ArgCheck a("bias_add");
  a.real("y", y, {-1, -1}).real_or_f32("bias", bias, {-1}).padded_rows("y", y, y.size(0), bias.size(0));
  switch (a.device()) {
    case Device::cpu:
      return cpu::bias_add(y, bias);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::bias_add(y, bias);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void bias_backward(const Tensor& dy, const Tensor& dbias, Write mode) {
  ArgCheck a("bias_backward");
  a.real("dy", dy, {-1, -1})
      .real_or_f32("dbias", dbias, {-1})
      .padded_rows("dy", dy, dy.size(0), dbias.size(0));
  switch (a.device()) {
    case Device::cpu:
      return cpu::bias_backward(dy, dbias, mode);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::bias_backward(dy, dbias, mode);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
