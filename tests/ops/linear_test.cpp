#include "ops/linear.h"

#include "gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace pt::ops
