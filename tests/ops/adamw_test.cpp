#include "ops/adamw.h"

#include "gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace pt::ops
