#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <vector>

namespace pt::ops::cpu {

void bias_add(const Tensor& y, const Tensor& bias) {
  const int64_t M = y.size(0), N = bias.size(0), ld = y.size(1);
  dispatch_real("bias_add", y.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* b = bias.ptr<R>();
    R* yp = y.ptr<R>();
    parallel_for(M, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t m = begin; m < end; ++m)
        for (int64_t n = 0; n < N; ++n) yp[m * ld + n] += b[n];
    });
  });
}

// Columns split across threads: each column is summed by one thread in row order, then added to the old
// value once, so accumulating equals computing afresh and adding.
void bias_backward(const Tensor& dy, const Tensor& dbias, Write mode) {
  const int64_t M = dy.size(0), N = dbias.size(0), ld = dy.size(1);
  dispatch_real("bias_backward", dy.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* g = dy.ptr<R>();
    R* db = dbias.ptr<R>();
    parallel_for(N, cpu_threads(), [&](int64_t n0, int64_t n1) {
      std::vector<R> sum(static_cast<size_t>(n1 - n0), R(0));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = n0; n < n1; ++n) sum[static_cast<size_t>(n - n0)] += g[m * ld + n];
      for (int64_t n = n0; n < n1; ++n)
        db[n] = (mode == Write::accumulate ? db[n] : R(0)) + sum[static_cast<size_t>(n - n0)];
    });
  });
}

}  // namespace pt::ops::cpu
