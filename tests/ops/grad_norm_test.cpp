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

// The deferred version against clip_grad_norm on copies: the same norm and the same scaled gradients, with
// max_norm above the norm (nothing changes) and below it (clipped).
TEST(GradNorm, DeferredClipEqualsClipGradNorm) {
  for (double max_norm : {100.0, 0.5}) {
    SCOPED_TRACE(max_norm);
    std::vector<float> a(37), b(5);
    const std::vector<double> ra = testing::random_values(37, 1), rb = testing::random_values(5, 2, -3, 3);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(ra[i]);
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(rb[i]);
    const std::vector<float> original = a;
    std::vector<float> a2 = a, b2 = b;
    std::vector<Tensor> want = {view(a, {37}), view(b, {5})}, got = {view(a2, {37}), view(b2, {5})};
    const double want_norm = clip_grad_norm(want, max_norm);
    std::vector<double> norm = {-1.0};
    clip_grad_norm_deferred(got, max_norm, view(norm, {1}));
    EXPECT_EQ(norm[0], want_norm);
    EXPECT_EQ(a2, a);
    EXPECT_EQ(b2, b);
    EXPECT_EQ(a2 == original, max_norm > want_norm) << "clipped exactly when the norm exceeds max_norm";
  }
}

TEST(GradNorm, DeferredClipRejectsABadNormOrMaximum) {
  std::vector<float> a = {3.0f, 4.0f};
  std::vector<double> norm2(2), norm1(1);
  std::vector<float> norm_f32(1);
  std::vector<Tensor> grads = {view(a, {2})};
  EXPECT_THROW(clip_grad_norm_deferred(grads, 1.0, view(norm2, {2})), Error);
  EXPECT_THROW(clip_grad_norm_deferred(grads, 1.0, view(norm_f32, {1})), Error);
  EXPECT_THROW(clip_grad_norm_deferred(grads, 1.0, Tensor(norm1.data(), DType::f64, {1}, Device::cuda)),
               Error);
  EXPECT_THROW(clip_grad_norm_deferred(grads, 0.0, view(norm1, {1})), Error);
  clip_grad_norm_deferred({}, 1.0, view(norm1, {1}));
  EXPECT_EQ(norm1[0], 0.0) << "no gradients: norm 0";
  EXPECT_EQ(a[0], 3.0f) << "rejected calls change nothing";
}

// The deferred norm alone: global_norm's value, the gradients untouched; the same refusals as the clip's.
TEST(GradNorm, DeferredNormIsTheGlobalNormAndScalesNothing) {
  std::vector<float> a = {3.0f, 0.0f}, b = {4.0f};
  const std::vector<Tensor> grads = {view(a, {2}), view(b, {1})};
  std::vector<double> norm = {-1.0}, norm2(2);
  global_norm_deferred(grads, view(norm, {1}));
  EXPECT_EQ(norm[0], global_norm(grads));
  EXPECT_EQ(a, (std::vector<float>{3.0f, 0.0f}));
  EXPECT_EQ(b, std::vector<float>{4.0f});
  EXPECT_THROW(global_norm_deferred(grads, view(norm2, {2})), Error);
  EXPECT_THROW(global_norm_deferred(grads, Tensor(norm.data(), DType::f64, {1}, Device::cuda)), Error);
  global_norm_deferred({}, view(norm, {1}));
  EXPECT_EQ(norm[0], 0.0) << "no gradients: norm 0";
}

// clip_factor is the factor clip_grad_norm scales by, to the bit: every clipped gradient is
// float(double(g) * clip_factor(max_norm, norm)). 1 where nothing is clipped.
TEST(GradNorm, ClipFactorIsTheFactorTheClipScalesBy) {
  const std::vector<double> r = testing::random_values(101, 3, -2, 2);
  std::vector<float> g(r.begin(), r.end());
  const std::vector<float> original = g;
  const std::vector<Tensor> grads = {view(g, {101})};
  const double max_norm = 0.3, norm = clip_grad_norm(grads, max_norm), factor = clip_factor(max_norm, norm);
  ASSERT_LT(factor, 1);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], float(double(original[i]) * factor)) << i;
  EXPECT_EQ(clip_factor(norm * 2, norm), 1.0) << "below max_norm";
  EXPECT_EQ(clip_factor(0, norm), 1.0) << "max_norm 0: no clipping";
  EXPECT_EQ(clip_factor(INFINITY, norm), 1.0);
  EXPECT_EQ(clip_factor(1.0, NAN), 1.0) << "a non-finite norm (a step the trainer skips)";
  EXPECT_THROW(clip_factor(-1.0, norm), Error);
}

}  // namespace
}  // namespace pt::ops
