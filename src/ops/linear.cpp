#include "ops/linear.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

namespace pt::ops {

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& y, Write mode, const Tensor& bias) {
  ArgCheck a("linear_forward");
  a.real("x", x, {-1, -1});
  a.real("w", w, {-1, x.size(1)}).padded_rows("y", y, x.size(0), w.size(0));
  if (!bias.empty()) a.real_or_f32("bias", bias, {w.size(0)});
  switch (a.device()) {
    case Device::cpu:
      cpu::linear_forward(x, w, y, mode);
      if (!bias.empty()) cpu::bias_add(y, bias);  // over y's first N columns
      return;
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::linear_forward(x, w, y, mode, bias);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& dx, Write dx_mode,
                     const Tensor& dw, Write dw_mode) {
  ArgCheck a("linear_backward");
  a.real("x", x, {-1, -1});
  const int64_t M = x.size(0), K = x.size(1);
  a.real("w", w, {-1, K});
  a.padded_rows("dy", dy, M, w.size(0));
  if (!dx.empty()) a.real("dx", dx, {M, K});
  if (!dw.empty()) a.real_or_f32("dw", dw, {w.size(0), K});
  switch (a.device()) {
    case Device::cpu:
      return cpu::linear_backward(dy, x, w, dx, dx_mode, dw, dw_mode);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::linear_backward(dy, x, w, dx, dx_mode, dw, dw_mode);
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
