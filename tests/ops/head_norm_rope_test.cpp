// The fused per-head q/k norm and rotation on the cpu: its forward is the two reference ops composed, and
// its backward matches finite differences of that forward (q, k, both weights; rotated and not).
#include "ops/head_norm_rope.h"

#include "gradcheck.h"
#include "ops/rmsnorm.h"

#include <gtest/gtest.h>

namespace pt::ops {
namespace {

using testing::gradcheck;
using testing::random_values;
using testing::view;
using testing::weighted_sum;

struct Case {
  int64_t T, H, Hkv, D;
  bool rotating;
};

class HeadNormRopeGrad : public ::testing::TestWithParam<Case> {};

TEST_P(HeadNormRopeGrad, BackwardMatchesFiniteDifferences) {
  const auto [T, H, Hkv, D, rotating] = GetParam();
  std::vector<double> q_pre = random_values(T * H * D, 1), k_pre = random_values(T * Hkv * D, 2);
  std::vector<double> wq = random_values(D, 3, 0.5, 1.5), wk = random_values(D, 4, 0.5, 1.5);
  std::vector<double> rstd_q(T * H), rstd_k(T * Hkv), q(T * H * D), k(T * Hkv * D);
  std::vector<double> gq = random_values(T * H * D, 5), gk = random_values(T * Hkv * D, 6);
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t % 3 * 7);  // restarts
  RopeFrequencies freq = RopeFrequencies::plain(D, 1e4);
  freq.attention_scale = 1.1;
  HeadNormRope p{view(q_pre, {T, H, D}), view(k_pre, {T, Hkv, D}), view(wq, {D}), view(wk, {D}),
                 view(rstd_q, {T * H}),  view(rstd_k, {T * Hkv}),  view(pos, {T})};
  if (rotating) p.freq = &freq;
  p.eps = 1e-6;
  auto loss = [&] {
    head_norm_rope_forward(p, view(q, {T, H, D}), view(k, {T, Hkv, D}));
    return weighted_sum(q, gq) + weighted_sum(k, gk);
  };
  loss();
  std::vector<double> dq_pre(T * H * D), dk_pre(T * Hkv * D), dwq(D, 0.0), dwk(D, 0.0);
  head_norm_rope_backward(p, view(gq, {T, H, D}), view(gk, {T, Hkv, D}), view(dq_pre, {T, H, D}),
                          view(dk_pre, {T, Hkv, D}), view(dwq, {D}), view(dwk, {D}));
  EXPECT_GRAD(gradcheck(loss, q_pre, dq_pre));
  EXPECT_GRAD(gradcheck(loss, k_pre, dk_pre));
  EXPECT_GRAD(gradcheck(loss, wq, dwq));
  EXPECT_GRAD(gradcheck(loss, wk, dwk));
}

INSTANTIATE_TEST_SUITE_P(Shapes, HeadNormRopeGrad,
                         ::testing::Values(Case{1, 1, 1, 2, true}, Case{3, 2, 1, 8, true},
                                           Case{4, 3, 3, 6, false}, Case{5, 4, 2, 4, true}));

// Without rotation it is RMSNorm over rows of one head; in place (dq_pre = dq) gives what a separate
// buffer gives.
TEST(HeadNormRope, NormsAloneAreRmsNormAndInPlaceBackwardAgrees) {
  const int64_t T = 6, H = 3, Hkv = 1, D = 8;
  std::vector<double> q_pre = random_values(T * H * D, 1), k_pre = random_values(T * Hkv * D, 2);
  std::vector<double> wq = random_values(D, 3), wk = random_values(D, 4), rstd_q(T * H), rstd_k(T * Hkv);
  std::vector<double> q(T * H * D), k(T * Hkv * D), y(T * H * D), rstd(T * H);
  std::vector<int32_t> pos(static_cast<size_t>(T), 0);
  HeadNormRope p{view(q_pre, {T, H, D}), view(k_pre, {T, Hkv, D}), view(wq, {D}), view(wk, {D}),
                 view(rstd_q, {T * H}),  view(rstd_k, {T * Hkv}),  view(pos, {T})};
  p.eps = 1e-5;
  head_norm_rope_forward(p, view(q, {T, H, D}), view(k, {T, Hkv, D}));
  rmsnorm_forward(view(q_pre, {T * H, D}), view(wq, {D}), 1e-5, view(y, {T * H, D}), view(rstd, {T * H}));
  EXPECT_EQ(q, y);
  EXPECT_EQ(rstd_q, rstd);

  const RopeFrequencies freq = RopeFrequencies::plain(D, 500);
  p.freq = &freq;
  head_norm_rope_forward(p, view(q, {T, H, D}), view(k, {T, Hkv, D}));
  std::vector<double> gq = random_values(T * H * D, 5), gk = random_values(T * Hkv * D, 6);
  std::vector<double> dq(T * H * D), dk(T * Hkv * D), dwq(D, 1.0), dwk(D, 2.0), dwq2 = dwq, dwk2 = dwk;
  head_norm_rope_backward(p, view(gq, {T, H, D}), view(gk, {T, Hkv, D}), view(dq, {T, H, D}),
                          view(dk, {T, Hkv, D}), view(dwq, {D}), view(dwk, {D}));
  head_norm_rope_backward(p, view(gq, {T, H, D}), view(gk, {T, Hkv, D}), view(gq, {T, H, D}),
                          view(gk, {T, Hkv, D}), view(dwq2, {D}), view(dwk2, {D}));
  EXPECT_EQ(gq, dq);
  EXPECT_EQ(gk, dk);
  EXPECT_EQ(dwq, dwq2);
  EXPECT_EQ(dwk, dwk2);
}

}  // namespace
}  // namespace pt::ops
