#include "ops/grad_norm.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <cmath>

namespace pt::ops {

namespace {

// All gradients on one device (each may have its own floating-point type); returns that device.
Device common_device(const char* op, std::span<const Tensor> grads) {
  Device device = Device::cpu;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    ArgCheck a(op);
    a.real("grad", Tensor(g.data, g.dtype, {g.numel()}, g.device), {g.numel()});
    if (i > 0 && g.device != device)
      fail("{}: gradient {} is on {} but earlier ones are on {}; keep all gradients on one device", op, i,
           device_name(g.device), device_name(device));
    device = g.device;
  }
  return device;
}

}  // namespace

double global_norm(std::span<const Tensor> grads) {
  if (common_device("global_norm", grads) == Device::cuda) {
#ifdef PACKTRAIN_CUDA
    return std::sqrt(cuda::sum_of_squares(grads));
#else
    fail("global_norm: no cuda implementation in this build; run it on cpu");
#endif
  }
  double sum = 0;
  for (const Tensor& g : grads) sum += cpu::sum_of_squares(g);
  return std::sqrt(sum);
}

double clip_grad_norm(std::span<const Tensor> grads, double max_norm) {
  if (!(max_norm > 0)) fail("clip_grad_norm: max_norm must be > 0, got {}", max_norm);
  const double norm = global_norm(grads);
  const double factor = max_norm / (norm + 1e-6);
  if (factor >= 1 || grads.empty()) return norm;
  if (grads[0].device == Device::cuda) {
#ifdef PACKTRAIN_CUDA
    cuda::scale(grads, factor);
#else
    fail("clip_grad_norm: no cuda implementation in this build; run it on cpu");
#endif
  } else {
    for (const Tensor& g : grads) cpu::scale(g, factor);
  }
  return norm;
}

namespace {

// The norm tensor of a deferred op: f64 [1] on the gradients' device, which it returns.
Device deferred_device(const char* op, std::span<const Tensor> grads, const Tensor& norm) {
  const Device device = grads.empty() ? norm.device : common_device(op, grads);
  if (norm.dtype != DType::f64 || norm.ndim != 1 || norm.shape[0] != 1 || norm.data == nullptr)
    fail("{}: norm must be an f64 tensor of shape [1], got {}", op, norm.str());
  if (norm.device != device)
    fail("{}: norm is on {} but the gradients are on {}; allocate it there", op, device_name(norm.device),
         device_name(device));
  return device;
}

}  // namespace

void clip_grad_norm_deferred(std::span<const Tensor> grads, double max_norm, const Tensor& norm) {
  if (!(max_norm > 0)) fail("clip_grad_norm_deferred: max_norm must be > 0, got {}", max_norm);
  if (deferred_device("clip_grad_norm_deferred", grads, norm) == Device::cuda) {
#ifdef PACKTRAIN_CUDA
    return cuda::clip_grad_norm_deferred(grads, max_norm, norm);
#else
    fail("clip_grad_norm_deferred: no cuda implementation in this build; run it on cpu");
#endif
  }
  norm.ptr<double>()[0] = clip_grad_norm(grads, max_norm);
}

void global_norm_deferred(std::span<const Tensor> grads, const Tensor& norm) {
  if (deferred_device("global_norm_deferred", grads, norm) == Device::cuda) {
#ifdef PACKTRAIN_CUDA
    return cuda::global_norm_deferred(grads, norm);
#else
    fail("global_norm_deferred: no cuda implementation in this build; run it on cpu");
#endif
  }
  norm.ptr<double>()[0] = global_norm(grads);
}

double clip_factor(double max_norm, double norm) {
  if (!(max_norm >= 0)) fail("clip_factor: max_norm must be 0 (no clipping) or positive, got {}", max_norm);
  if (max_norm == 0) return 1;
  const double factor = max_norm / (norm + 1e-6);
  return factor < 1 ? factor : 1;
}

}  // namespace pt::ops
