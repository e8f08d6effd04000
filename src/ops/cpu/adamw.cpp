#include "core/float16.h"
#include "core/parallel.h"
#include "ops/adamw_update.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"
#include "ops/quantize8.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace pt::ops::cpu {
namespace {

// The updated f32 parameter into the bf16 working copy, when the entry has one (ops::cast's rounding).
void write_working(bf16* working, int64_t i, float p) {
  if (working) working[i].bits = float_to_bf16(p);
}
void write_working(bf16*, int64_t, bf16) {}  // bf16 parameters have none (ops::adamw_step refuses it)
bf16* working_of(const AdamWTensor& t) { return t.working.empty() ? nullptr : t.working.ptr<bf16>(); }

// Moments in the parameters' dtype (f32 or f64).
void step_full(const AdamWTensor& t, const AdamWConfig& config, double bias1, double bias2) {
  dispatch_real("adamw_step", t.param.dtype, [&](auto tag) {
    using R = decltype(tag);
    R *p = t.param.ptr<R>(), *m = t.m.ptr<R>(), *v = t.v.ptr<R>();
    const R* g = t.grad.ptr<R>();
    bf16* working = working_of(t);
    const R b1 = R(config.beta1), b2 = R(config.beta2), eps = R(config.eps);
    const R decay = t.decay ? R(1 - config.lr * config.weight_decay) : R(1);
    const R step_size = R(config.lr / bias1), sqrt_bias2 = R(std::sqrt(bias2));
    parallel_for(t.param.numel(), cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const R gi = R(double(g[i]) * config.grad_scale);  // as a clip's scale in place wrote it
        p[i] *= decay;  // decoupled: the decay never passes through the moments
        m[i] = b1 * m[i] + (R(1) - b1) * gi;
        v[i] = b2 * v[i] + (R(1) - b2) * gi * gi;
        p[i] -= step_size * m[i] / (std::sqrt(v[i]) / sqrt_bias2 + eps);
        if constexpr (std::is_same_v<R, float>) write_working(working, i, p[i]);
      }
    });
  });
}

// f32 or bf16 storage widened for the f32 update, and narrowed back (bf16 moments to nearest even).
float widen(float x) { return x; }
float widen(bf16 x) { return bf16_to_float(x.bits); }
void narrow(float& to, float x) { to = x; }
void narrow(bf16& to, float x) { to.bits = float_to_bf16(x); }

// One element's update (adamw_update.h). f32 parameters are masters updated in place; bf16 ones are the
// weights themselves, rounded stochastically with the draws of their index in the flat parameter vector.
void update(const adamw_math::Scalars& s, float decay, float g, float& p, int64_t, float& m, float& v) {
  adamw_math::update(s, decay, g, p, m, v);
}
void update(const adamw_math::Scalars& s, float decay, float g, bf16& p, int64_t index, float& m, float& v) {
  float x = widen(p);
  adamw_math::update(s, decay, g, x, m, v);
  p.bits = adamw_math::round_bf16_stochastic(x, adamw_math::rounding_bits(s.rounding_key, index));
}

// Moments of M (f32 beside bf16 parameters, or bf16) element by element: widened, updated, narrowed.
template <class P, class M>
void step_elementwise(const AdamWTensor& t, const adamw_math::Scalars& s) {
  P* p = t.param.ptr<P>();
  const float* g = t.grad.ptr<float>();
  M *m = t.m.ptr<M>(), *v = t.v.ptr<M>();
  bf16* working = working_of(t);
  const float decay = t.decay ? s.decay : 1.0f;
  parallel_for(t.param.numel(), cpu_threads(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float mi = widen(m[i]), vi = widen(v[i]);
      update(s, decay, g[i], p[i], t.offset + i, mi, vi);
      write_working(working, i, p[i]);
      narrow(m[i], mi);
      narrow(v[i], vi);
    }
  });
}

// q8 moments, block by block (quantize8.h): decode, update in f32, take the new absmax, encode.
template <class P>
void step_q8(const AdamWTensor& t, const adamw_math::Scalars& s) {
  using namespace quant8;
  const float *sm = signed_map().data(), *um = unsigned_map().data();
  P* p = t.param.ptr<P>();
  const float* g = t.grad.ptr<float>();
  uint8_t *mc = t.m.ptr<uint8_t>(), *vc = t.v.ptr<uint8_t>();
  float *ma = t.m_absmax.ptr<float>(), *va = t.v_absmax.ptr<float>();
  bf16* working = working_of(t);
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
        update(s, decay, g[i], p[i], t.offset + i, m[j], v[j]);
        write_working(working, i, p[i]);
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
    const bool bf16_params = t.param.dtype == DType::bf16;
    switch (moment_format_of(t.m.dtype)) {
      case MomentFormat::f32:
        bf16_params ? step_elementwise<bf16, float>(t, s) : step_full(t, config, bias1, bias2);
        break;
      case MomentFormat::bf16:
        bf16_params ? step_elementwise<bf16, bf16>(t, s) : step_elementwise<float, bf16>(t, s);
        break;
      case MomentFormat::q8:
        bf16_params ? step_q8<bf16>(t, s) : step_q8<float>(t, s);
        break;
    }
  }
}

}  // namespace pt::ops::cpu
