#include "ops/adamw.h"

#include "core/float16.h"
#include "gradcheck.h"
#include "ops/adamw_update.h"
#include "ops/elementwise.h"
#include "ops/grad_norm.h"
#include "ops/quantize8.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <tuple>

namespace pt::ops {
namespace {

using testing::view;

// torch.optim.AdamW written out for one scalar.
struct ScalarAdamW {
  double p, m = 0, v = 0;
  void step(double g, const AdamWConfig& c, int64_t t, bool decay) {
    if (decay) p *= 1 - c.lr * c.weight_decay;
    m = c.beta1 * m + (1 - c.beta1) * g;
    v = c.beta2 * v + (1 - c.beta2) * g * g;
    const double m_hat = m / (1 - std::pow(c.beta1, double(t))),
                 v_hat = v / (1 - std::pow(c.beta2, double(t)));
    p -= c.lr * m_hat / (std::sqrt(v_hat) + c.eps);
  }
};

TEST(AdamW, FirstStepMovesEachWeightByLrTimesSign) {
  // With zero moments, step 1 gives m_hat = g and v_hat = g^2: the update is lr * g / (|g| + eps).
  AdamWConfig c{.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0};
  std::vector<double> p = {1.0, -1.0}, g = {0.5, -2.0}, m(2), v(2);
  std::vector<AdamWTensor> list = {{view(p, {2}), view(g, {2}), view(m, {2}), view(v, {2}), true}};
  adamw_step(list, c, 1);
  EXPECT_NEAR(p[0], 1.0 - 0.1, 1e-8);
  EXPECT_NEAR(p[1], -1.0 + 0.1, 1e-8);
  EXPECT_NEAR(m[0], 0.05, 1e-15);
  EXPECT_NEAR(v[1], 0.004, 1e-15);
}

TEST(AdamW, ThreeStepsMatchHandComputationWithPerTensorDecay) {
  AdamWConfig c{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1};
  std::vector<double> w = {0.3, -0.7, 1.2}, norm = {1.0, 0.9};
  std::vector<double> gw(3), gn(2), mw(3), vw(3), mn(2), vn(2);
  std::vector<ScalarAdamW> ref_w, ref_n;
  for (double x : w) ref_w.push_back({x});
  for (double x : norm) ref_n.push_back({x});
  std::vector<AdamWTensor> list = {{view(w, {3}), view(gw, {3}), view(mw, {3}), view(vw, {3}), true},
                                   {view(norm, {2}), view(gn, {2}), view(mn, {2}), view(vn, {2}), false}};
  for (int64_t step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < 3; ++i) gw[i] = 0.1 * double(step) - 0.2 * double(i);
    for (size_t i = 0; i < 2; ++i) gn[i] = -0.05 * double(step * (i + 1));
    adamw_step(list, c, step);
    for (size_t i = 0; i < 3; ++i) ref_w[i].step(gw[i], c, step, true);
    for (size_t i = 0; i < 2; ++i) ref_n[i].step(gn[i], c, step, false);
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(w[i], ref_w[i].p, 1e-14);
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(norm[i], ref_n[i].p, 1e-14);
}

TEST(AdamW, DecayIsDecoupledAndFollowsTheFlag) {
  // A zero gradient leaves the Adam update at 0, so only the decoupled decay p *= 1 - lr * wd remains.
  AdamWConfig c{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
  std::vector<double> a = {2.0}, b = {2.0}, zero(1), ma(1), va(1), mb(1), vb(1);
  std::vector<AdamWTensor> list = {{view(a, {1}), view(zero, {1}), view(ma, {1}), view(va, {1}), true},
                                   {view(b, {1}), view(zero, {1}), view(mb, {1}), view(vb, {1}), false}};
  adamw_step(list, c, 1);
  EXPECT_DOUBLE_EQ(a[0], 2.0 * (1 - 0.01 * 0.1));
  EXPECT_EQ(b[0], 2.0);
}

TEST(AdamW, RejectsStepZeroAndMismatchedSizes) {
  std::vector<float> p(3), g(2), m(3), v(3);
  std::vector<AdamWTensor> list = {{view(p, {3}), view(g, {2}), view(m, {3}), view(v, {3}), true}};
  EXPECT_THROW(adamw_step(list, {}, 1), Error);
  list[0].grad = view(p, {3});
  EXPECT_THROW(adamw_step(list, {}, 0), Error);
  EXPECT_NO_THROW(adamw_step(list, {}, 1));
}

// The moments of one tensor in a format, with their storage (what an optimizer allocates).
struct Moments {
  MomentFormat format;
  int64_t n;
  std::vector<float> m32, v32;
  std::vector<bf16> m16, v16;
  std::vector<uint8_t> mc, vc;
  std::vector<float> ma, va;

  Moments(MomentFormat f, int64_t size) : format(f), n(size) {
    const auto un = static_cast<size_t>(n);
    if (f == MomentFormat::f32) m32.resize(un), v32.resize(un);
    if (f == MomentFormat::bf16) m16.resize(un), v16.resize(un);
    if (f == MomentFormat::q8) {
      mc.resize(un), vc.resize(un);
      ma.resize(size_t(quant_blocks(n))), va.resize(ma.size());
    }
  }
  template <class P>  // float, or bf16 parameters
  AdamWTensor entry(std::vector<P>& p, std::vector<float>& g, bool decay) {
    switch (format) {
      case MomentFormat::f32:
        return {view(p, {n}), view(g, {n}), view(m32, {n}), view(v32, {n}), decay};
      case MomentFormat::bf16:
        return {view(p, {n}), view(g, {n}), view(m16, {n}), view(v16, {n}), decay};
      case MomentFormat::q8:
        break;
    }
    return {view(p, {n}),
            view(g, {n}),
            view(mc, {n}),
            view(vc, {n}),
            decay,
            view(ma, {quant_blocks(n)}),
            view(va, {quant_blocks(n)})};
  }
};

// A noisy quadratic: two tensors (one decayed) pulled towards fixed targets over `steps` AdamW steps with
// moments in `format` and parameters of param_dtype (bf16 ones start at the f32 ones rounded). The final
// parameters of both, joined, and the final objective mean((p - target)^2) / 2.
std::pair<std::vector<float>, double> train_quadratic(MomentFormat format, int steps,
                                                      DType param_dtype = DType::f32) {
  const int64_t sizes[2] = {3 * kQuantBlock + 17, 100};  // a partial last block; a one-block tensor
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> p(2), g(2), target(2);
  std::vector<Moments> moments;
  std::vector<AdamWTensor> list;
  for (int t = 0; t < 2; ++t) {
    for (int64_t i = 0; i < sizes[t]; ++i) {
      p[t].push_back(normal(rng));
      target[t].push_back(normal(rng) * std::pow(10.0f, -float(i % 4)));  // gradients over four decades
    }
    g[t].resize(p[t].size());
    moments.emplace_back(format, sizes[t]);
  }
  std::vector<std::vector<bf16>> p16(2);
  for (int t = 0; t < 2; ++t) {
    if (param_dtype != DType::bf16) {
      list.push_back(moments[t].entry(p[t], g[t], t == 0));
      continue;
    }
    for (float x : p[t]) p16[t].push_back({float_to_bf16(x)});
    list.push_back(moments[t].entry(p16[t], g[t], t == 0));
  }
  const auto read_bf16 = [&] {  // bf16 parameters are the weights themselves: p mirrors them
    for (int t = 0; t < 2; ++t)
      for (size_t i = 0; i < p16[t].size(); ++i) p[t][i] = bf16_to_float(p16[t][i].bits);
  };
  const AdamWConfig c{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  std::mt19937 noise_rng(9);
  for (int step = 1; step <= steps; ++step) {
    read_bf16();
    for (int t = 0; t < 2; ++t)
      for (size_t i = 0; i < p[t].size(); ++i)
        g[t][i] = (p[t][i] - target[t][i]) + 0.1f * std::fabs(target[t][i]) * normal(noise_rng);
    adamw_step(list, c, step);
  }
  read_bf16();
  std::vector<float> out = p[0];
  out.insert(out.end(), p[1].begin(), p[1].end());
  double loss = 0;
  for (int t = 0; t < 2; ++t)
    for (size_t i = 0; i < p[t].size(); ++i)
      loss += 0.5 * std::pow(double(p[t][i]) - double(target[t][i]), 2);
  return {out, loss / double(out.size())};
}

// The largest and the mean |got - want| over the elements.
std::pair<double, double> differences(const std::vector<float>& want, const std::vector<float>& got) {
  double worst = 0, sum = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(want[i]));
    worst = std::max(worst, d);
    sum += d;
  }
  return {worst, sum / double(want.size())};
}

// bf16 and 8-bit moments against f32 ones over 50 steps: the objective (0.5 at the start) ends within
// 0.5% (bf16) and 3% (8-bit) of the f32 run's, and parameters that start ~1 and move ~0.5 end within 5e-3
// (bf16) and 0.1 (8-bit) of the f32 run's, element by element (8 bits keep few digits of the second
// moments of elements far below their block's largest: their steps differ most).
TEST(AdamW, Bf16And8BitMomentsFollowF32MomentsOver50Steps) {
  const auto [want, want_loss] = train_quadratic(MomentFormat::f32, 50);
  for (const auto& [format, loss_tolerance, tolerance] :
       {std::tuple{MomentFormat::bf16, 0.005, 5e-3}, {MomentFormat::q8, 0.03, 0.1}}) {
    const auto [got, loss] = train_quadratic(format, 50);
    const auto [worst, mean] = differences(want, got);
    const double loss_difference = std::fabs(loss - want_loss) / want_loss;
    std::cout << "[ measured ] " << moment_format_name(format) << " moments, 50 steps: objective " << loss
              << " vs f32 " << want_loss << " (relative difference " << loss_difference
              << "), max |p - p_f32| = " << worst << ", mean " << mean << "\n";
    EXPECT_LE(loss_difference, loss_tolerance) << moment_format_name(format);
    EXPECT_LE(worst, tolerance) << moment_format_name(format);
    EXPECT_GT(worst, 0.0) << "the format changed nothing: are the moments really stored in it?";
  }
}

// One step from zero moments: the f32 moments are (1 - beta1) g and (1 - beta2) g^2. Stored in 8 bits they
// decode within the quantizer's bound of those, each block's absmax is the largest of its own elements
// (the last, partial block included), and the parameters moved exactly as the f32 path moves them.
TEST(AdamW, EightBitMomentsAfterOneStepAreTheF32MomentsQuantizedPerBlock) {
  const int64_t n = 2 * kQuantBlock + 5;
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> p(static_cast<size_t>(n)), g(p.size()), p32, g32;
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = normal(rng);
    g[i] = normal(rng) * std::pow(10.0f, -float(i % 5));
  }
  g[size_t(n - 1)] = 50.0f;  // the partial block's own maximum
  p32 = p, g32 = g;
  Moments q(MomentFormat::q8, n), f(MomentFormat::f32, n);
  const AdamWConfig c{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0};
  adamw_step(std::vector{q.entry(p, g, true)}, c, 1);
  adamw_step(std::vector{f.entry(p32, g32, true)}, c, 1);
  EXPECT_EQ(p, p32);
  for (int64_t b = 0; b < quant_blocks(n); ++b) {
    const int64_t first = b * kQuantBlock, last = std::min(n, first + kQuantBlock);
    float m_max = 0, v_max = 0;
    for (int64_t i = first; i < last; ++i)
      m_max = std::max(m_max, std::fabs(f.m32[size_t(i)])), v_max = std::max(v_max, f.v32[size_t(i)]);
    EXPECT_EQ(q.ma[size_t(b)], m_max) << "block " << b;
    EXPECT_EQ(q.va[size_t(b)], v_max) << "block " << b;
    for (int64_t i = first; i < last; ++i) {
      const auto k = size_t(i);
      EXPECT_NEAR(quant8::decode(quant8::signed_map().data(), q.mc[k], m_max), f.m32[k], 0.00704 * m_max);
      EXPECT_NEAR(quant8::decode(quant8::unsigned_map().data(), q.vc[k], v_max), f.v32[k], 0.00352 * v_max);
    }
  }
  EXPECT_EQ(q.ma.back(), f.m32.back()) << "the partial block's absmax is its own largest element";
}

TEST(AdamW, Bf16MomentsAreTheF32OnesRoundedToNearestEven) {
  std::vector<float> p = {0.5f, -0.25f, 2.0f}, g = {0.3f, -1.7f, 1e-3f}, p32 = p, g32 = g;
  Moments h(MomentFormat::bf16, 3), f(MomentFormat::f32, 3);
  const AdamWConfig c{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  adamw_step(std::vector{h.entry(p, g, true)}, c, 1);
  adamw_step(std::vector{f.entry(p32, g32, true)}, c, 1);
  EXPECT_EQ(p, p32) << "the first step uses the unrounded moments";
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(h.m16[i].bits, float_to_bf16(f.m32[i]));
    EXPECT_EQ(h.v16[i].bits, float_to_bf16(f.v32[i]));
  }
}

TEST(AdamW, RejectsMixedOrIncompleteMomentFormats) {
  std::vector<float> p(300), g(300), p2(4), g2(4);
  Moments q(MomentFormat::q8, 300), h(MomentFormat::bf16, 4);
  std::vector<AdamWTensor> list = {q.entry(p, g, true)};
  EXPECT_NO_THROW(adamw_step(list, {}, 1));
  list.push_back(h.entry(p2, g2, true));
  EXPECT_THROW(adamw_step(list, {}, 1), Error);  // one format per call
  list.pop_back();
  list[0].v_absmax = view(q.va, {1});  // two blocks needed
  EXPECT_THROW(adamw_step(list, {}, 1), Error);
  std::vector<double> pd(4), gd(4);
  EXPECT_THROW(adamw_step(std::vector<AdamWTensor>{{view(pd, {4}), view(gd, {4}), view(h.m16, {4}),
                                                    view(h.v16, {4}), true}},
                          {}, 1),
               Error);  // bf16 moments go with f32 or bf16 parameters
}

// Stochastic rounding to bf16 (adamw_update.h) lands on one of x's two bf16 neighbours, keeps bf16 values,
// infinities and NaN, and is exactly unbiased: over all 65536 values of the 16 bits it reads, the rounded
// values average to x itself (in double, where their sum is exact).
TEST(AdamW, StochasticRoundingPicksANeighbourAndIsUnbiased) {
  using adamw_math::round_bf16_stochastic;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-140, 120);  // subnormals to far below bf16's largest
  std::uniform_int_distribution<uint32_t> bits;
  for (int k = 0; k < 300; ++k) {
    const float x = std::ldexp(k % 2 ? -mantissa(rng) : mantissa(rng), exponent(rng));
    const auto u = std::bit_cast<uint32_t>(x);
    // Truncation and the next bf16 away from zero (a mantissa carry steps the exponent: still the next).
    const auto low = static_cast<uint16_t>(u >> 16), high = static_cast<uint16_t>(low + 1);
    for (int d = 0; d < 100; ++d) {
      const uint16_t r = round_bf16_stochastic(x, bits(rng));
      ASSERT_TRUE(r == low || r == high) << x << " rounded to " << bf16_to_float(r);
    }
    double sum = 0;
    for (uint32_t b = 0; b < 65536; ++b) sum += double(bf16_to_float(round_bf16_stochastic(x, b)));
    ASSERT_EQ(sum / 65536, double(x)) << "x = " << x;
    const float exact = bf16_to_float(low);
    for (int d = 0; d < 100; ++d) ASSERT_EQ(round_bf16_stochastic(exact, bits(rng)), low) << exact;
  }
  for (const float x : {INFINITY, -INFINITY, 0.0f, -0.0f})
    for (const uint32_t b : {0u, 1u, 0x8000u, 0xffffu, 0xffffffffu})
      EXPECT_EQ(round_bf16_stochastic(x, b), std::bit_cast<uint32_t>(x) >> 16) << x;
  for (const uint32_t nan_bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu})  // low payloads too
    for (const uint32_t b : {0u, 0xffffu})
      EXPECT_TRUE(std::isnan(bf16_to_float(round_bf16_stochastic(std::bit_cast<float>(nan_bits), b))))
          << std::hex << nan_bits;
}

// Steps of lr = 1e-4 on weights of 1: a twentieth of half the bf16 spacing below 1 (2^-9), so rounding to
// nearest would never move them. Stochastic rounding moves their mean as the f32 masters move (200 steps of
// lr: 0.02) and each weight by its own draws.
TEST(AdamW, StochasticRoundingMovesBf16WeightsByStepsBelowHalfTheirSpacing) {
  const int64_t n = 4096;
  const int steps = 200;
  const AdamWConfig c{.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0, .seed = 7};
  ASSERT_EQ(float_to_bf16(1.0f - float(c.lr)), float_to_bf16(1.0f)) << "round to nearest stays at 1";
  const auto un = static_cast<size_t>(n);
  std::vector<bf16> p16(un, bf16{float_to_bf16(1.0f)});
  std::vector<float> p32(un, 1.0f), g(un, 0.5f), m_sr(un), v_sr(un), m32(un), v32(un);
  const std::vector<AdamWTensor> bf16_run = {{view(p16, {n}), view(g, {n}), view(m_sr, {n}),
                                              view(v_sr, {n})}},
                                 f32_run = {{view(p32, {n}), view(g, {n}), view(m32, {n}), view(v32, {n})}};
  for (int step = 1; step <= steps; ++step) {
    adamw_step(bf16_run, c, step);
    adamw_step(f32_run, c, step);
  }
  double sum = 0;
  std::set<uint16_t> values;
  for (const bf16 x : p16) sum += double(bf16_to_float(x.bits)), values.insert(x.bits);
  const double moved = 1 - sum / double(n), want = 1 - double(p32[0]);
  std::cout << "[ measured ] bf16 weights moved " << moved << " on average, f32 masters " << want << ", "
            << values.size() << " distinct weights\n";
  EXPECT_NEAR(want, steps * c.lr, 1e-3 * steps * c.lr) << "a constant gradient steps by lr";
  EXPECT_NEAR(moved, want, 0.03 * want);
  EXPECT_GT(values.size(), 2u) << "each weight rounds by its own draws";
}

// The rounding draws hash each weight's index in the flat parameter vector: a tensor updated whole or as
// two shards (offsets o and o + k, as ZeRO-1 splits it) rounds alike, bit for bit, with moments in every
// format (k a whole number of quantization blocks: q8 blocks start at each shard's element 0). Another
// offset or seed draws other bits. The offsets cross 2^32: both halves of the index are hashed.
TEST(AdamW, Bf16RoundingFollowsTheFlatIndexAcrossShards) {
  const int64_t n = 5 * kQuantBlock + 17, k = 2 * kQuantBlock, o = (int64_t{1} << 32) - 300;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<bf16> init;
  std::vector<float> grad;
  for (int64_t i = 0; i < n; ++i) init.push_back({float_to_bf16(normal(rng))}), grad.push_back(normal(rng));
  for (const MomentFormat format : {MomentFormat::f32, MomentFormat::bf16, MomentFormat::q8}) {
    SCOPED_TRACE(std::string(moment_format_name(format)));
    // The parameters' bits after 3 steps, the tensor cut into shards at `cuts` (its first element at offset).
    const auto run = [&](const std::vector<int64_t>& cuts, int64_t offset, uint64_t seed) {
      std::vector<std::vector<bf16>> p;
      std::vector<std::vector<float>> g;
      std::vector<Moments> moments;
      for (size_t s = 0; s + 1 < cuts.size(); ++s) {
        p.emplace_back(init.begin() + cuts[s], init.begin() + cuts[s + 1]);
        g.emplace_back(grad.begin() + cuts[s], grad.begin() + cuts[s + 1]);
        moments.emplace_back(format, cuts[s + 1] - cuts[s]);
      }
      std::vector<AdamWTensor> list;
      for (size_t s = 0; s < p.size(); ++s) {
        list.push_back(moments[s].entry(p[s], g[s], true));
        list.back().offset = offset + cuts[s];
      }
      const AdamWConfig c{
          .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .seed = seed};
      for (int64_t step = 1; step <= 3; ++step) adamw_step(list, c, step);
      std::vector<uint16_t> bits;
      for (const auto& shard : p)
        for (const bf16 x : shard) bits.push_back(x.bits);
      return bits;
    };
    const std::vector<uint16_t> whole = run({0, n}, o, 1);
    EXPECT_EQ(run({0, k, n}, o, 1), whole);
    EXPECT_NE(run({0, n}, o + 1, 1), whole);
    EXPECT_NE(run({0, n}, o, 2), whole);
  }
}

// bf16 parameters (no masters) against f32 ones over 20 steps of lr 1e-2, with moments in each format.
// Stochastic rounding walks each weight randomly, about sqrt(20 / 6) of its bf16 spacings (2^-7 at 1.5,
// 2^-6 past 2) away from the f32 trajectory, unbiased: the objective ends within 0.3% of the f32 run's,
// weights within 0.15 of theirs and 0.012 on average (measured: 0.04%, 0.076, 0.0073).
TEST(AdamW, Bf16ParamsFollowF32ParamsInEveryMomentFormat) {
  for (const MomentFormat format : {MomentFormat::f32, MomentFormat::bf16, MomentFormat::q8}) {
    const auto [want, want_loss] = train_quadratic(format, 20);
    const auto [got, loss] = train_quadratic(format, 20, DType::bf16);
    const auto [worst, mean] = differences(want, got);
    const double loss_difference = std::fabs(loss - want_loss) / want_loss;
    std::cout << "[ measured ] bf16 parameters, " << moment_format_name(format)
              << " moments, 20 steps: objective " << loss << " vs f32 parameters " << want_loss
              << " (relative difference " << loss_difference << "), max |p - p_f32| = " << worst << ", mean "
              << mean << "\n";
    EXPECT_LE(loss_difference, 0.003) << moment_format_name(format);
    EXPECT_LE(worst, 0.15) << moment_format_name(format);
    EXPECT_LE(mean, 0.012) << moment_format_name(format);
  }
}

// The parameters of one call share a dtype; bf16 ones take f32 gradients, f32-format moments and bf16 or
// q8 ones; f32 parameters take bf16 and q8 moments, f64 ones only f32-format moments.
TEST(AdamW, Bf16ParamsTakeF32GradientsAndOneParameterDtypeACall) {
  const int64_t n = 300;
  const auto un = static_cast<size_t>(n);
  std::vector<bf16> p(un), g16(un);
  std::vector<float> p32(un), g(un);
  std::vector<double> gd(un), md(un), vd(un);
  Moments f(MomentFormat::f32, n), h(MomentFormat::bf16, n), h2(MomentFormat::bf16, n),
      q(MomentFormat::q8, n);
  const auto error = [](const std::vector<AdamWTensor>& list) -> std::string {
    try {
      adamw_step(list, {}, 1);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  for (Moments* moments : {&f, &h, &q}) EXPECT_EQ(error({moments->entry(p, g, true)}), "");
  AdamWTensor bad = h.entry(p, g, true);
  bad.grad = view(g16, {n});
  EXPECT_EQ(error({bad}), "adamw_step: grad of tensor 0 is bf16, but bf16 parameters take f32 gradients");
  bad.grad = view(gd, {n});
  EXPECT_EQ(error({bad}), "adamw_step: grad of tensor 0 is f64, but bf16 parameters take f32 gradients");
  bad = f.entry(p, g, true);
  bad.m = view(md, {n}), bad.v = view(vd, {n});
  EXPECT_EQ(error({bad}), "adamw_step: m of tensor 0 is f64, but f32 moments beside bf16 parameters are f32");
  EXPECT_EQ(
      error({h.entry(p, g, true), h2.entry(p32, g, true)}),
      "adamw_step: param of tensor 1 is f32, tensor 0's is bf16; one call takes parameters of one dtype");
  std::vector<double> pd(un);
  bad = q.entry(p, g, true);
  bad.param = view(pd, {n}), bad.grad = view(gd, {n});
  EXPECT_EQ(error({bad}), "adamw_step: 8bit moments go with f32 or bf16 parameters, tensor 0 has f64 ones");
}

// The AdamW state of a few tensors in one mode, in byte buffers: random parameters (param_dtype), gradients
// over four decades (f64 beside f64 parameters, else f32) and moment state (codes and absmax with q8), the
// same for the same arguments; with `working`, a bf16 working copy of each tensor, poisoned.
struct State {
  std::deque<std::vector<uint8_t>> buffers;  // stable addresses
  std::vector<AdamWTensor> entries;

  State(MomentFormat format, DType param_dtype, const std::vector<int64_t>& sizes, bool working = false) {
    std::mt19937 rng(13);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> code(0, 254);
    const DType grad = param_dtype == DType::f64 ? DType::f64 : DType::f32;
    const DType moment = format != MomentFormat::f32  ? moment_dtype(format)
                         : param_dtype == DType::bf16 ? DType::f32
                                                      : param_dtype;
    const auto make = [&](DType dtype, int64_t n, auto value) {
      auto& b = buffers.emplace_back(static_cast<size_t>(n * dtype_size(dtype)));
      for (int64_t i = 0; i < n; ++i) {
        const double x = value();
        void* at = b.data() + i * dtype_size(dtype);
        if (dtype == DType::f64) std::memcpy(at, &x, 8);
        if (dtype == DType::f32) *static_cast<float*>(at) = float(x);
        if (dtype == DType::bf16) *static_cast<uint16_t*>(at) = float_to_bf16(float(x));
        if (dtype == DType::u8) *static_cast<uint8_t*>(at) = static_cast<uint8_t>(x);
      }
      return Tensor(b.data(), dtype, {n});
    };
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t n = sizes[i];
      const bool q8 = format == MomentFormat::q8;
      const float scale = std::pow(10.0f, -float(i % 4));
      AdamWTensor t{make(param_dtype, n, [&] { return normal(rng); }),
                    make(grad, n, [&] { return scale * normal(rng); }),
                    make(moment, n, [&] { return q8 ? code(rng) : 0.01 * normal(rng); }),
                    make(moment, n, [&] { return q8 ? code(rng) : 1e-4 * std::fabs(normal(rng)); }),
                    i % 3 != 0};
      if (q8) {
        t.m_absmax = make(DType::f32, quant_blocks(n), [&] { return 0.1 * std::fabs(normal(rng)); });
        t.v_absmax = make(DType::f32, quant_blocks(n), [&] { return 0.01 * std::fabs(normal(rng)); });
      }
      if (working) t.working = make(DType::bf16, n, [] { return NAN; });
      t.offset = offset;
      offset += n;
      entries.push_back(t);
    }
  }
  std::vector<Tensor> grads() const {
    std::vector<Tensor> out;
    for (const AdamWTensor& t : entries) out.push_back(t.grad);
    return out;
  }
  // The bytes of every buffer but the gradients and working copies: what AdamW updates.
  std::vector<std::vector<uint8_t>> updated() const {
    std::vector<std::vector<uint8_t>> out;
    for (const AdamWTensor& t : entries)
      for (const Tensor* x : {&t.param, &t.m, &t.v, &t.m_absmax, &t.v_absmax})
        if (!x->empty())
          out.emplace_back(static_cast<uint8_t*>(x->data), static_cast<uint8_t*>(x->data) + x->bytes());
    return out;
  }
};

const std::vector<int64_t> kOddSizes = {1, 3, 4, 257, 2 * kQuantBlock + 13};

// The clip folded into AdamW: grad_scale = clip_factor(max_norm, norm) on the unscaled gradients gives the
// bits of clip_grad_norm scaling them in place and then the step, over three steps, in every mode.
TEST(AdamW, GradScaleGivesTheBitsOfClippingTheGradientsFirst) {
  for (const auto& [param_dtype, format] : {std::pair{DType::f64, MomentFormat::f32},
                                            {DType::f32, MomentFormat::f32},
                                            {DType::f32, MomentFormat::bf16},
                                            {DType::f32, MomentFormat::q8},
                                            {DType::bf16, MomentFormat::f32},
                                            {DType::bf16, MomentFormat::bf16},
                                            {DType::bf16, MomentFormat::q8}}) {
    SCOPED_TRACE(
        fmt::format("{} parameters, {} moments", dtype_name(param_dtype), moment_format_name(format)));
    State clipped(format, param_dtype, kOddSizes), folded(format, param_dtype, kOddSizes),
        unclipped(format, param_dtype, kOddSizes);
    AdamWConfig c{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .seed = 3};
    const double max_norm = 0.2;
    for (int64_t step = 1; step <= 3; ++step) {
      for (size_t i = 0; i < kOddSizes.size(); ++i)  // the unscaled gradients again
        std::memcpy(clipped.entries[i].grad.data, folded.entries[i].grad.data,
                    static_cast<size_t>(folded.entries[i].grad.bytes()));
      const double norm = clip_grad_norm(clipped.grads(), max_norm);
      adamw_step(clipped.entries, c, step);
      adamw_step(unclipped.entries, c, step);
      AdamWConfig scaled = c;
      scaled.grad_scale = clip_factor(max_norm, norm);
      ASSERT_LT(scaled.grad_scale, 0.5);
      adamw_step(folded.entries, scaled, step);
    }
    EXPECT_EQ(folded.updated(), clipped.updated());
    EXPECT_NE(folded.updated(), unclipped.updated()) << "the scale changed nothing";
  }
}

// f32 parameters with a working copy: after each step it holds the updated parameters as ops::cast rounds
// them (every element written: it starts NaN each step), and the step is the one without it, in every
// moment format, scaled or not.
TEST(AdamW, WorkingCopyIsTheCastOfTheUpdatedParameters) {
  for (const MomentFormat format : {MomentFormat::f32, MomentFormat::bf16, MomentFormat::q8})
    for (const double grad_scale : {1.0, 0.37}) {
      SCOPED_TRACE(fmt::format("{} moments, grad_scale {}", moment_format_name(format), grad_scale));
      State with(format, DType::f32, kOddSizes, true), without(format, DType::f32, kOddSizes);
      const AdamWConfig c{.lr = 1e-2,
                          .beta1 = 0.9,
                          .beta2 = 0.95,
                          .eps = 1e-8,
                          .weight_decay = 0.1,
                          .grad_scale = grad_scale};
      for (int64_t step = 1; step <= 3; ++step) {
        for (const AdamWTensor& t : with.entries)
          std::memset(t.working.data, 0xFF, size_t(t.working.bytes()));
        adamw_step(with.entries, c, step);
        adamw_step(without.entries, c, step);
        for (const AdamWTensor& t : with.entries) {
          std::vector<uint16_t> want(static_cast<size_t>(t.param.numel()));
          cast(t.param, Tensor(want.data(), DType::bf16, {t.param.numel()}));
          ASSERT_EQ(std::memcmp(want.data(), t.working.data, want.size() * 2), 0)
              << "step " << step << ", tensor of " << t.param.numel();
        }
      }
      EXPECT_EQ(with.updated(), without.updated());
    }
}

// A working copy goes with f32 parameters only, bf16 and of their element count on their device; the
// gradient scale is finite and positive. Each refused by name.
TEST(AdamW, RefusesAWorkingCopyBesideOtherParametersOrOfAnotherShapeAndABadGradScale) {
  const auto error = [](const std::vector<AdamWTensor>& list, const AdamWConfig& c = {}) -> std::string {
    try {
      adamw_step(list, c, 1);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const State bf16_params(MomentFormat::bf16, DType::bf16, {5}, true),
      f64_params(MomentFormat::f32, DType::f64, {5}, true), ok(MomentFormat::f32, DType::f32, {5, 7}, true);
  EXPECT_EQ(error(bf16_params.entries),
            "adamw_step: working of tensor 0 takes the bf16 cast of f32 parameters, but its param is bf16");
  EXPECT_EQ(error(f64_params.entries),
            "adamw_step: working of tensor 0 takes the bf16 cast of f32 parameters, but its param is f64");
  EXPECT_EQ(error(ok.entries), "");
  std::vector<AdamWTensor> bad = ok.entries;
  bad[1].working = Tensor(ok.entries[1].working.data, DType::bf16, {6});
  EXPECT_EQ(error(bad),
            "adamw_step: working of tensor 1 must be bf16[7] on cpu as its param, got bf16[6]@cpu");
  bad[1].working = ok.entries[1].grad;
  EXPECT_NE(error(bad).find("must be bf16[7]"), std::string::npos) << error(bad);
  for (const double scale : {0.0, -1.0, double(NAN), double(INFINITY)})
    EXPECT_NE(error(ok.entries, {.grad_scale = scale}).find("grad_scale must be finite and positive"),
              std::string::npos)
        << scale;
}

}  // namespace
}  // namespace pt::ops
