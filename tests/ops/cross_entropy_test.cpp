#include "ops/cross_entropy.h"

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

TEST(CrossEntropy, LossSumsOverNonIgnoredTokens) {
  const int64_t T = 3, V = 4;
  std::vector<double> logits = random_values(T * V, 1, -3, 3);
  std::vector<int32_t> targets = {2, -100, 0};
  CrossEntropyResult r = cross_entropy(view(logits, {T, V}), view(targets, {T}), 1.0, Tensor());
  double ref = 0;
  for (int64_t t : {0, 2}) {
    double z = 0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(logits[t * V + j]);
    ref += std::log(z) - logits[t * V + targets[t]];
  }
  EXPECT_EQ(r.tokens, 2);
  EXPECT_NEAR(r.loss_sum, ref, 1e-13);
}

TEST(CrossEntropy, GradientIsScaledDerivativeOfTheLossSum) {
  const int64_t T = 5, V = 7;
  const double scale = 1.0 / 11;  // as if the optimizer step had 11 loss tokens over several micro-batches
  std::vector<double> logits = random_values(T * V, 2, -2, 2);
  std::vector<int32_t> targets = {6, -100, 0, 3, 3};
  auto loss = [&] {
    return scale * cross_entropy(view(logits, {T, V}), view(targets, {T}), 0, Tensor()).loss_sum;
  };
  std::vector<double> dlogits(T * V, 5.0);
  cross_entropy(view(logits, {T, V}), view(targets, {T}), scale, view(dlogits, {T, V}));
  EXPECT_GRAD(gradcheck(loss, logits, dlogits));
  for (int64_t j = 0; j < V; ++j) EXPECT_EQ(dlogits[1 * V + j], 0.0) << "ignored row";
}

TEST(CrossEntropy, InPlaceGradientEqualsSeparateBuffer) {
  const int64_t T = 4, V = 9;
  std::vector<float> logits(T * V), separate(T * V);
  std::vector<double> r = random_values(T * V, 3, -5, 5);
  for (size_t i = 0; i < r.size(); ++i) logits[i] = float(r[i]);
  std::vector<int32_t> targets = {1, 8, -100, 0};
  const CrossEntropyResult a =
      cross_entropy(view(logits, {T, V}), view(targets, {T}), 0.25, view(separate, {T, V}));
  const CrossEntropyResult b =
      cross_entropy(view(logits, {T, V}), view(targets, {T}), 0.25, view(logits, {T, V}));
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(logits, separate);
}

TEST(CrossEntropy, HugeLogitsStayFinite) {
  std::vector<float> logits = {1000.0f, 990.0f, -1000.0f}, d(3);
  std::vector<int32_t> targets = {1};
  const CrossEntropyResult r = cross_entropy(view(logits, {1, 3}), view(targets, {1}), 1.0, view(d, {1, 3}));
  EXPECT_NEAR(r.loss_sum, 10.0 + std::log1p(std::exp(-10.0)), 1e-4);
  EXPECT_NEAR(d[0] + d[1] + d[2], 0.0, 1e-6);
}

TEST(CrossEntropy, GradientPartlyOverlappingTheLogitsIsRejected) {
  std::vector<double> logits(2 * 3 + 1);
  std::vector<int32_t> targets = {0, 1};
  EXPECT_THROW(
      cross_entropy(view(logits, {2, 3}), view(targets, {2}), 1.0, Tensor::of(logits.data() + 1, {2, 3})),
      Error);
}

TEST(CrossEntropy, TargetOutsideVocabularyIsAnError) {
  std::vector<double> logits(6);
  std::vector<int32_t> targets = {0, 3};
  EXPECT_THROW(cross_entropy(view(logits, {2, 3}), view(targets, {2}), 1.0, Tensor()), Error);
  targets[1] = -1;
  EXPECT_THROW(cross_entropy(view(logits, {2, 3}), view(targets, {2}), 1.0, Tensor()), Error);
}

TEST(CrossEntropyAccumulate, EqualsCrossEntropyAndAddsOverCalls) {
  const int64_t T = 6, V = 11;
  const double scale = 0.125;
  std::vector<double> logits = random_values(T * V, 4, -4, 4), logits2 = random_values(T * V, 5, -4, 4);
  std::vector<int32_t> targets = {3, -100, 10, 0, -100, 7}, targets2 = {1, 2, -100, 4, 5, 6};
  std::vector<double> want_grad(T * V), got_grad(T * V, 5.0), grad2(T * V);
  const CrossEntropyResult want =
      cross_entropy(view(logits, {T, V}), view(targets, {T}), scale, view(want_grad, {T, V}));
  const CrossEntropyResult want2 = cross_entropy(view(logits2, {T, V}), view(targets2, {T}), 1.0, Tensor());
  std::vector<double> sums = {0.0, 0.0};
  cross_entropy_accumulate(view(logits, {T, V}), view(targets, {T}), scale, view(got_grad, {T, V}),
                           view(sums, {2}));
  EXPECT_EQ(sums[0], want.loss_sum);
  EXPECT_EQ(sums[1], double(want.tokens));
  EXPECT_EQ(got_grad, want_grad);
  cross_entropy_accumulate(view(logits2, {T, V}), view(targets2, {T}), 1.0, Tensor(), view(sums, {2}));
  EXPECT_EQ(sums[0], want.loss_sum + want2.loss_sum);
  EXPECT_EQ(sums[1], double(want.tokens + want2.tokens));
  EXPECT_EQ(want.tokens + want2.tokens, 9);
}

TEST(CrossEntropyAccumulate, WrongSumsAreRejected) {
  std::vector<double> logits(6), sums3(3), sums2(2);
  std::vector<float> sums_f32(2);
  std::vector<int32_t> targets = {0, 1};
  const Tensor l = view(logits, {2, 3}), t = view(targets, {2});
  EXPECT_THROW(cross_entropy_accumulate(l, t, 1.0, Tensor(), view(sums3, {3})), Error);
  EXPECT_THROW(cross_entropy_accumulate(l, t, 1.0, Tensor(), view(sums2, {1, 2})), Error);
  EXPECT_THROW(cross_entropy_accumulate(l, t, 1.0, Tensor(), view(sums_f32, {2})), Error);
  EXPECT_THROW(cross_entropy_accumulate(l, t, 1.0, Tensor(), Tensor()), Error);
  EXPECT_THROW(
      cross_entropy_accumulate(l, t, 1.0, Tensor(), Tensor(sums2.data(), DType::f64, {2}, Device::cuda)),
      Error);
  EXPECT_NO_THROW(cross_entropy_accumulate(l, t, 1.0, Tensor(), view(sums2, {2})));
}

// Rows padded past the vocabulary (NaN there): the loss and the gradient's first V columns equal those of
// the compact rows, in place or not, and the gradient's padding is 0.
TEST(CrossEntropy, PaddedRowsEqualCompactOnes) {
  const int64_t T = 4, V = 5, width = 8;
  std::vector<double> logits = random_values(T * V, 1, -3, 3), dlogits(T * V);
  std::vector<int32_t> targets = {4, -100, 0, 2};
  const CrossEntropyResult want =
      cross_entropy(view(logits, {T, V}), view(targets, {T}), 0.5, view(dlogits, {T, V}));
  for (bool in_place : {false, true}) {
    std::vector<double> padded = pad_rows(logits, T, V, width, NAN), grad(T * width);
    const CrossEntropyResult got =
        cross_entropy(view(padded, {T, width}), view(targets, {T}), 0.5,
                      in_place ? view(padded, {T, width}) : view(grad, {T, width}), V);
    EXPECT_EQ(got.loss_sum, want.loss_sum);
    EXPECT_EQ(got.tokens, want.tokens);
    const std::vector<double>& g = in_place ? padded : grad;
    EXPECT_EQ(unpad_rows(g, T, V, width), dlogits);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = V; j < width; ++j) EXPECT_EQ(g[t * width + j], 0.0) << "padding of row " << t;
  }
  std::vector<double> padded = pad_rows(logits, T, V, width, NAN);
  EXPECT_THROW(cross_entropy(view(padded, {T, width}), view(targets, {T}), 1.0, Tensor(), width + 1), Error);
}

}  // namespace
}  // namespace pt::ops
