#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <cmath>
#include <numbers>

namespace pt::ops::cpu {

namespace {

// GELU with the tanh approximation (GPT-2's gelu_new): 0.5 h (1 + tanh u), u = sqrt(2/pi) (h + 0.044715 h^3).
struct TanhForm {
  static constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi, kCubic = 0.044715;
  template <class R>
  static R value(R h) {
    return R(0.5) * h * (R(1) + std::tanh(R(kSqrt2OverPi) * (h + R(kCubic) * h * h * h)));
  }
  // 0.5 (1 + tanh u) + 0.5 h (1 - tanh^2 u) sqrt(2/pi) (1 + 3 0.044715 h^2).
  template <class R>
  static R derivative(R h) {
    const R th = std::tanh(R(kSqrt2OverPi) * (h + R(kCubic) * h * h * h));
    const R du = R(kSqrt2OverPi) * (R(1) + R(3 * kCubic) * h * h);
    return R(0.5) * (R(1) + th) + R(0.5) * h * (R(1) - th * th) * du;
  }
};

// Exact GELU (BERT's gelu): h Phi(h), with the normal distribution function Phi(h) taken as
// 0.5 erfc(-h / sqrt 2), the same value without the cancellation of 1 + erf for negative h.
struct ErfForm {
  template <class R>
  static R cdf(R h) {
    return R(0.5) * std::erfc(-h * R(std::numbers::sqrt2 / 2));
  }
  template <class R>
  static R value(R h) {
    return h * cdf(h);
  }
  // Phi(h) + h phi(h), phi(h) = exp(-h^2 / 2) / sqrt(2 pi) the normal density.
  template <class R>
  static R derivative(R h) {
    return cdf(h) + h * std::exp(R(-0.5) * h * h) * R(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
  }
};

// Element by element, each read before it is written, so out may be h (and dh may be dout).
template <class Form>
void forward(const char* name, const Tensor& h, const Tensor& out) {
  dispatch_real(name, h.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* hp = h.ptr<R>();
    R* o = out.ptr<R>();
    parallel_for(h.numel(), cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) o[i] = Form::value(hp[i]);
    });
  });
}

template <class Form>
void backward(const char* name, const Tensor& dout, const Tensor& h, const Tensor& dh) {
  dispatch_real(name, h.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R *hp = h.ptr<R>(), *g = dout.ptr<R>();
    R* d = dh.ptr<R>();
    parallel_for(h.numel(), cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) d[i] = g[i] * Form::derivative(hp[i]);
    });
  });
}

}  // namespace

void gelu_forward(const Tensor& h, const Tensor& out) { forward<TanhForm>("gelu_forward", h, out); }

void gelu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  backward<TanhForm>("gelu_backward", dout, h, dh);
}

void gelu_erf_forward(const Tensor& h, const Tensor& out) { forward<ErfForm>("gelu_erf_forward", h, out); }

void gelu_erf_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  backward<ErfForm>("gelu_erf_backward", dout, h, dh);
}

}  // namespace pt::ops::cpu
