#include "ops/rope.h"

#include "gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pt::ops {
namespace {

using testing::gradcheck;
using testing::random_values;
using testing::view;
using testing::weighted_sum;

// HF rotate_half with D = 4: dims (0, 2) rotate by pos * theta^0, dims (1, 3) by pos * theta^(-1/2).
TEST(Rope, ForwardFollowsTheHuggingFacePairing) {
  const double theta = 100.0;
  std::vector<double> x = {0.1, -0.2, 0.3, 0.7}, out(4);
  std::vector<int32_t> pos = {3};
  rope_forward(view(x, {1, 1, 4}), view(pos, {1}), theta, view(out, {1, 1, 4}));
  const double a0 = 3.0, a1 = 3.0 / std::sqrt(theta);
  EXPECT_NEAR(out[0], x[0] * std::cos(a0) - x[2] * std::sin(a0), 1e-15);
  EXPECT_NEAR(out[2], x[2] * std::cos(a0) + x[0] * std::sin(a0), 1e-15);
  EXPECT_NEAR(out[1], x[1] * std::cos(a1) - x[3] * std::sin(a1), 1e-15);
  EXPECT_NEAR(out[3], x[3] * std::cos(a1) + x[1] * std::sin(a1), 1e-15);
}

TEST(Rope, PositionsRestartPerExampleAndInPlaceMatches) {
  const int64_t T = 5, N = 2, D = 8;
  std::vector<double> x = random_values(T * N * D, 1), out(T * N * D);
  std::vector<int32_t> pos = {0, 1, 2, 0, 1};  // two packed examples
  rope_forward(view(x, {T, N, D}), view(pos, {T}), 10000.0, view(out, {T, N, D}));
  for (int64_t i = 0; i < N * D; ++i) {
    EXPECT_EQ(out[i], x[i]) << "position 0 is the identity";
    EXPECT_EQ(out[3 * N * D + i], x[3 * N * D + i]) << "the second example restarts at position 0";
  }
  std::vector<double> in_place = x;
  rope_forward(view(in_place, {T, N, D}), view(pos, {T}), 10000.0, view(in_place, {T, N, D}));
  EXPECT_EQ(in_place, out);
  rope_backward(view(in_place, {T, N, D}), view(pos, {T}), 10000.0, view(in_place, {T, N, D}));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(in_place[i], x[i], 1e-14) << "backward inverts forward";
}

class RopeGrad : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, double>> {};

TEST_P(RopeGrad, BackwardMatchesFiniteDifferences) {
  const auto [N, D, theta] = GetParam();
  const int64_t T = 6;
  std::vector<double> x = random_values(T * N * D, 2), weights = random_values(T * N * D, 3), out(T * N * D);
  std::vector<int32_t> pos = {0, 1, 2, 3, 0, 17};
  auto loss = [&] {
    rope_forward(view(x, {T, N, D}), view(pos, {T}), theta, view(out, {T, N, D}));
    return weighted_sum(out, weights);
  };
  std::vector<double> dx(T * N * D);
  rope_backward(view(weights, {T, N, D}), view(pos, {T}), theta, view(dx, {T, N, D}));
  EXPECT_GRAD(gradcheck(loss, x, dx));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeGrad,
                         ::testing::Values(std::tuple<int64_t, int64_t, double>{1, 8, 10000.0},
                                           std::tuple<int64_t, int64_t, double>{4, 16, 500000.0},
                                           std::tuple<int64_t, int64_t, double>{2, 2, 10.0}));

TEST(Rope, RejectsOddHeadDimAndPartialOverlap) {
  std::vector<double> x(2 * 3 * 4);
  std::vector<int32_t> pos = {0, 1};
  EXPECT_THROW(rope_forward(view(x, {2, 1, 3}), view(pos, {2}), 1e4, view(x, {2, 1, 3})), Error);
  Tensor shifted = Tensor::of(x.data() + 1, {2, 1, 4});
  EXPECT_THROW(rope_forward(view(x, {2, 1, 4}), view(pos, {2}), 1e4, shifted), Error);
  pos[1] = -1;
  EXPECT_THROW(rope_forward(view(x, {2, 1, 4}), view(pos, {2}), 1e4, view(x, {2, 1, 4})), Error);
}

}  // namespace
}  // namespace pt::ops
