#include "ops/rmsnorm.h"

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

TEST(RmsNorm, ForwardMatchesFormula) {
  const int64_t T = 3, C = 6;
  const double eps = 1e-5;
  std::vector<double> x = random_values(T * C, 1), w = random_values(C, 2), y(T * C), rstd(T);
  rmsnorm_forward(view(x, {T, C}), view(w, {C}), eps, view(y, {T, C}), view(rstd, {T}));
  for (int64_t t = 0; t < T; ++t) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += x[t * C + c] * x[t * C + c] / C;
    const double r = 1 / std::sqrt(ms + eps);
    EXPECT_NEAR(rstd[t], r, 1e-12);
    for (int64_t c = 0; c < C; ++c) EXPECT_NEAR(y[t * C + c], x[t * C + c] * r * w[c], 1e-12);
  }
}

class RmsNormGrad : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(RmsNormGrad, BackwardMatchesFiniteDifferences) {
  const auto [T, C] = GetParam();
  const double eps = 1e-6;
  std::vector<double> x = random_values(T * C, 3), w = random_values(C, 4, 0.5, 1.5);
  std::vector<double> weights = random_values(T * C, 5), y(T * C), rstd(T);
  auto loss = [&] {
    rmsnorm_forward(view(x, {T, C}), view(w, {C}), eps, view(y, {T, C}), view(rstd, {T}));
    return weighted_sum(y, weights);
  };
  loss();
  std::vector<double> dx(T * C), dw(C, 7.0);
  rmsnorm_backward(view(weights, {T, C}), view(x, {T, C}), view(w, {C}), view(rstd, {T}), view(dx, {T, C}),
                   Write::overwrite, view(dw, {C}), Write::overwrite);
  EXPECT_GRAD(gradcheck(loss, x, dx));
  EXPECT_GRAD(gradcheck(loss, w, dw));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormGrad,
                         ::testing::Values(std::pair<int64_t, int64_t>{1, 1},
                                           std::pair<int64_t, int64_t>{4, 8},
                                           std::pair<int64_t, int64_t>{9, 13}));

TEST(RmsNorm, GradientsAccumulateAndIgnoreThreadCount) {
  const int64_t T = 257, C = 19;
  std::vector<float> x(T * C), dy(T * C), w(C, 1.0f), y(T * C), rstd(T);
  std::vector<double> r = random_values(2 * T * C, 6);
  for (int64_t i = 0; i < T * C; ++i) x[i] = float(r[i]), dy[i] = float(r[T * C + i]);
  rmsnorm_forward(view(x, {T, C}), view(w, {C}), 1e-5, view(y, {T, C}), view(rstd, {T}));
  struct Grads {
    std::vector<float> dx, dw;
  };
  auto grads = [&](int threads, Write mode, float old) {
    Grads g{std::vector<float>(T * C, 9.0f), std::vector<float>(C, old)};
    set_cpu_threads(threads);
    rmsnorm_backward(view(dy, {T, C}), view(x, {T, C}), view(w, {C}), view(rstd, {T}), view(g.dx, {T, C}),
                     mode, view(g.dw, {C}), mode);
    set_cpu_threads(0);
    return g;
  };
  const Grads one = grads(1, Write::overwrite, 0.0f), seven = grads(7, Write::overwrite, 5.0f);
  EXPECT_EQ(one.dx, seven.dx);
  EXPECT_EQ(one.dw, seven.dw);
  const Grads added = grads(3, Write::accumulate, 1.0f);
  for (int64_t i = 0; i < T * C; ++i) EXPECT_FLOAT_EQ(added.dx[i], one.dx[i] + 9.0f);
  for (int64_t c = 0; c < C; ++c) EXPECT_FLOAT_EQ(added.dw[c], one.dw[c] + 1.0f);
}

}  // namespace
}  // namespace pt::ops
