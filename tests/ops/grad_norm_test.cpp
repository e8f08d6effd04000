#include "ops/grad_norm.h"

#include "gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pt::ops {
namespace {

using testing::view;

TEST(GradNorm, NormSpansAllTensors) {
  std::vector<float> a = {3.0f, 0.0f};
  std::vector<float> b = {4.0f};
  std::vector<Tensor> grads = {view(a, {2}), view(b, {1, 1})};
  EXPECT_DOUBLE_EQ(global_norm(grads), 5.0);
}

TEST(GradNorm, ClipScalesOnlyAboveTheMaximum) {
  std::vector<double> a = {3.0, 0.0}, b = {4.0};
  std::vector<Tensor> grads = {view(a, {2}), view(b, {1})};
  EXPECT_DOUBLE_EQ(clip_grad_norm(grads, 10.0), 5.0);
  EXPECT_EQ(a[0], 3.0) << "below max_norm nothing changes";
  EXPECT_DOUBLE_EQ(clip_grad_norm(grads, 1.0), 5.0);
  const double factor = 1.0 / (5.0 + 1e-6);
  EXPECT_DOUBLE_EQ(a[0], 3.0 * factor);
  EXPECT_DOUBLE_EQ(b[0], 4.0 * factor);
  EXPECT_NEAR(global_norm(grads), 1.0, 1e-6);
}

TEST(GradNorm, AccumulatesInDouble) {
  // 2^24 ones: a float accumulator would stall at 2^24 and lose the last additions.
  std::vector<float> ones((1 << 24) + 16, 1.0f);
  std::vector<Tensor> grads = {view(ones, {static_cast<int64_t>(ones.size())})};
  EXPECT_DOUBLE_EQ(global_norm(grads), std::sqrt(double(ones.size())));
}

}  // namespace
}  // namespace pt::ops
