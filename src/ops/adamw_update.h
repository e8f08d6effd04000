// The f32 AdamW update of one element for the bf16 and q8 moment formats (ops/adamw.h), shared by the cpu
// reference and the CUDA kernels. Every operation is rounded on its own (device code spells out the
// round-to-nearest intrinsics, so nvcc fuses no product into an FMA; the host build targets no FMA), so
// both backends give the same bits and hence the same moment codes. Usable from host and device code.
#pragma once

#include "ops/adamw.h"
#include "ops/counter_hash.h"

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define PT_ADAMW_HD __host__ __device__ __forceinline__
#else
#define PT_ADAMW_HD inline
#endif

namespace pt::ops::adamw_math {

struct Scalars {  // of one step, in f32
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps, decay, step_size, sqrt_bias2;
  uint32_t rounding_key;  // bf16 parameters: the step's part of the rounding draws
  double grad_scale;      // AdamWConfig::grad_scale
};

// The step's scalars as the f32 path computes them: the bias corrections in double, rounded once.
inline Scalars scalars_of(const AdamWConfig& c, int64_t step) {
  const double bias1 = 1 - std::pow(c.beta1, double(step)), bias2 = 1 - std::pow(c.beta2, double(step));
  const float beta1 = float(c.beta1), beta2 = float(c.beta2);
  return {beta1,
          beta2,
          1.0f - beta1,
          1.0f - beta2,
          float(c.eps),
          float(1 - c.lr * c.weight_decay),
          float(c.lr / bias1),
          float(std::sqrt(bias2)),
          static_cast<uint32_t>(mix64(c.seed ^ mix64(static_cast<uint64_t>(step)))),
          c.grad_scale};
}

// Stochastic rounding of bf16 parameters (no masters). x rounds to one of its two bf16 neighbours: adding
// 16 random bits below bf16's last mantissa bit and truncating rounds its magnitude up with probability
// (distance past the lower one) / (their spacing), so the rounded value equals x in expectation. Inf and
// NaN stay as they are. The bits of element `index` of the flat parameter vector hash the step's key and
// the index: the same on every backend and sharding, and again when a run resumes.
PT_ADAMW_HD uint32_t rounding_bits(uint32_t key, int64_t index) {
  const auto i = static_cast<uint64_t>(index);
  return mix32(mix32(key ^ static_cast<uint32_t>(i >> 32)) ^ static_cast<uint32_t>(i));
}

PT_ADAMW_HD uint16_t round_bf16_stochastic(float x, uint32_t bits) {
#ifdef __CUDA_ARCH__
  const uint32_t u = __float_as_uint(x);
#else
  uint32_t u;
  __builtin_memcpy(&u, &x, sizeof u);
#endif
  if ((u & 0x7f800000u) == 0x7f800000u)  // inf, or NaN kept NaN when truncating would clear its payload
    return static_cast<uint16_t>((u >> 16) | ((u & 0x007fffffu) ? 0x40u : 0u));
  return static_cast<uint16_t>((u + (bits & 0xffffu)) >> 16);  // a carry past the mantissa steps the exponent
}

PT_ADAMW_HD float mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
PT_ADAMW_HD float add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
PT_ADAMW_HD float div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
PT_ADAMW_HD float sqrt(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// The gradient g as stored, read scaled (AdamWConfig::grad_scale): the value a clip's scale in place
// wrote (double product, rounded to f32 once).
PT_ADAMW_HD float scaled(const Scalars& s, float g) {
  return static_cast<float>(static_cast<double>(g) * s.grad_scale);
}

// m and v updated from the gradient g (as stored; scaled here); then p decayed (decay: 1 for an undecayed
// tensor) and stepped, in the order of the f32 cpu backend.
PT_ADAMW_HD void update(const Scalars& s, float decay, float g, float& p, float& m, float& v) {
  g = scaled(s, g);
  m = add(mul(s.beta1, m), mul(s.one_minus_beta1, g));
  v = add(mul(s.beta2, v), mul(mul(s.one_minus_beta2, g), g));
  p = mul(p, decay);
  p = add(p, -div(mul(s.step_size, m), add(div(sqrt(v), s.sqrt_bias2), s.eps)));
}

}  // namespace pt::ops::adamw_math
