#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pt::ops::cpu {

void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& y, const Tensor& rstd) {
  const int64_t T = x.size(0), C = x.size(1);
  dispatch_real("rmsnorm_forward", x.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R *xp = x.ptr<R>(), *w = weight.ptr<R>();
    R *yp = y.ptr<R>(), *rs = rstd.ptr<R>();
    parallel_for(T, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const R* xr = xp + t * C;
        double sum_sq = 0;
        for (int64_t c = 0; c < C; ++c) sum_sq += double(xr[c]) * double(xr[c]);
        const R r = R(1.0 / std::sqrt(sum_sq / double(C) + eps));
        rs[t] = r;
        for (int64_t c = 0; c < C; ++c) yp[t * C + c] = xr[c] * r * w[c];
      }
    });
  });
}

// With r = rstd and y = x r w: dx = r (w dy - x r^2 mean(w dy x)), dw = sum over tokens of dy x r.
void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dx, Write dx_mode, const Tensor& dweight, Write dweight_mode) {
  const int64_t T = x.size(0), C = x.size(1);
  dispatch_real("rmsnorm_backward", x.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R *g = dy.ptr<R>(), *xp = x.ptr<R>(), *w = weight.ptr<R>(), *rs = rstd.ptr<R>();
    R *dxp = dx.ptr<R>(), *dw = dweight.ptr<R>();
    parallel_for(T, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const R *gr = g + t * C, *xr = xp + t * C;
        double dot = 0;
        for (int64_t c = 0; c < C; ++c) dot += double(gr[c]) * double(w[c]) * double(xr[c]);
        const R r = rs[t], coef = R(double(r) * double(r) * dot / double(C));
        for (int64_t c = 0; c < C; ++c)
          dxp[t * C + c] =
              (dx_mode == Write::accumulate ? dxp[t * C + c] : R(0)) + r * (w[c] * gr[c] - xr[c] * coef);
      }
    });
    // Columns split across threads: each dw[c] is summed by one thread in token order, then added to
    // the old value once, so accumulating equals computing afresh and adding.
    parallel_for(C, cpu_threads(), [&](int64_t c0, int64_t c1) {
      std::vector<R> sum(static_cast<size_t>(c1 - c0), R(0));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = c0; c < c1; ++c)
          sum[static_cast<size_t>(c - c0)] += g[t * C + c] * xp[t * C + c] * rs[t];
      for (int64_t c = c0; c < c1; ++c)
        dw[c] = (dweight_mode == Write::accumulate ? dw[c] : R(0)) + sum[static_cast<size_t>(c - c0)];
    });
  });
}

}  // namespace pt::ops::cpu
