#include "core/float16.h"
#include "core/parallel.h"
#include "ops/adamw_update.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"
#include "ops/quantize8.h"

#include <algorithm>
#include <cmath>

namespace pt::ops::cpu {
namespace {

// Moments in the parameters' dtype (f32 or f64).
void step_full(const AdamWTensor& t, const AdamWConfig& config, double bias1, double bias2) {
  dispatch_real("adamw_step", t.param.dtype, [&](auto tag) {
    using R = decltype(tag);
    R *p = t.param.ptr<R>(), *m = t.m.ptr<R>(), *v = t.v.ptr<R>();
    const R* g = t.grad.ptr<R>();
    const R b1 = R(config.beta1), b2 = R(config.beta2), eps = R(config.eps);
    const R decay = t.decay ? R(1 - config.lr * config.weight_decay) : R(1);
    const R step_size = R(config.lr / bias1), sqrt_bias2 = R(std::sqrt(bias2));
    parallel_for(t.param.numel(), cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        p[i] *= decay;  // decoupled: the decay never passes through the moments
        m[i] = b1 * m[i] + (R(1) - b1) * g[i];
        v[i] = b2 * v[i] + (R(1) - b2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / sqrt_bias2 + eps);
      }
    });
  });
}

// bf16 moments: decoded, updated in f32, rounded to nearest even.
void step_bf16(const AdamWTensor& t, const adamw_math::Scalars& s) {
  float* p = t.param.ptr<float>();
  const float* g = t.grad.ptr<float>();
  bf16 *m = t.m.ptr<bf16>(), *v = t.v.ptr<bf16>();
  const float decay = t.decay ? s.decay : 1.0f;
  parallel_for(t.param.numel(), cpu_threads(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float mi = bf16_to_float(m[i].bits), vi = bf16_to_float(v[i].bits);
      adamw_math::update(s, decay, g[i], p[i], mi, vi);
      m[i].bits = float_to_bf16(mi);
      v[i].bits = float_to_bf16(vi);
    }
  });
}

// q8 moments, block by block (quantize8.h): decode, update in f32, take the new absmax, encode.
void step_q8(const AdamWTensor& t, const adamw_math::Scalars& s) {
  using namespace quant8;
  const float *sm = signed_map().data(), *um = unsigned_map().data();
  float* p = t.param.ptr<float>();
  const float* g = t.grad.ptr<float>();
  uint8_t *mc = t.m.ptr<uint8_t>(), *vc = t.v.ptr<uint8_t>();
  float *ma = t.m_absmax.ptr<float>(), *va = t.v_absmax.ptr<float>();
  const float decay = t.decay ? s.decay : 1.0f;
  const int64_t n = t.param.numel();
  parallel_for(quant_blocks(n), cpu_threads(), [&](int64_t first, int64_t last) {
    float m[kQuantBlock], v[kQuantBlock];
    for (int64_t b = first; b < last; ++b) {
      const int64_t begin = b * kQuantBlock, count = std::min(kQuantBlock, n - begin);
      float m_max = 0, v_max = 0;
      for (int64_t j = 0; j < count; ++j) {
        const int64_t i = begin + j;
        m[j] = decode(sm, mc[i], ma[b]);
        v[j] = decode(um, vc[i], va[b]);
        adamw_math::update(s, decay, g[i], p[i], m[j], v[j]);
        m_max = std::max(m_max, std::fabs(m[j]));
        v_max = std::max(v_max, v[j]);
      }
      ma[b] = m_max;
      va[b] = v_max;
      for (int64_t j = 0; j < count; ++j) {
        mc[begin + j] = encode(sm, kSignedCodes, kSignedZero, m[j], m_max);
        vc[begin + j] = encode(um, kUnsignedCodes, kUnsignedZero, v[j], v_max);
      }
    }
  });
}

}  // namespace

void adamw_step(std::span<const AdamWTensor> tensors, const AdamWConfig& config, int64_t step) {
  const double bias1 = 1 - std::pow(config.beta1, double(step));
  const double bias2 = 1 - std::pow(config.beta2, double(step));
  const adamw_math::Scalars s = adamw_math::scalars_of(config, step);
  for (const AdamWTensor& t : tensors) {
    switch (moment_format_of(t.m.dtype)) {
      case MomentFormat::f32:
        step_full(t, config, bias1, bias2);
        break;
      case MomentFormat::bf16:
        step_bf16(t, s);
        break;
      case MomentFormat::q8:
        step_q8(t, s);
        break;
    }
  }
}

}  // namespace pt::ops::cpu
