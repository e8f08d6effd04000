#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <cmath>

namespace pt::ops::cpu {

namespace {

template <class R>
R sigmoid(R g) {
  return R(1) / (R(1) + std::exp(-g));
}

}  // namespace

void swiglu_forward(const Tensor& h, const Tensor& out) {
  const int64_t T = h.size(0), F = h.size(1) / 2;
  dispatch_real("swiglu_forward", h.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* hp = h.ptr<R>();
    R* o = out.ptr<R>();
    parallel_for(T, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const R *gate = hp + t * 2 * F, *up = gate + F;
        for (int64_t f = 0; f < F; ++f) o[t * F + f] = gate[f] * sigmoid(gate[f]) * up[f];
      }
    });
  });
}

// d silu(g)/dg = s (1 + g (1 - s)) with s = sigmoid(g).
void swiglu_backward(const Tensor& dout, const Tensor& h, const Tensor& dh) {
  const int64_t T = h.size(0), F = h.size(1) / 2;
  dispatch_real("swiglu_backward", h.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R *hp = h.ptr<R>(), *dy = dout.ptr<R>();
    R* dhp = dh.ptr<R>();
    parallel_for(T, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const R *gate = hp + t * 2 * F, *up = gate + F, *g = dy + t * F;
        R *dgate = dhp + t * 2 * F, *dup = dgate + F;
        for (int64_t f = 0; f < F; ++f) {
          const R s = sigmoid(gate[f]);
          dgate[f] = g[f] * up[f] * s * (R(1) + gate[f] * (R(1) - s));
          dup[f] = g[f] * gate[f] * s;
        }
      }
    });
  });
}

}  // namespace pt::ops::cpu
