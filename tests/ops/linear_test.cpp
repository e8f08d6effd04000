#include "ops/linear.h"

#include "gradcheck.h"
#include "ops/gelu.h"

#include <gtest/gtest.h>

#include <array>
#include <span>

#include <algorithm>
#include <cmath>
#include <limits>

namespace pt::ops {
namespace {

using testing::gradcheck;
using testing::pad_rows;
using testing::random_values;
using testing::unpad_rows;
using testing::view;
using testing::weighted_sum;

TEST(Linear, ForwardIsXTimesWTransposedAndAccumulates) {
  const int64_t M = 3, K = 4, N = 5;
  std::vector<double> x = random_values(M * K, 1), w = random_values(N * K, 2), y(M * N, 9.0);
  linear_forward(view(x, {M, K}), view(w, {N, K}), view(y, {M, N}));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += x[m * K + k] * w[n * K + k];
      EXPECT_NEAR(y[m * N + n], ref, 1e-14);
    }
  std::vector<double> twice = y;
  linear_forward(view(x, {M, K}), view(w, {N, K}), view(twice, {M, N}), Write::accumulate);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(twice[i], 2 * y[i], 1e-14);
}

// With a bias, every row of the output gets it after the product, in either write mode.
TEST(Linear, BiasIsAddedToEveryRowInBothModes) {
  const int64_t M = 3, N = 4, K = 5;
  std::vector<double> x = random_values(M * K, 1), w = random_values(N * K, 2), b = random_values(N, 3);
  for (Write mode : {Write::overwrite, Write::accumulate}) {
    std::vector<double> plain = random_values(M * N, 4), with_bias = plain;
    linear_forward(view(x, {M, K}), view(w, {N, K}), view(plain, {M, N}), mode);
    linear_forward(view(x, {M, K}), view(w, {N, K}), view(with_bias, {M, N}), mode, view(b, {N}));
    for (int64_t i = 0; i < M * N; ++i) EXPECT_DOUBLE_EQ(with_bias[i], plain[i] + b[i % N]);
  }
  std::vector<double> y(M * N), short_bias(N - 1);
  EXPECT_THROW(linear_forward(view(x, {M, K}), view(w, {N, K}), view(y, {M, N}), Write::overwrite,
                              view(short_bias, {N - 1})),
               Error);
}

// y = residual + x W^T + b, with the residual in its own buffer or in y itself; a residual that partly
// overlaps y is an error. Its gradients are the identity's and linear_backward's.
TEST(LinearResidual, IsTheResidualPlusTheLayer) {
  const int64_t M = 3, N = 4, K = 5;
  std::vector<double> x = random_values(M * K, 1), w = random_values(N * K, 2), b = random_values(N, 3);
  const std::vector<double> residual = random_values(M * N, 4);
  for (bool with_bias : {false, true}) {
    SCOPED_TRACE(with_bias ? "with bias" : "without bias");
    const Tensor bias = with_bias ? view(b, {N}) : Tensor();
    std::vector<double> want = residual, y(M * N, NAN), in_place = residual;
    linear_forward(view(x, {M, K}), view(w, {N, K}), view(want, {M, N}), Write::accumulate, bias);
    std::vector<double> r = residual;
    linear_residual_forward(view(x, {M, K}), view(w, {N, K}), view(r, {M, N}), view(y, {M, N}), bias);
    linear_residual_forward(view(x, {M, K}), view(w, {N, K}), view(in_place, {M, N}), view(in_place, {M, N}),
                            bias);
    EXPECT_EQ(y, want);
    EXPECT_EQ(in_place, want);
    EXPECT_EQ(r, residual) << "the residual was written";
  }
  std::vector<double> buf(M * N + 1);
  EXPECT_THROW(linear_residual_forward(view(x, {M, K}), view(w, {N, K}), Tensor::of(buf.data(), {M, N}),
                                       Tensor::of(buf.data() + 1, {M, N})),
               Error);
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {4, 3, 6}, {7, 9, 2}}) {
    std::vector<double> x = random_values(M * K, 3), w = random_values(N * K, 4);
    std::vector<double> weights = random_values(M * N, 5), y(M * N);
    auto loss = [&] {
      linear_forward(view(x, {M, K}), view(w, {N, K}), view(y, {M, N}));
      return weighted_sum(y, weights);
    };
    std::vector<double> dx(M * K, 3.0), dw(N * K, -2.0);
    linear_backward(view(weights, {M, N}), view(x, {M, K}), view(w, {N, K}), view(dx, {M, K}),
                    Write::overwrite, view(dw, {N, K}), Write::overwrite);
    EXPECT_GRAD(gradcheck(loss, x, dx));
    EXPECT_GRAD(gradcheck(loss, w, dw));
  }
}

// Each layer's weight gradient as linear_backward makes it, overwritten or added to.
TEST(Linear, WeightGradsOfLayersSharingAnInputAreLinearBackwards) {
  const int64_t M = 5, K = 4, N = 3;
  std::vector<double> x = random_values(M * K, 11);
  std::vector<std::vector<double>> dy, dw, want;
  for (int i = 0; i < 3; ++i) {
    dy.push_back(random_values(M * N, 12 + i));
    dw.push_back(random_values(N * K, 20 + i));
    want.push_back(dw.back());
    linear_backward(view(dy[i], {M, N}), view(x, {M, K}), view(want[i], {N, K}), Tensor(), Write::overwrite,
                    view(want[i], {N, K}), Write::accumulate);
  }
  const std::array dys{view(dy[0], {M, N}), view(dy[1], {M, N}), view(dy[2], {M, N})};
  const std::array dws{view(dw[0], {N, K}), view(dw[1], {N, K}), view(dw[2], {N, K})};
  linear_weight_grads(dys, view(x, {M, K}), dws, Write::accumulate);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(dw[i], want[i]) << "layer " << i;
  linear_weight_grads(std::span(dys).first(1), view(x, {M, K}), std::span(dws).first(1), Write::overwrite);
  linear_backward(view(dy[0], {M, N}), view(x, {M, K}), view(want[0], {N, K}), Tensor(), Write::overwrite,
                  view(want[0], {N, K}), Write::overwrite);
  EXPECT_EQ(dw[0], want[0]);
}

TEST(Linear, WeightGradsRejectUnpairedOrMisshapenGradients) {
  std::vector<double> x(6), dy(4), dw(6), odd(4);
  const std::array dys{view(dy, {2, 2})};
  const std::array two{view(dw, {2, 3}), view(dw, {2, 3})};
  EXPECT_THROW(linear_weight_grads(dys, view(x, {2, 3}), two, Write::overwrite), Error);
  const std::array misshapen{view(odd, {2, 2})};
  EXPECT_THROW(linear_weight_grads(dys, view(x, {2, 3}), misshapen, Write::overwrite), Error);
}

TEST(Linear, FloatAgreesWithDouble) {
  const int64_t M = 8, K = 16, N = 4;
  std::vector<double> xd = random_values(M * K, 6), wd = random_values(N * K, 7), yd(M * N);
  std::vector<float> xf(xd.begin(), xd.end()), wf(wd.begin(), wd.end()), yf(M * N);
  linear_forward(view(xd, {M, K}), view(wd, {N, K}), view(yd, {M, N}));
  linear_forward(view(xf, {M, K}), view(wf, {N, K}), view(yf, {M, N}));
  for (size_t i = 0; i < yd.size(); ++i) EXPECT_NEAR(yf[i], yd[i], 1e-5);
}

TEST(Linear, MismatchedInnerDimensionIsAnError) {
  std::vector<double> x(6), w(6), y(4);
  try {
    linear_forward(view(x, {2, 3}), view(w, {3, 2}), view(y, {2, 2}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear_forward: w must have shape [*,3], got f64[3,2]@cpu"),
              std::string::npos)
        << e.what();
  }
}

// Rows of y and dy padded past N (the logits' rows are): the products equal the compact ones, y's padding
// stays as it was, and dy's padding (NaN) is never read.
TEST(Linear, PaddedRowsEqualCompactOnes) {
  const int64_t M = 4, K = 3, N = 5, width = 8;
  std::vector<double> x = random_values(M * K, 1), w = random_values(N * K, 2), y(M * N),
                      dy = random_values(M * N, 3);
  std::vector<double> dx(M * K), dw(N * K);
  linear_forward(view(x, {M, K}), view(w, {N, K}), view(y, {M, N}));
  linear_backward(view(dy, {M, N}), view(x, {M, K}), view(w, {N, K}), view(dx, {M, K}), Write::overwrite,
                  view(dw, {N, K}), Write::overwrite);
  std::vector<double> y_padded = pad_rows(std::vector<double>(M * N, 0.0), M, N, width, -7.0);
  std::vector<double> dy_padded = pad_rows(dy, M, N, width, NAN), dx2(M * K), dw2(N * K);
  linear_forward(view(x, {M, K}), view(w, {N, K}), view(y_padded, {M, width}));
  linear_backward(view(dy_padded, {M, width}), view(x, {M, K}), view(w, {N, K}), view(dx2, {M, K}),
                  Write::overwrite, view(dw2, {N, K}), Write::overwrite);
  EXPECT_EQ(unpad_rows(y_padded, M, N, width), y);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = N; j < width; ++j) EXPECT_EQ(y_padded[m * width + j], -7.0);
  EXPECT_EQ(dx2, dx);
  EXPECT_EQ(dw2, dw);
  std::vector<double> narrow(M * (N - 1));
  EXPECT_THROW(linear_forward(view(x, {M, K}), view(w, {N, K}), view(narrow, {M, N - 1})), Error);
}

// The GELU-fused pair is, on the cpu, the composition of ops already checked by finite differences:
// bit for bit, in f64 and f32, with and without a bias, and for dy in padded rows.
template <class R>
void check_gelu_pair_is_the_composition(bool with_bias) {
  const int64_t M = 5, K = 7, N = 6, width = 9;
  auto values = [](int64_t n, uint64_t seed, double scale) {
    const std::vector<double> v = random_values(n, seed, -scale, scale);
    return std::vector<R>(v.begin(), v.end());
  };
  std::vector<R> x = values(M * K, 1, 1), w = values(N * K, 2, 1), b = values(N, 3, 1);
  std::vector<R> h(M * N, R(7)), act(M * N, R(7)), h_ref(M * N), act_ref(M * N);
  const Tensor bias = with_bias ? view(b, {N}) : Tensor();
  linear_gelu_forward(view(x, {M, K}), view(w, {N, K}), bias, view(h, {M, N}), view(act, {M, N}));
  linear_forward(view(x, {M, K}), view(w, {N, K}), view(h_ref, {M, N}), Write::overwrite, bias);
  gelu_forward(view(h_ref, {M, N}), view(act_ref, {M, N}));
  EXPECT_EQ(h, h_ref);
  EXPECT_EQ(act, act_ref);

  // The backward: the down projection w2[K2, N] takes act to y[M, K2]; dh = gelu'(h) (dy w2).
  const int64_t K2 = 4;
  std::vector<R> w2 = values(K2 * N, 4, 1), dy = values(M * K2, 5, 1), dh(M * N, R(7)), dact(M * N),
                 dh_ref(M * N);
  linear_dgelu_backward(view(dy, {M, K2}), view(w2, {K2, N}), view(h, {M, N}), view(dh, {M, N}));
  linear_backward(view(dy, {M, K2}), view(act, {M, N}), view(w2, {K2, N}), view(dact, {M, N}),
                  Write::overwrite, Tensor(), Write::overwrite);
  gelu_backward(view(dact, {M, N}), view(h, {M, N}), view(dh_ref, {M, N}));
  EXPECT_EQ(dh, dh_ref);
  std::vector<R> dy_padded(static_cast<size_t>(M * width), std::numeric_limits<R>::quiet_NaN()),
      dh_padded(M * N);
  for (int64_t m = 0; m < M; ++m) std::copy_n(dy.begin() + m * K2, K2, dy_padded.begin() + m * width);
  linear_dgelu_backward(view(dy_padded, {M, width}), view(w2, {K2, N}), view(h, {M, N}),
                        view(dh_padded, {M, N}));
  EXPECT_EQ(dh_padded, dh_ref);
}

TEST(LinearGelu, CpuPairIsTheCompositionBitForBit) {
  for (bool with_bias : {true, false}) {
    SCOPED_TRACE(with_bias ? "with bias" : "without bias");
    check_gelu_pair_is_the_composition<double>(with_bias);
    check_gelu_pair_is_the_composition<float>(with_bias);
  }
}

// Its outputs are written while its inputs are read, so h and act, and dh and dy or h, must not overlap.
TEST(LinearGelu, OverlappingBuffersAreErrors) {
  const int64_t M = 2, K = 3, N = 4;
  std::vector<double> x(M * K), w(N * K), buf(2 * M * N), dy(M * K);
  EXPECT_THROW(linear_gelu_forward(view(x, {M, K}), view(w, {N, K}), Tensor(), view(buf, {M, N}),
                                   Tensor::of(buf.data() + 1, {M, N})),
               Error);
  EXPECT_THROW(
      linear_gelu_forward(view(x, {M, K}), view(w, {N, K}), Tensor(), view(buf, {M, N}), view(buf, {M, N})),
      Error);
  std::vector<double> w2(K * N);
  EXPECT_THROW(
      linear_dgelu_backward(view(dy, {M, K}), view(w2, {K, N}), view(buf, {M, N}), view(buf, {M, N})), Error);
  EXPECT_NO_THROW(linear_dgelu_backward(view(dy, {M, K}), view(w2, {K, N}), view(buf, {M, N}),
                                        Tensor::of(buf.data() + M * N, {M, N})));
}

}  // namespace
}  // namespace pt::ops
