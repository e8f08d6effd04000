#include "ops/adamw.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/cuda_ops.h"
#endif

#include <fmt/format.h>

#include <cmath>

namespace pt::ops {

std::string_view moment_format_name(MomentFormat format) {
  switch (format) {
    case MomentFormat::f32:
      return "f32";
    case MomentFormat::bf16:
      return "bf16";
    case MomentFormat::q8:
      return "8bit";
  }
  return "?";
}

std::optional<MomentFormat> parse_moment_format(std::string_view name) {
  for (MomentFormat f : {MomentFormat::f32, MomentFormat::bf16, MomentFormat::q8})
    if (name == moment_format_name(f)) return f;
  return std::nullopt;
}

MomentFormat moment_format_of(DType moment_dtype) {
  switch (moment_dtype) {
    case DType::bf16:
      return MomentFormat::bf16;
    case DType::u8:
      return MomentFormat::q8;
    default:
      return MomentFormat::f32;
  }
}

DType moment_dtype(MomentFormat format) {
  switch (format) {
    case MomentFormat::bf16:
      return DType::bf16;
    case MomentFormat::q8:
      return DType::u8;
    default:
      return DType::f32;
  }
}

int64_t moment_bytes(MomentFormat format, int64_t numel) {
  const int64_t values = numel * dtype_size(moment_dtype(format));
  return format == MomentFormat::q8 ? values + quant_blocks(numel) * 4 : values;
}

namespace {

// The moments of tensor i: f32 ones as the parameters (f32 beside bf16 parameters), or bf16 or u8 ones
// beside f32 or bf16 parameters, the latter with their absmax tensors.
void check_moments(const AdamWTensor& t, size_t i, MomentFormat format) {
  const int64_t n = t.param.numel();
  const DType param = t.param.dtype;
  const DType want = format == MomentFormat::f32 && param != DType::bf16 ? param : moment_dtype(format);
  if (format != MomentFormat::f32 && param != DType::f32 && param != DType::bf16)
    fail("adamw_step: {} moments go with f32 or bf16 parameters, tensor {} has {} ones",
         moment_format_name(format), i, dtype_name(param));
  for (const auto& [name, x] : {std::pair{"m", &t.m}, {"v", &t.v}}) {
    if (moment_format_of(x->dtype) != format)
      fail("adamw_step: {} of tensor {} is {}, but the moments of every tensor must be {}", name, i,
           dtype_name(x->dtype), moment_format_name(format));
    if (x->dtype != want)
      fail("adamw_step: {} of tensor {} is {}, but {} moments beside {} parameters are {}", name, i,
           dtype_name(x->dtype), moment_format_name(format), dtype_name(param), dtype_name(want));
  }
  if (format != MomentFormat::q8) return;
  for (const auto& [name, x] : {std::pair{"m_absmax", &t.m_absmax}, {"v_absmax", &t.v_absmax}})
    if (x->dtype != DType::f32 || x->numel() != quant_blocks(n) || x->device != t.param.device)
      fail(
          "adamw_step: {} of tensor {} must be f32[{}] (a block of {} of its {} elements each) on {}, got {}",
          name, i, quant_blocks(n), kQuantBlock, n, device_name(t.param.device), x->str());
}

}  // namespace

void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step) {
  if (step < 1)
    fail("adamw_step: step counts from 1 (bias correction divides by 1 - beta^step), got {}", step);
  if (!(config.beta1 >= 0 && config.beta1 < 1 && config.beta2 >= 0 && config.beta2 < 1))
    fail("adamw_step: betas must lie in [0, 1), got ({}, {})", config.beta1, config.beta2);
  if (!(std::isfinite(config.grad_scale) && config.grad_scale > 0))
    fail("adamw_step: grad_scale must be finite and positive, got {}", config.grad_scale);
  if (tensors.empty()) return;
  ArgCheck a("adamw_step");
  const MomentFormat format = moment_format_of(tensors[0].m.dtype);
  const DType param_dtype = tensors[0].param.dtype;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const AdamWTensor& t = tensors[i];
    const int64_t n = t.param.numel();
    // One parameter dtype a call keeps the backends' dispatch per call, not per tensor.
    if (t.param.dtype != param_dtype)
      fail("adamw_step: param of tensor {} is {}, tensor 0's is {}; one call takes parameters of one dtype",
           i, dtype_name(t.param.dtype), dtype_name(param_dtype));
    if (param_dtype == DType::bf16 && t.grad.dtype != DType::f32)
      fail("adamw_step: grad of tensor {} is {}, but bf16 parameters take f32 gradients", i,
           dtype_name(t.grad.dtype));
    check_moments(t, i, format);
    if (!t.working.empty()) {
      if (param_dtype != DType::f32)
        fail("adamw_step: working of tensor {} takes the bf16 cast of f32 parameters, but its param is {}", i,
             dtype_name(param_dtype));
      if (t.working.dtype != DType::bf16 || t.working.numel() != n || t.working.device != t.param.device)
        fail("adamw_step: working of tensor {} must be bf16[{}] on {} as its param, got {}", i, n,
             device_name(t.param.device), t.working.str());
    }
    // Shapes are compared by element count: the optimizer sees every tensor as a flat vector.
    for (const auto& [name, x] :
         {std::pair{"param", &t.param}, {"grad", &t.grad}, {"m", &t.m}, {"v", &t.v}}) {
      const std::string what = fmt::format("{} of tensor {}", name, i);
      if (x->numel() != n) fail("adamw_step: {} has {} elements, its param has {}", what, x->numel(), n);
      const Tensor flat(x->data, x->dtype, {n}, x->device);
      if (x == &t.param)
        a.real(what.c_str(), flat, {n});
      else if (x == &t.grad || format == MomentFormat::f32)  // the parameters' dtype, or f32 beside bf16
        a.real_or_f32(what.c_str(), flat, {n});
      else if (x->device != a.device())
        fail("adamw_step: {} is on {}, the parameters on {}", what, device_name(x->device),
             device_name(a.device()));
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
