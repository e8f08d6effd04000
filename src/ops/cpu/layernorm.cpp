#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <cmath>
#include <vector>

namespace pt::ops::cpu {

// The variance is summed around the mean (two passes over the row), which stays exact where the mean is
// large against the spread; the single-pass mean(x^2) - mean^2 would cancel.
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd) {
  const int64_t T = x.size(0), C = x.size(1);
  dispatch_real("layernorm_forward", x.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R *xp = x.ptr<R>(), *w = weight.ptr<R>(), *b = bias.ptr<R>();
    R *yp = y.ptr<R>(), *mu = mean.ptr<R>(), *rs = rstd.ptr<R>();
    parallel_for(T, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const R* xr = xp + t * C;
        double sum = 0;
        for (int64_t c = 0; c < C; ++c) sum += double(xr[c]);
        const double m = sum / double(C);
        double sum_sq = 0;
        for (int64_t c = 0; c < C; ++c) sum_sq += (double(xr[c]) - m) * (double(xr[c]) - m);
        const R mt = R(m), r = R(1.0 / std::sqrt(sum_sq / double(C) + eps));
        mu[t] = mt;
        rs[t] = r;
        for (int64_t c = 0; c < C; ++c) yp[t * C + c] = (xr[c] - mt) * r * w[c] + b[c];
      }
    });
  });
}

// With r = rstd, xhat = (x - mean) r and g = dy w: dx = r (g - mean(g) - xhat mean(g xhat)),
// dweight = sum over tokens of dy xhat, dbias = sum over tokens of dy.
void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, Write dx_mode, const Tensor& dweight,
                        const Tensor& dbias, Write param_mode) {
  const int64_t T = x.size(0), C = x.size(1);
  dispatch_real("layernorm_backward", x.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R *g = dy.ptr<R>(), *xp = x.ptr<R>(), *w = weight.ptr<R>(), *mu = mean.ptr<R>(),
            *rs = rstd.ptr<R>();
    R *dxp = dx.ptr<R>(), *dw = dweight.ptr<R>(), *db = dbias.ptr<R>();
    parallel_for(T, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const R *gr = g + t * C, *xr = xp + t * C;
        double sum_g = 0, sum_gx = 0;
        for (int64_t c = 0; c < C; ++c) {
          const double gw = double(gr[c]) * double(w[c]);
          sum_g += gw;
          sum_gx += gw * (double(xr[c]) - double(mu[t])) * double(rs[t]);
        }
        const R r = rs[t], mean_g = R(sum_g / double(C)), mean_gx = R(sum_gx / double(C));
        for (int64_t c = 0; c < C; ++c)
          dxp[t * C + c] = (dx_mode == Write::accumulate ? dxp[t * C + c] : R(0)) +
                           r * (gr[c] * w[c] - mean_g - (xr[c] - mu[t]) * r * mean_gx);
      }
    });
    // Columns split across threads: each column's sums run over tokens in order in one thread, then are
    // added to the old values once, so accumulating equals computing afresh and adding.
    parallel_for(C, cpu_threads(), [&](int64_t c0, int64_t c1) {
      const auto n = static_cast<size_t>(c1 - c0);
      std::vector<R> sum_w(n, R(0)), sum_b(n, R(0));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = c0; c < c1; ++c) {
          const R gc = g[t * C + c];
          sum_w[static_cast<size_t>(c - c0)] += gc * (xp[t * C + c] - mu[t]) * rs[t];
          sum_b[static_cast<size_t>(c - c0)] += gc;
        }
      const bool add = param_mode == Write::accumulate;
      for (int64_t c = c0; c < c1; ++c) {
        dw[c] = (add ? dw[c] : R(0)) + sum_w[static_cast<size_t>(c - c0)];
        db[c] = (add ? db[c] : R(0)) + sum_b[static_cast<size_t>(c - c0)];
      }
    });
  });
}

}  // namespace pt::ops::cpu
