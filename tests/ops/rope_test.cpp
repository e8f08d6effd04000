#include "ops/rope.h"

#include "gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pt::ops {
namespace {

using testing::gradcheck;
using testing::random_values;
using testing::view;
using testing::weighted_sum;

// A table no theta gives (scaled types blend and divide frequencies), with YaRN-like attention scale.
RopeFrequencies scaled_table(int64_t D, uint64_t seed) {
  RopeFrequencies f;
  f.inv_freq = random_values(D / 2, seed, 1e-4, 1.5);
  f.attention_scale = 1.2;
  return f;
}

TEST(Rope, PlainFrequenciesArePowersOfTheta) {
  const RopeFrequencies f = RopeFrequencies::plain(8, 500000.0);
  ASSERT_EQ(f.inv_freq.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(f.inv_freq[i], std::pow(500000.0, -2.0 * i / 8));
  EXPECT_EQ(f.attention_scale, 1.0);
  EXPECT_THROW(RopeFrequencies::plain(7, 1e4), Error);
  EXPECT_THROW(RopeFrequencies::plain(8, 0), Error);
}

// HF rotate_half with D = 4: dims (0, 2) rotate by pos * inv_freq[0], dims (1, 3) by pos * inv_freq[1], and
// cos and sin carry the attention scale.
TEST(Rope, ForwardFollowsTheHuggingFacePairingAndScale) {
  std::vector<double> x = {0.1, -0.2, 0.3, 0.7}, out(4);
  std::vector<int32_t> pos = {3};
  for (const double scale : {1.0, 0.8}) {
    RopeFrequencies f;
    f.inv_freq = {0.9, 0.013};
    f.attention_scale = scale;
    rope_forward(view(x, {1, 1, 4}), view(pos, {1}), f, view(out, {1, 1, 4}));
    const double a0 = 3 * 0.9, a1 = 3 * 0.013;
    EXPECT_NEAR(out[0], scale * (x[0] * std::cos(a0) - x[2] * std::sin(a0)), 1e-15);
    EXPECT_NEAR(out[2], scale * (x[2] * std::cos(a0) + x[0] * std::sin(a0)), 1e-15);
    EXPECT_NEAR(out[1], scale * (x[1] * std::cos(a1) - x[3] * std::sin(a1)), 1e-15);
    EXPECT_NEAR(out[3], scale * (x[3] * std::cos(a1) + x[1] * std::sin(a1)), 1e-15);
  }
}

TEST(Rope, PositionsRestartPerExampleAndInPlaceMatches) {
  const int64_t T = 5, N = 2, D = 8;
  const RopeFrequencies f = RopeFrequencies::plain(D, 10000.0);
  std::vector<double> x = random_values(T * N * D, 1), out(T * N * D);
  std::vector<int32_t> pos = {0, 1, 2, 0, 1};  // two packed examples
  rope_forward(view(x, {T, N, D}), view(pos, {T}), f, view(out, {T, N, D}));
  for (int64_t i = 0; i < N * D; ++i) {
    EXPECT_EQ(out[i], x[i]) << "position 0 is the identity";
    EXPECT_EQ(out[3 * N * D + i], x[3 * N * D + i]) << "the second example restarts at position 0";
  }
  std::vector<double> in_place = x;
  rope_forward(view(in_place, {T, N, D}), view(pos, {T}), f, view(in_place, {T, N, D}));
  EXPECT_EQ(in_place, out);
  rope_backward(view(in_place, {T, N, D}), view(pos, {T}), f, view(in_place, {T, N, D}));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(in_place[i], x[i], 1e-14) << "backward inverts forward";
}

// A scaled rotation is s * R: its backward s * R^T undoes it up to s^2.
TEST(Rope, ScaledBackwardIsTheScaledTransposedRotation) {
  const int64_t T = 4, N = 3, D = 6;
  const RopeFrequencies f = scaled_table(D, 4);
  std::vector<double> x = random_values(T * N * D, 5), y(T * N * D), back(T * N * D);
  std::vector<int32_t> pos = {0, 9, 2, 31};
  rope_forward(view(x, {T, N, D}), view(pos, {T}), f, view(y, {T, N, D}));
  rope_backward(view(y, {T, N, D}), view(pos, {T}), f, view(back, {T, N, D}));
  const double s2 = f.attention_scale * f.attention_scale;
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], s2 * x[i], 1e-14);
}

class RopeGrad : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, double>> {};

// theta 0 stands for the scaled random table.
TEST_P(RopeGrad, BackwardMatchesFiniteDifferences) {
  const auto [N, D, theta] = GetParam();
  const RopeFrequencies f = theta > 0 ? RopeFrequencies::plain(D, theta) : scaled_table(D, 6);
  const int64_t T = 6;
  std::vector<double> x = random_values(T * N * D, 2), weights = random_values(T * N * D, 3), out(T * N * D);
  std::vector<int32_t> pos = {0, 1, 2, 3, 0, 17};
  auto loss = [&] {
    rope_forward(view(x, {T, N, D}), view(pos, {T}), f, view(out, {T, N, D}));
    return weighted_sum(out, weights);
  };
  std::vector<double> dx(T * N * D);
  rope_backward(view(weights, {T, N, D}), view(pos, {T}), f, view(dx, {T, N, D}));
  EXPECT_GRAD(gradcheck(loss, x, dx));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeGrad,
                         ::testing::Values(std::tuple<int64_t, int64_t, double>{1, 8, 10000.0},
                                           std::tuple<int64_t, int64_t, double>{4, 16, 500000.0},
                                           std::tuple<int64_t, int64_t, double>{2, 2, 10.0},
                                           std::tuple<int64_t, int64_t, double>{3, 12, 0.0},
                                           std::tuple<int64_t, int64_t, double>{2, 64, 0.0}));

// The packed forms: q, k and v out of one row of the three side by side, q and k rotated as rope_forward
// rotates them, v copied; and the backward against finite differences of the loss sum(w_q q) + sum(w_k k)
// + sum(w_v v) in the packed input.
TEST(RopeQkv, PackedRowsRotateAsTheirPartsAndBackwardMatchesFiniteDifferences) {
  const int64_t T = 5, H = 4, Hkv = 2, D = 6, P = (H + 2 * Hkv) * D;
  const RopeFrequencies f = scaled_table(D, 7);
  std::vector<int32_t> pos = {0, 3, 1, 0, 40};
  std::vector<double> qkv = random_values(T * P, 8), q(T * H * D), k(T * Hkv * D), v(T * Hkv * D);
  std::vector<double> wq = random_values(T * H * D, 9), wk = random_values(T * Hkv * D, 10),
                      wv = random_values(T * Hkv * D, 11);
  const auto forward = [&] {
    rope_forward_qkv(view(qkv, {T, P}), view(pos, {T}), f, view(q, {T, H, D}), view(k, {T, Hkv, D}),
                     view(v, {T, Hkv, D}));
  };
  forward();
  // Each part as a tensor of its own, rotated alone.
  std::vector<double> q_part, k_part, v_part, q_want(q.size()), k_want(k.size());
  for (int64_t t = 0; t < T; ++t) {
    const auto row = qkv.begin() + t * P;
    q_part.insert(q_part.end(), row, row + H * D);
    k_part.insert(k_part.end(), row + H * D, row + (H + Hkv) * D);
    v_part.insert(v_part.end(), row + (H + Hkv) * D, row + P);
  }
  rope_forward(view(q_part, {T, H, D}), view(pos, {T}), f, view(q_want, {T, H, D}));
  rope_forward(view(k_part, {T, Hkv, D}), view(pos, {T}), f, view(k_want, {T, Hkv, D}));
  EXPECT_EQ(q, q_want);
  EXPECT_EQ(k, k_want);
  EXPECT_EQ(v, v_part);

  auto loss = [&] {
    forward();
    return weighted_sum(q, wq) + weighted_sum(k, wk) + weighted_sum(v, wv);
  };
  std::vector<double> dqkv(T * P, std::numeric_limits<double>::quiet_NaN());
  rope_backward_qkv(view(wq, {T, H, D}), view(wk, {T, Hkv, D}), view(wv, {T, Hkv, D}), view(pos, {T}), f,
                    view(dqkv, {T, P}));
  EXPECT_GRAD(gradcheck(loss, qkv, dqkv));
  // The packed tensor may not share memory with its parts, and its width must hold them.
  EXPECT_THROW(rope_forward_qkv(view(qkv, {T, P}), view(pos, {T}), f, view(qkv, {T, H, D}),
                                view(k, {T, Hkv, D}), view(v, {T, Hkv, D})),
               Error);
  EXPECT_THROW(rope_forward_qkv(view(qkv, {T, P - D}), view(pos, {T}), f, view(q, {T, H, D}),
                                view(k, {T, Hkv, D}), view(v, {T, Hkv, D})),
               Error);
}

TEST(Rope, RejectsOddHeadDimPartialOverlapAndAWrongTable) {
  std::vector<double> x(2 * 3 * 4);
  std::vector<int32_t> pos = {0, 1};
  const RopeFrequencies f = RopeFrequencies::plain(4, 1e4);
  EXPECT_THROW(rope_forward(view(x, {2, 1, 3}), view(pos, {2}), RopeFrequencies{{1.0}}, view(x, {2, 1, 3})),
               Error);
  Tensor shifted = Tensor::of(x.data() + 1, {2, 1, 4});
  EXPECT_THROW(rope_forward(view(x, {2, 1, 4}), view(pos, {2}), f, shifted), Error);
  try {
    rope_backward(view(x, {2, 3, 4}), view(pos, {2}), RopeFrequencies::plain(8, 1e4), view(x, {2, 3, 4}));
    ADD_FAILURE() << "no error for 4 frequencies at head dim 4";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rope_backward: 4 rope frequencies for head dim 4; need head_dim / 2 = 2");
  }
  RopeFrequencies bad = f;
  bad.inv_freq[1] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(rope_forward(view(x, {2, 1, 4}), view(pos, {2}), bad, view(x, {2, 1, 4})), Error);
  bad = f;
  bad.attention_scale = std::numeric_limits<double>::infinity();
  EXPECT_THROW(rope_forward(view(x, {2, 1, 4}), view(pos, {2}), bad, view(x, {2, 1, 4})), Error);
  pos[1] = -1;
  EXPECT_THROW(rope_forward(view(x, {2, 1, 4}), view(pos, {2}), f, view(x, {2, 1, 4})), Error);
}

}  // namespace
}  // namespace pt::ops
