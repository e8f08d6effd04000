#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"

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

}  // namespace pt::ops::cpu
