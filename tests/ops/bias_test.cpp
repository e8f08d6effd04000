#include "ops/bias.h"

#include "gradcheck.h"
#include "ops/cpu/threads.h"

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

TEST(Bias, AddsTheBiasToEveryRow) {
  std::vector<double> y = {1, 2, 3, 4, 5, 6}, b = {10, 20, 30};
  bias_add(view(y, {2, 3}), view(b, {3}));
  EXPECT_EQ(y, (std::vector<double>{11, 22, 33, 14, 25, 36}));
}

TEST(Bias, BackwardMatchesFiniteDifferences) {
  for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 1}, {1, 5}, {7, 1}, {6, 9}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << M << " N=" << N);
    const std::vector<double> y0 = random_values(M * N, 1);
    std::vector<double> b = random_values(N, 2), weights = random_values(M * N, 3), y;
    auto loss = [&] {
      y = y0;
      bias_add(view(y, {M, N}), view(b, {N}));
      return weighted_sum(y, weights);
    };
    std::vector<double> db(N, 5.0);
    bias_backward(view(weights, {M, N}), view(db, {N}), Write::overwrite);
    EXPECT_GRAD(gradcheck(loss, b, db));
  }
}

TEST(Bias, GradientAccumulatesAndIgnoresThreadCount) {
  const int64_t M = 301, N = 23;
  std::vector<float> dy(M * N);
  const std::vector<double> r = random_values(M * N, 4);
  for (int64_t i = 0; i < M * N; ++i) dy[i] = float(r[i]);
  auto dbias = [&](int threads, Write mode, std::vector<float> db) {
    set_cpu_threads(threads);
    bias_backward(view(dy, {M, N}), view(db, {N}), mode);
    set_cpu_threads(0);
    return db;
  };
  const std::vector<float> one = dbias(1, Write::overwrite, std::vector<float>(N));
  EXPECT_EQ(one, dbias(7, Write::overwrite, std::vector<float>(N, 5.0f)));
  const std::vector<float> added = dbias(3, Write::accumulate, std::vector<float>(N, 1.0f));
  for (int64_t n = 0; n < N; ++n) EXPECT_FLOAT_EQ(added[n], one[n] + 1.0f);
}

TEST(Bias, NoRowsGiveAZeroGradient) {
  std::vector<double> dy, db = {3, 4};
  bias_backward(view(dy, {0, 2}), view(db, {2}), Write::overwrite);
  EXPECT_EQ(db, (std::vector<double>{0, 0}));
}

// A bias wider than y's rows is an error (a narrower one is y's rows padded: see below).
TEST(Bias, RejectsABiasWiderThanTheRows) {
  std::vector<double> y(6), b(4);
  EXPECT_THROW(bias_add(view(y, {2, 3}), view(b, {4})), Error);
  EXPECT_THROW(bias_backward(view(y, {2, 3}), view(b, {4}), Write::overwrite), Error);
}

// Rows padded past the bias's N: the same sums, the padding neither changed (add) nor read (backward).
TEST(Bias, PaddedRowsEqualCompactOnes) {
  const int64_t M = 5, N = 3, width = 8;
  std::vector<double> y = random_values(M * N, 1), b = random_values(N, 2), db(N), db2(N);
  std::vector<double> y_padded = pad_rows(y, M, N, width, NAN);
  bias_add(view(y, {M, N}), view(b, {N}));
  bias_add(view(y_padded, {M, width}), view(b, {N}));
  EXPECT_EQ(unpad_rows(y_padded, M, N, width), y);
  EXPECT_TRUE(std::isnan(y_padded[N]));
  bias_backward(view(y, {M, N}), view(db, {N}), Write::overwrite);
  bias_backward(view(y_padded, {M, width}), view(db2, {N}), Write::overwrite);
  EXPECT_EQ(db2, db);
}

}  // namespace
}  // namespace pt::ops
