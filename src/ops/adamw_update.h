// The f32 AdamW update of one element for the bf16 and q8 moment formats (ops/adamw.h), shared by the cpu
// reference and the CUDA kernels. Every operation is rounded on its own (device code spells out the
// round-to-nearest intrinsics, so nvcc fuses no product into an FMA; the host build targets no FMA), so
// both backends give the same bits and hence the same moment codes. Usable from host and device code.
#pragma once

#include "ops/adamw.h"

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
};

// The step's scalars as the f32 path computes them: the bias corrections in double, rounded once.
inline Scalars scalars_of(const AdamWConfig& c, int64_t step) {
  const double bias1 = 1 - std::pow(c.beta1, double(step)), bias2 = 1 - std::pow(c.beta2, double(step));
  const float beta1 = float(c.beta1), beta2 = float(c.beta2);
  return {beta1,         beta2,
          1.0f - beta1,  1.0f - beta2,
          float(c.eps),  float(1 - c.lr * c.weight_decay),
          float(c.lr / bias1), float(std::sqrt(bias2))};
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

// m and v updated from the gradient; then p decayed (decay: 1 for an undecayed tensor) and stepped, in
// the order of the f32 cpu backend.
PT_ADAMW_HD void update(const Scalars& s, float decay, float g, float& p, float& m, float& v) {
  m = add(mul(s.beta1, m), mul(s.one_minus_beta1, g));
  v = add(mul(s.beta2, v), mul(mul(s.one_minus_beta2, g), g));
  p = mul(p, decay);
  p = add(p, -div(mul(s.step_size, m), add(div(sqrt(v), s.sqrt_bias2), s.eps)));
}

}  // namespace pt::ops::adamw_math
