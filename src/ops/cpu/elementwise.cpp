#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"

#include "core/float16.h"

namespace pt::ops::cpu {

void add(const Tensor& src, const Tensor& dst) {
  dispatch_real("add", dst.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* s = src.ptr<T>();
    T* d = dst.ptr<T>();
    const int64_t n = dst.numel();
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  });
}

void cast(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (src.dtype == DType::f32) {
    const float* s = src.ptr<float>();
    bf16* d = dst.ptr<bf16>();
    for (int64_t i = 0; i < n; ++i) d[i].bits = float_to_bf16(s[i]);
  } else {
    const bf16* s = src.ptr<bf16>();
    float* d = dst.ptr<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_float(s[i].bits);
  }
}

}  // namespace pt::ops::cpu
