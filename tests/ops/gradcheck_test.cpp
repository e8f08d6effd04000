#include "gradcheck.h"

#include <gtest/gtest.h>

namespace pt::testing {
namespace {

// The checker itself must pass a correct gradient and catch a wrong one, or every op test is vacuous.
TEST(GradCheck, AcceptsTheTrueGradientAndPinpointsAWrongElement) {
  std::vector<double> x = random_values(5, 1);
  auto loss = [&] { return x[0] * x[1] + std::sin(x[2]) + x[3] * x[3] * x[4]; };
  std::vector<double> grad = {x[1], x[0], std::cos(x[2]), 2 * x[3] * x[4], x[3] * x[3]};
  EXPECT_GRAD(gradcheck(loss, x, grad));

  grad[3] *= 1.001;
  GradCheckReport bad = gradcheck(loss, x, grad);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.worst_index, 3);
}

TEST(GradCheck, NanGradientFails) {
  std::vector<double> x = {0.5};
  EXPECT_FALSE(gradcheck([&] { return x[0] * x[0]; }, x, {std::nan("")}).ok);
}

}  // namespace
}  // namespace pt::testing
