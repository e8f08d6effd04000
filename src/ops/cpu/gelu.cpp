#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <cmath>
#include <numbers>

namespace pt::ops::cpu {

namespace {

// u(h) = sqrt(2/pi) (h + 0.044715 h^3), the argument of the tanh.
constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi, kCubic = 0.044715;

template <class R>
R gelu_tanh_arg(R h) {
  return R(kSqrt2OverPi) * (h + R(kCubic) * h * h * h);
}

}  // namespace

// Element by element, each read before it is written, so out may be h.
void gelu_forward(const Tensor& h, const Tensor& out) {
  const int64_t n = h.numel();
  dispatch_real("gelu_forward", h.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* hp = h.ptr<R>();
    R* o = out.ptr<R>();
    parallel_for(n, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const R x = hp[i];
        o[i] = R(0.5) * x * (R(1) + std::tanh(gelu_tanh_arg(x)));
      }
    });
  });
}

// d gelu/dh = 0.5 (1 + tanh u) + 0.5 h (1 - tanh^2 u) sqrt(2/pi) (1 + 3 0.044715 h^2).
void gelu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  const int64_t n = h.numel();
  dispatch_real("gelu_backward", h.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R *hp = h.ptr<R>(), *g = dout.ptr<R>();
    R* d = dh.ptr<R>();
    parallel_for(n, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const R x = hp[i], th = std::tanh(gelu_tanh_arg(x));
        const R du = R(kSqrt2OverPi) * (R(1) + R(3 * kCubic) * x * x);
        d[i] = g[i] * (R(0.5) * (R(1) + th) + R(0.5) * x * (R(1) - th * th) * du);
      }
    });
  });
}

}  // namespace pt::ops::cpu

namespace pt::ops::cpu {

// 0.5 h (1 + erf(h / sqrt 2)) = h Phi(h), with Phi the standard normal distribution function, taken as
// 0.5 erfc(-h / sqrt 2): the same value without the cancellation of 1 + erf for negative h.
void gelu_erf_forward(const Tensor& h, const Tensor& out) {
  const int64_t n = h.numel();
  dispatch_real("gelu_erf_forward", h.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* hp = h.ptr<R>();
    R* o = out.ptr<R>();
    parallel_for(n, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const R x = hp[i];
        o[i] = R(0.5) * x * std::erfc(-x * R(std::numbers::sqrt2 / 2));
      }
    });
  });
}

// d gelu_erf/dh = Phi(h) + h phi(h), phi(h) = exp(-h^2 / 2) / sqrt(2 pi) the normal density.
void gelu_erf_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  const int64_t n = h.numel();
  dispatch_real("gelu_erf_backward", h.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R *hp = h.ptr<R>(), *g = dout.ptr<R>();
    R* d = dh.ptr<R>();
    parallel_for(n, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const R x = hp[i];
        const R cdf = R(0.5) * std::erfc(-x * R(std::numbers::sqrt2 / 2));
        const R pdf = std::exp(R(-0.5) * x * x) * R(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
        d[i] = g[i] * (cdf + x * pdf);
      }
    });
  });
}

}  // namespace pt::ops::cpu
