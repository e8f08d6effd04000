#include "ops/linear.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/elementwise.h"
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

void linear_residual_forward(const Tensor& x, const Tensor& w, const Tensor& residual, const Tensor& y,
                             const Tensor& bias) {
  ArgCheck a("linear_residual_forward");
  a.real("x", x, {-1, -1});
  a.real("w", w, {-1, x.size(1)});
  const int64_t M = x.size(0), N = w.size(0);
  a.real("y", y, {M, N}).real("residual", residual, {M, N}).same_or_disjoint("residual", residual, "y", y);
  if (!bias.empty()) a.real_or_f32("bias", bias, {N});
  switch (a.device()) {
    case Device::cpu:  // the reference: the residual, then the product and bias added to it
      if (residual.data != y.data) copy(residual, y);
      cpu::linear_forward(x, w, y, Write::accumulate);
      if (!bias.empty()) cpu::bias_add(y, bias);
      return;
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::linear_residual_forward(x, w, residual, y, bias);
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

void linear_weight_grads(std::span<const Tensor> dy, const Tensor& x, std::span<const Tensor> dw,
                         Write mode) {
  ArgCheck a("linear_weight_grads");
  a.real("x", x, {-1, -1});
  if (dy.size() != dw.size() || dy.empty())
    fail("linear_weight_grads: {} output gradients for {} weight gradients; give one of each per layer",
         dy.size(), dw.size());
  const int64_t M = x.size(0), K = x.size(1), N = dw[0].size(0);
  for (size_t i = 0; i < dy.size(); ++i) {
    a.real("dy", dy[i], {M, N}).real_or_f32("dw", dw[i], {N, K});
    if (dw[i].dtype != dw[0].dtype)
      fail("linear_weight_grads: dw {} is {} but dw 0 is {}; use one type for all", i,
           dtype_name(dw[i].dtype), dtype_name(dw[0].dtype));
  }
  switch (a.device()) {
    case Device::cpu:
      // dw stands in for the weight, whose shape alone linear_backward reads when it makes no dx.
      for (size_t i = 0; i < dy.size(); ++i)
        cpu::linear_backward(dy[i], x, dw[i], Tensor(), mode, dw[i], mode);
      return;
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      return cuda::linear_weight_grads(dy, x, dw, mode);
#else
      break;
#endif
  }
  a.unsupported_device();
}

void linear_gelu_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& h,
                         const Tensor& act) {
  ArgCheck a("linear_gelu_forward");
  a.real("x", x, {-1, -1});
  a.real("w", w, {-1, x.size(1)});
  const int64_t M = x.size(0), N = w.size(0);
  a.real("h", h, {M, N}).real("act", act, {M, N}).disjoint("h", h, "act", act);
  if (!bias.empty()) a.real_or_f32("bias", bias, {N});
  switch (a.device()) {
    case Device::cpu:  // the reference: linear_forward then gelu_forward
      cpu::linear_forward(x, w, h, Write::overwrite);
      if (!bias.empty()) cpu::bias_add(h, bias);
      return cpu::gelu_forward(h, act);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      cuda::linear_gelu_forward(x, w, bias, h, act);
      return;
#else
      break;
#endif
  }
  a.unsupported_device();
}

void linear_dgelu_backward(const Tensor& dy, const Tensor& w, const Tensor& h, const Tensor& dh) {
  ArgCheck a("linear_dgelu_backward");
  a.real("h", h, {-1, -1});
  const int64_t M = h.size(0), K = h.size(1);
  a.real("w", w, {-1, K});
  a.padded_rows("dy", dy, M, w.size(0));
  a.real("dh", dh, {M, K}).disjoint("h", h, "dh", dh).disjoint("dy", dy, "dh", dh);
  switch (a.device()) {
    case Device::cpu:  // the reference: linear_backward's dx (h stands in for the layer's input, whose
                       // shape and type it has; with no dw its values are unread), then gelu_backward
      cpu::linear_backward(dy, h, w, dh, Write::overwrite, Tensor(), Write::overwrite);
      return cpu::gelu_backward(dh, h, dh);
    case Device::cuda:
#ifdef PACKTRAIN_CUDA
      cuda::linear_dgelu_backward(dy, w, h, dh);
      return;
#else
      break;
#endif
  }
  a.unsupported_device();
}

}  // namespace pt::ops
