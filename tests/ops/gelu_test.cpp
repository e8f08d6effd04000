#include "ops/gelu.h"

#include "gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace pt::ops {
namespace {

using testing::gradcheck;
using testing::random_values;
using testing::view;
using testing::weighted_sum;

double gelu_tanh(double h) {
  const double k = std::sqrt(2 / std::numbers::pi);
  return 0.5 * h * (1 + std::tanh(k * (h + 0.044715 * h * h * h)));
}

TEST(Gelu, ForwardMatchesFormula) {
  std::vector<double> h = {0.0, 1.0, -1.0, 3.0, -3.0, 0.5, -20.0, 20.0}, out(8);
  gelu_forward(view(h, {2, 4}), view(out, {2, 4}));
  for (size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(out[i], gelu_tanh(h[i]), 1e-15) << "h = " << h[i];
  EXPECT_NEAR(out[1], 0.8411919906082768, 1e-15);  // torch gelu(1.0, approximate="tanh") in f64
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[7], 20.0);
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  for (auto [T, F] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {3, 16}, {1, 64}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << T << " F=" << F);
    std::vector<double> h = random_values(T * F, 1, -5, 5), weights = random_values(T * F, 2), out(T * F);
    auto loss = [&] {
      gelu_forward(view(h, {T, F}), view(out, {T, F}));
      return weighted_sum(out, weights);
    };
    std::vector<double> dh(T * F, 4.0);
    gelu_backward(view(weights, {T, F}), view(h, {T, F}), view(dh, {T, F}));
    EXPECT_GRAD(gradcheck(loss, h, dh));
  }
}

TEST(Gelu, InPlaceEqualsOutOfPlace) {
  const int64_t T = 4, F = 9;
  std::vector<float> h(T * F), dout(T * F), out(T * F), dh(T * F);
  const std::vector<double> r = random_values(2 * T * F, 3, -4, 4);
  for (int64_t i = 0; i < T * F; ++i) h[i] = float(r[i]), dout[i] = float(r[T * F + i]);
  gelu_forward(view(h, {T, F}), view(out, {T, F}));
  gelu_backward(view(dout, {T, F}), view(h, {T, F}), view(dh, {T, F}));

  std::vector<float> in_place = h;
  gelu_forward(view(in_place, {T, F}), view(in_place, {T, F}));
  EXPECT_EQ(in_place, out);
  std::vector<float> grad = dout;
  gelu_backward(view(grad, {T, F}), view(h, {T, F}), view(grad, {T, F}));
  EXPECT_EQ(grad, dh);
}

double gelu_erf(double h) { return 0.5 * h * (1 + std::erf(h / std::sqrt(2.0))); }

TEST(GeluErf, ForwardMatchesFormula) {
  std::vector<double> h = {0.0, 1.0, -1.0, 3.0, -3.0, 0.5, -20.0, 20.0, -7.0, 1e-3}, out(10);
  gelu_erf_forward(view(h, {2, 5}), view(out, {2, 5}));
  for (size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(out[i], gelu_erf(h[i]), 1e-15) << "h = " << h[i];
  EXPECT_NEAR(out[1], 0.8413447460685429, 1e-15);  // torch gelu(1.0) in f64: Phi(1)
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[7], 20.0);
  // Far in the negative tail, where 1 + erf would cancel: -7 Phi(-7), Phi(-7) = 1.2798e-12.
  EXPECT_NEAR(out[8], -7 * 1.279812543885835e-12, 1e-24);
  // Not the tanh approximation: the two differ by about 1.6e-4 at h = 1... but agree at 0.
  std::vector<double> tanh_out(10);
  gelu_forward(view(h, {2, 5}), view(tanh_out, {2, 5}));
  EXPECT_GT(std::abs(tanh_out[1] - out[1]), 1e-4);
}

TEST(GeluErf, BackwardMatchesFiniteDifferences) {
  for (auto [T, F] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {3, 16}, {1, 64}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << T << " F=" << F);
    std::vector<double> h = random_values(T * F, 5, -6, 6), weights = random_values(T * F, 6), out(T * F);
    auto loss = [&] {
      gelu_erf_forward(view(h, {T, F}), view(out, {T, F}));
      return weighted_sum(out, weights);
    };
    std::vector<double> dh(T * F, 4.0);
    gelu_erf_backward(view(weights, {T, F}), view(h, {T, F}), view(dh, {T, F}));
    EXPECT_GRAD(gradcheck(loss, h, dh));
  }
}

TEST(GeluErf, F32MatchesF64AndInPlaceEqualsOutOfPlace) {
  const int64_t T = 4, F = 9;
  std::vector<float> h(T * F), dout(T * F), out(T * F), dh(T * F);
  const std::vector<double> r = random_values(2 * T * F, 7, -8, 8);
  std::vector<double> h64(T * F), dout64(T * F), out64(T * F), dh64(T * F);
  for (int64_t i = 0; i < T * F; ++i) {
    h[i] = float(r[i]), dout[i] = float(r[T * F + i]);
    h64[i] = h[i], dout64[i] = dout[i];
  }
  gelu_erf_forward(view(h, {T, F}), view(out, {T, F}));
  gelu_erf_backward(view(dout, {T, F}), view(h, {T, F}), view(dh, {T, F}));
  gelu_erf_forward(view(h64, {T, F}), view(out64, {T, F}));
  gelu_erf_backward(view(dout64, {T, F}), view(h64, {T, F}), view(dh64, {T, F}));
  for (int64_t i = 0; i < T * F; ++i) {
    EXPECT_NEAR(out[i], out64[i], 1e-6 * (1 + std::abs(out64[i]))) << "h = " << h[i];
    EXPECT_NEAR(dh[i], dh64[i], 1e-6 * (1 + std::abs(dh64[i]))) << "h = " << h[i];
  }
  std::vector<float> in_place = h;
  gelu_erf_forward(view(in_place, {T, F}), view(in_place, {T, F}));
  EXPECT_EQ(in_place, out);
  std::vector<float> grad = dout;
  gelu_erf_backward(view(grad, {T, F}), view(h, {T, F}), view(grad, {T, F}));
  EXPECT_EQ(grad, dh);
}

// The bias gradient taken in the backward's pass: h = x + bias on every row, checked against finite
// differences in the bias, for both forms and both write modes.
TEST(Gelu, BiasGradientMatchesFiniteDifferences) {
  using Backward = void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Write);
  using Forward = void (*)(const Tensor&, const Tensor&);
  const std::pair<Forward, Backward> forms[] = {{gelu_forward, gelu_backward},
                                                {gelu_erf_forward, gelu_erf_backward}};
  for (auto [forward, backward] : forms)
    for (auto [T, F] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {9, 16}}) {
      SCOPED_TRACE(::testing::Message() << "T=" << T << " F=" << F);
      const std::vector<double> x = random_values(T * F, 8, -4, 4);
      std::vector<double> weights = random_values(T * F, 9);
      std::vector<double> bias = random_values(F, 10), h(T * F), out(T * F), dh(T * F);
      auto add_bias = [&] {
        for (int64_t i = 0; i < T * F; ++i) h[i] = x[i] + bias[i % F];
      };
      auto loss = [&] {
        add_bias();
        forward(view(h, {T, F}), view(out, {T, F}));
        return weighted_sum(out, weights);
      };
      add_bias();
      std::vector<double> dbias(F, 4.0);
      backward(view(weights, {T, F}), view(h, {T, F}), view(dh, {T, F}), view(dbias, {F}), Write::overwrite);
      EXPECT_GRAD(gradcheck(loss, bias, dbias));
      std::vector<double> added(F, 1.5);
      add_bias();  // the finite differences left h perturbed
      backward(view(weights, {T, F}), view(h, {T, F}), view(dh, {T, F}), view(added, {F}), Write::accumulate);
      for (int64_t c = 0; c < F; ++c) EXPECT_DOUBLE_EQ(added[c], 1.5 + dbias[c]);
    }
}

TEST(Gelu, BiasGradientOfTheWrongWidthIsRejected) {
  std::vector<double> h(8), dh(8), dbias(3);
  EXPECT_THROW(gelu_erf_backward(view(h, {2, 4}), view(h, {2, 4}), view(dh, {2, 4}), view(dbias, {3})),
               Error);
}

TEST(Gelu, PartlyOverlappingOutputIsRejected) {
  std::vector<double> buf(10);
  const Tensor h = Tensor::of(buf.data(), {2, 4}), out = Tensor::of(buf.data() + 1, {2, 4});
  EXPECT_THROW(gelu_forward(h, out), Error);
  EXPECT_THROW(gelu_backward(h, h, out), Error);
  EXPECT_THROW(gelu_erf_forward(h, out), Error);
  EXPECT_THROW(gelu_erf_backward(h, h, out), Error);
}

}  // namespace
}  // namespace pt::ops
