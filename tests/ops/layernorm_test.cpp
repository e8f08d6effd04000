#include "ops/layernorm.h"

#include "gradcheck.h"
#include "ops/cpu/threads.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pt::ops {
namespace {

using testing::gradcheck;
using testing::random_values;
using testing::view;
using testing::weighted_sum;

TEST(LayerNorm, ForwardMatchesFormula) {
  const int64_t T = 3, C = 6;
  const double eps = 1e-5;
  std::vector<double> x = random_values(T * C, 1), w = random_values(C, 2), b = random_values(C, 3);
  std::vector<double> y(T * C), mean(T), rstd(T);
  layernorm_forward(view(x, {T, C}), view(w, {C}), view(b, {C}), eps, view(y, {T, C}), view(mean, {T}),
                    view(rstd, {T}));
  for (int64_t t = 0; t < T; ++t) {
    double m = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) m += x[t * C + c] / C;
    for (int64_t c = 0; c < C; ++c) var += (x[t * C + c] - m) * (x[t * C + c] - m) / C;  // biased
    const double r = 1 / std::sqrt(var + eps);
    EXPECT_NEAR(mean[t], m, 1e-12);
    EXPECT_NEAR(rstd[t], r, 1e-12);
    for (int64_t c = 0; c < C; ++c) EXPECT_NEAR(y[t * C + c], (x[t * C + c] - m) * r * w[c] + b[c], 1e-12);
  }
}

// A row far from zero keeps its variance: summed around the mean, not as mean(x^2) - mean^2.
TEST(LayerNorm, VarianceOfAnOffsetRowIsExact) {
  const int64_t C = 4;
  std::vector<float> x = {1e4f + 1, 1e4f - 1, 1e4f + 1, 1e4f - 1}, w(C, 1.0f), b(C, 0.0f), y(C), mean(1),
                     rstd(1);
  layernorm_forward(view(x, {1, C}), view(w, {C}), view(b, {C}), 0.0, view(y, {1, C}), view(mean, {1}),
                    view(rstd, {1}));
  EXPECT_EQ(mean[0], 1e4f);
  EXPECT_EQ(rstd[0], 1.0f);
  EXPECT_EQ(y, (std::vector<float>{1, -1, 1, -1}));
}

class LayerNormGrad : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(LayerNormGrad, BackwardMatchesFiniteDifferences) {
  const auto [T, C] = GetParam();
  const double eps = 1e-5;
  std::vector<double> x = random_values(T * C, 3, -2, 2), w = random_values(C, 4, 0.5, 1.5),
                      b = random_values(C, 5);
  std::vector<double> weights = random_values(T * C, 6), y(T * C), mean(T), rstd(T);
  auto loss = [&] {
    layernorm_forward(view(x, {T, C}), view(w, {C}), view(b, {C}), eps, view(y, {T, C}), view(mean, {T}),
                      view(rstd, {T}));
    return weighted_sum(y, weights);
  };
  loss();
  std::vector<double> dx(T * C, 3.0), dw(C, 7.0), db(C, -2.0);
  layernorm_backward(view(weights, {T, C}), view(x, {T, C}), view(w, {C}), view(mean, {T}), view(rstd, {T}),
                     view(dx, {T, C}), Write::overwrite, view(dw, {C}), view(db, {C}), Write::overwrite);
  EXPECT_GRAD(gradcheck(loss, x, dx));
  EXPECT_GRAD(gradcheck(loss, w, dw));
  EXPECT_GRAD(gradcheck(loss, b, db));
}

// C = 1 normalizes every token to 0 (y = bias, dx = 0, dweight = 0); T = 1 is a single token.
INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormGrad,
                         ::testing::Values(std::pair<int64_t, int64_t>{1, 1},
                                           std::pair<int64_t, int64_t>{5, 1},
                                           std::pair<int64_t, int64_t>{1, 7},
                                           std::pair<int64_t, int64_t>{4, 8},
                                           std::pair<int64_t, int64_t>{9, 13}));

// dx_bias: the gradient of a bias added into every row of the input, x = x0 + bias, against finite
// differences in that bias; and added to in param_mode.
TEST(LayerNorm, InputBiasGradientMatchesFiniteDifferences) {
  for (auto [T, C] : {std::pair<int64_t, int64_t>{1, 1}, {1, 7}, {9, 13}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << T << " C=" << C);
    const std::vector<double> x0 = random_values(T * C, 11, -2, 2);
    std::vector<double> w = random_values(C, 12, 0.5, 1.5), b = random_values(C, 13);
    std::vector<double> bias = random_values(C, 14), weights = random_values(T * C, 15);
    std::vector<double> x(T * C), y(T * C), mean(T), rstd(T);
    auto loss = [&] {
      for (int64_t i = 0; i < T * C; ++i) x[i] = x0[i] + bias[i % C];
      layernorm_forward(view(x, {T, C}), view(w, {C}), view(b, {C}), 1e-5, view(y, {T, C}), view(mean, {T}),
                        view(rstd, {T}));
      return weighted_sum(y, weights);
    };
    loss();
    std::vector<double> dx(T * C), dw(C), db(C), dbias(C, 4.0);
    auto backward = [&](Write mode) {
      layernorm_backward(view(weights, {T, C}), view(x, {T, C}), view(w, {C}), view(mean, {T}),
                         view(rstd, {T}), view(dx, {T, C}), Write::overwrite, view(dw, {C}), view(db, {C}),
                         mode, view(dbias, {C}));
    };
    backward(Write::overwrite);
    EXPECT_GRAD(gradcheck(loss, bias, dbias));
    loss();  // the finite differences left x perturbed
    const std::vector<double> once = dbias;
    backward(Write::accumulate);
    for (int64_t c = 0; c < C; ++c) EXPECT_DOUBLE_EQ(dbias[c], 2 * once[c]);
  }
}

TEST(LayerNorm, GradientsAccumulateAndIgnoreThreadCount) {
  const int64_t T = 257, C = 19;
  std::vector<float> x(T * C), dy(T * C), w(C), b(C), y(T * C), mean(T), rstd(T);
  std::vector<double> r = random_values(2 * T * C + 2 * C, 7);
  for (int64_t i = 0; i < T * C; ++i) x[i] = float(r[i]), dy[i] = float(r[T * C + i]);
  for (int64_t c = 0; c < C; ++c) w[c] = float(r[2 * T * C + c]), b[c] = float(r[2 * T * C + C + c]);
  layernorm_forward(view(x, {T, C}), view(w, {C}), view(b, {C}), 1e-5, view(y, {T, C}), view(mean, {T}),
                    view(rstd, {T}));
  struct Grads {
    std::vector<float> dx, dw, db;
  };
  auto grads = [&](int threads, Write mode, float old) {
    Grads g{std::vector<float>(T * C, 9.0f), std::vector<float>(C, old), std::vector<float>(C, old)};
    set_cpu_threads(threads);
    layernorm_backward(view(dy, {T, C}), view(x, {T, C}), view(w, {C}), view(mean, {T}), view(rstd, {T}),
                       view(g.dx, {T, C}), mode, view(g.dw, {C}), view(g.db, {C}), mode);
    set_cpu_threads(0);
    return g;
  };
  const Grads one = grads(1, Write::overwrite, 0.0f), seven = grads(7, Write::overwrite, 5.0f);
  EXPECT_EQ(one.dx, seven.dx);
  EXPECT_EQ(one.dw, seven.dw);
  EXPECT_EQ(one.db, seven.db);
  const Grads added = grads(3, Write::accumulate, 1.0f);
  for (int64_t i = 0; i < T * C; ++i) EXPECT_FLOAT_EQ(added.dx[i], one.dx[i] + 9.0f);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_FLOAT_EQ(added.dw[c], one.dw[c] + 1.0f);
    EXPECT_FLOAT_EQ(added.db[c], one.db[c] + 1.0f);
  }
}

TEST(LayerNorm, RejectsMismatchedShapesAndNegativeEps) {
  std::vector<double> x(6), w(3), b(2), y(6), mean(2), rstd(2);
  EXPECT_THROW(layernorm_forward(view(x, {2, 3}), view(w, {3}), view(b, {2}), 1e-5, view(y, {2, 3}),
                                 view(mean, {2}), view(rstd, {2})),
               Error);
  std::vector<double> b3(3);
  EXPECT_THROW(layernorm_forward(view(x, {2, 3}), view(w, {3}), view(b3, {3}), -1.0, view(y, {2, 3}),
                                 view(mean, {2}), view(rstd, {2})),
               Error);
}

}  // namespace
}  // namespace pt::ops
