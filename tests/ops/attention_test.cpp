#include "ops/attention.h"

#include "gradcheck.h"
#include "ops/cpu/threads.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace pt::ops {
namespace {

using testing::gradcheck;
using testing::random_values;
using testing::view;
using testing::weighted_sum;

// Packed inputs and outputs of one attention call, held in vectors of R.
template <class R>
struct Problem {
  int64_t T, H, Hkv, D;
  std::vector<int32_t> cu, valid;
  std::vector<R> q, k, v, out, lse;
  int32_t window = 0;
  bool causal = true;

  Problem(std::vector<int32_t> lengths, int64_t h, int64_t hkv, int64_t d,
          std::vector<int32_t> valid_lens = {}, uint64_t seed = 1)
      : H(h), Hkv(hkv), D(d), cu(lengths.size() + 1, 0), valid(std::move(valid_lens)) {
    std::partial_sum(lengths.begin(), lengths.end(), cu.begin() + 1);
    T = cu.back();
    auto fill = [](std::vector<R>& x, int64_t n, uint64_t s) {
      std::vector<double> r = random_values(n, s);
      x.assign(r.begin(), r.end());
    };
    fill(q, T * H * D, seed);
    fill(k, T * Hkv * D, seed + 1);
    fill(v, T * Hkv * D, seed + 2);
    out.assign(static_cast<size_t>(T * H * D), R(0));
    lse.assign(static_cast<size_t>(H * T), R(0));
  }

  AttentionParams params(double scale = 0) {
    const int64_t S = static_cast<int64_t>(cu.size()) - 1;
    AttentionParams a{view(q, {T, H, D}),
                      view(k, {T, Hkv, D}),
                      view(v, {T, Hkv, D}),
                      view(cu, {S + 1}),
                      valid.empty() ? Tensor() : view(valid, {S}),
                      view(out, {T, H, D}),
                      view(lse, {H, T}),
                      scale};
    a.window = window;
    a.causal = causal;
    return a;
  }
};

// softmax(scale Q K^T + mask) V per segment and head, with the score matrix written out in full; the mask
// allows keys j <= i (causal; with a window only those with i - j < window) or every key (bidirectional).
void naive_attention(Problem<double>& p, double scale) {
  const int64_t group = p.H / p.Hkv;
  for (size_t s = 0; s + 1 < p.cu.size(); ++s) {
    const int64_t start = p.cu[s], len = p.valid.empty() ? p.cu[s + 1] - start : p.valid[s];
    for (int64_t h = 0; h < p.H; ++h) {
      const int64_t kvh = h / group;
      std::vector<double> S(static_cast<size_t>(len * len), -INFINITY);
      for (int64_t i = 0; i < len; ++i)
        for (int64_t j = 0; j < (p.causal ? i + 1 : len); ++j) {
          if (p.window > 0 && i - j >= p.window) continue;
          double d = 0;
          for (int64_t c = 0; c < p.D; ++c)
            d += p.q[((start + i) * p.H + h) * p.D + c] * p.k[((start + j) * p.Hkv + kvh) * p.D + c];
          S[i * len + j] = scale * d;
        }
      for (int64_t i = 0; i < len; ++i) {
        double z = 0;
        for (int64_t j = 0; j < len; ++j) z += std::exp(S[i * len + j]);
        p.lse[h * p.T + start + i] = std::log(z);
        for (int64_t c = 0; c < p.D; ++c) {
          double o = 0;
          for (int64_t j = 0; j < len; ++j)
            o += std::exp(S[i * len + j]) / z * p.v[((start + j) * p.Hkv + kvh) * p.D + c];
          p.out[((start + i) * p.H + h) * p.D + c] = o;
        }
      }
    }
  }
}

TEST(Attention, ForwardMatchesExplicitSoftmaxWithCausalMask) {
  for (int64_t hkv : {4, 2, 1}) {
    for (double scale : {0.0, 0.3}) {
      Problem<double> p({1, 7, 16, 3}, 4, hkv, 8), ref = p;
      attention_forward(p.params(scale));
      naive_attention(ref, scale == 0 ? 1 / std::sqrt(8.0) : scale);
      for (size_t i = 0; i < p.out.size(); ++i)
        ASSERT_NEAR(p.out[i], ref.out[i], 1e-13) << "hkv " << hkv << " at " << i;
      for (size_t i = 0; i < p.lse.size(); ++i) ASSERT_NEAR(p.lse[i], ref.lse[i], 1e-13) << "lse at " << i;
    }
  }
}

TEST(Attention, ForwardMatchesExplicitSoftmaxBidirectional) {
  // GQA and plain heads, plain and padded segments (1-token ones, one all pad, one with a single real token).
  for (int64_t hkv : {4, 2, 1}) {
    for (std::vector<int32_t> valid : {std::vector<int32_t>{}, std::vector<int32_t>{1, 5, 11, 0, 1}}) {
      Problem<double> p({1, 7, 16, 3, 1}, 4, hkv, 8, valid, 4);
      p.causal = false;
      Problem<double> ref = p;
      attention_forward(p.params(0.3));
      naive_attention(ref, 0.3);
      for (size_t i = 0; i < p.out.size(); ++i)
        ASSERT_NEAR(p.out[i], ref.out[i], 1e-13) << "hkv " << hkv << " at " << i;
      for (size_t i = 0; i < p.lse.size(); ++i) ASSERT_NEAR(p.lse[i], ref.lse[i], 1e-13) << "lse at " << i;
    }
  }
}

// The last real query of a segment sees every key of it either way: the same output and lse to the bit.
TEST(Attention, BidirectionalAgreesWithCausalOnEachSegmentsLastQuery) {
  Problem<double> causal({5, 1, 9, 6}, 4, 2, 8, {5, 1, 7, 0}, 6), bidir = causal;
  bidir.causal = false;
  attention_forward(causal.params());
  attention_forward(bidir.params());
  for (int64_t last : {4, 5, 12}) {
    for (int64_t c = 0; c < 4 * 8; ++c) EXPECT_EQ(causal.out[last * 32 + c], bidir.out[last * 32 + c]);
    for (int64_t h = 0; h < 4; ++h) EXPECT_EQ(causal.lse[h * causal.T + last], bidir.lse[h * bidir.T + last]);
  }
  EXPECT_NE(causal.out[6 * 32], bidir.out[6 * 32]) << "an earlier query sees later keys";
}

TEST(Attention, ForwardMatchesExplicitSoftmaxWithSlidingWindow) {
  // Windows of one key (the query itself), a few keys, about a segment, and beyond every segment; plain and
  // padded segments, with 1-token ones among them.
  for (int32_t window : {1, 2, 3, 7, 16, 100}) {
    for (std::vector<int32_t> valid : {std::vector<int32_t>{}, std::vector<int32_t>{1, 5, 11, 0, 1}}) {
      Problem<double> p({1, 7, 16, 3, 1}, 4, 2, 8, valid, 5);
      p.window = window;
      Problem<double> ref = p;
      attention_forward(p.params(0.3));
      naive_attention(ref, 0.3);
      for (size_t i = 0; i < p.out.size(); ++i)
        ASSERT_NEAR(p.out[i], ref.out[i], 1e-13) << "window " << window << " at " << i;
      for (size_t i = 0; i < p.lse.size(); ++i)
        ASSERT_NEAR(p.lse[i], ref.lse[i], 1e-13) << "window " << window << " lse at " << i;
    }
  }
}

TEST(Attention, WindowOfOneCopiesEachTokensValue) {
  Problem<double> p({3, 1, 6}, 4, 2, 8);
  p.window = 1;
  attention_forward(p.params());
  for (int64_t t = 0; t < p.T; ++t)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t c = 0; c < 8; ++c)
        ASSERT_NEAR(p.out[(t * 4 + h) * 8 + c], p.v[(t * 2 + h / 2) * 8 + c], 1e-15) << "token " << t;
}

TEST(Attention, WindowCoveringEverySegmentChangesNothing) {
  Problem<double> plain({9, 1, 12}, 4, 1, 8, {}, 2), windowed = plain;
  windowed.window = 12;  // the longest segment: every query sees its whole prefix
  attention_forward(plain.params());
  attention_forward(windowed.params());
  EXPECT_TRUE(plain.out == windowed.out && plain.lse == windowed.lse);
  std::vector<double> dout = random_values(plain.T * 4 * 8, 3);
  auto backward = [&](Problem<double>& p) {
    std::vector<double> dq(p.q.size()), dk(p.k.size()), dv(p.v.size());
    attention_backward(p.params(), {view(dout, {p.T, 4, 8}), view(dq, {p.T, 4, 8}), view(dk, {p.T, 1, 8}),
                                    view(dv, {p.T, 1, 8})});
    return std::vector<std::vector<double>>{dq, dk, dv};
  };
  EXPECT_TRUE(backward(plain) == backward(windowed));
}

TEST(Attention, FirstTokenOfEverySegmentCopiesItsValue) {
  Problem<double> p({3, 1, 4}, 2, 1, 8);
  attention_forward(p.params());
  for (int64_t start : {0, 3, 4})
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t c = 0; c < 8; ++c) EXPECT_NEAR(p.out[(start * 2 + h) * 8 + c], p.v[start * 8 + c], 1e-15);
}

struct GradCase {
  std::vector<int32_t> lengths, valid;
  int64_t H, Hkv, D;
  int32_t window = 0;
  bool causal = true;
};

void PrintTo(const GradCase& c, std::ostream* os) {
  *os << "segments " << ::testing::PrintToString(c.lengths) << " valid " << ::testing::PrintToString(c.valid)
      << " H=" << c.H << " Hkv=" << c.Hkv << " D=" << c.D << " window=" << c.window
      << (c.causal ? " causal" : " bidirectional");
}

class AttentionGrad : public ::testing::TestWithParam<GradCase> {};

TEST_P(AttentionGrad, BackwardMatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  Problem<double> p(c.lengths, c.H, c.Hkv, c.D, c.valid, 7);
  p.window = c.window;
  p.causal = c.causal;
  std::vector<double> weights = random_values(p.T * p.H * p.D, 11);
  auto loss = [&] {
    attention_forward(p.params());
    return weighted_sum(p.out, weights);
  };
  loss();
  std::vector<double> dq(p.q.size(), 9.0), dk(p.k.size(), 9.0), dv(p.v.size(), 9.0);
  attention_backward(p.params(), {view(weights, {p.T, p.H, p.D}), view(dq, {p.T, p.H, p.D}),
                                  view(dk, {p.T, p.Hkv, p.D}), view(dv, {p.T, p.Hkv, p.D})});
  set_cpu_threads(1);  // thousands of tiny forwards: thread start-up would dominate
  EXPECT_GRAD(gradcheck(loss, p.q, dq));
  EXPECT_GRAD(gradcheck(loss, p.k, dk));
  EXPECT_GRAD(gradcheck(loss, p.v, dv));
  set_cpu_threads(0);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionGrad,
    ::testing::Values(GradCase{{1, 7, 16, 3}, {}, 4, 4, 8}, GradCase{{1, 7, 16, 3}, {}, 4, 2, 16},
                      GradCase{{1, 7, 16, 3}, {}, 4, 1, 8}, GradCase{{37}, {}, 2, 1, 16},
                      GradCase{{5, 40, 4}, {3, 35, 0}, 4, 2, 8},  // padded segments, one all pad
                      // Sliding windows: the query alone, two keys, within the 37-token segment (whose
                      // query blocks of 16 then start past some keys), and longer than every segment.
                      GradCase{{1, 7, 16, 3}, {}, 4, 2, 8, 1}, GradCase{{1, 7, 16, 3}, {}, 4, 1, 8, 2},
                      GradCase{{37, 1}, {}, 2, 1, 16, 5}, GradCase{{37}, {}, 2, 2, 8, 20},
                      GradCase{{1, 7, 16, 3}, {}, 4, 2, 8, 100}, GradCase{{5, 40, 4}, {3, 35, 0}, 4, 2, 8, 6},
                      // Bidirectional: plain and GQA heads, a segment longer than the 16-query blocks,
                      // padded segments (pads must not be keys of the earlier real queries either).
                      GradCase{{1, 7, 16, 3}, {}, 4, 4, 8, 0, false},
                      GradCase{{1, 7, 16, 3}, {}, 4, 2, 16, 0, false},
                      GradCase{{37, 1}, {}, 2, 1, 16, 0, false},
                      GradCase{{5, 40, 4}, {3, 35, 0}, 4, 2, 8, 0, false}));

TEST(Attention, PadsProduceZerosAndRealRowsIgnoreThem) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    Problem<double> padded({6, 4}, 4, 2, 8, {4, 2}, 3);
    padded.causal = causal;
    attention_forward(padded.params());
    // The same real tokens as unpadded segments of lengths 4 and 2 (the pad rows hold random junk).
    Problem<double> real({4, 2}, 4, 2, 8, {}, 3);
    real.causal = causal;
    auto copy_rows = [](const std::vector<double>& from, std::vector<double>& to, int64_t from_row,
                        int64_t to_row, int64_t rows, int64_t width) {
      std::copy_n(from.begin() + from_row * width, rows * width, to.begin() + to_row * width);
    };
    for (auto [src, dst, n] : {std::tuple<int64_t, int64_t, int64_t>{0, 0, 4}, {6, 4, 2}}) {
      copy_rows(padded.q, real.q, src, dst, n, 4 * 8);
      copy_rows(padded.k, real.k, src, dst, n, 2 * 8);
      copy_rows(padded.v, real.v, src, dst, n, 2 * 8);
    }
    attention_forward(real.params());
    for (int64_t c = 0; c < 4 * 8; ++c) {
      for (int64_t t : {0, 3}) EXPECT_EQ(padded.out[t * 32 + c], real.out[t * 32 + c]);
      for (int64_t t : {1}) EXPECT_EQ(padded.out[(6 + t) * 32 + c], real.out[(4 + t) * 32 + c]);
      for (int64_t t : {4, 5, 8, 9}) EXPECT_EQ(padded.out[t * 32 + c], 0.0) << "pad row " << t;
    }
  }
}

TEST(Attention, ChangingOneExampleLeavesOthersBitwiseUnchanged) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    Problem<float> a({5, 9, 2}, 4, 2, 16, {}, 5);
    a.causal = causal;
    Problem<float> b = a;
    for (int64_t t = 5; t < 14; ++t)  // rewrite example 1 entirely
      for (int64_t i = 0; i < 2 * 16; ++i) b.k[t * 32 + i] += 0.5f, b.v[t * 32 + i] -= 0.25f;
    for (int64_t i = 5 * 64; i < 14 * 64; ++i) b.q[i] *= -1.0f;
    std::vector<float> dout(a.out.size(), 0.25f);
    // Runs forward and backward; returns out, dq, dk, dv (rows of 64 floats for q, 32 for k and v).
    auto run = [&](Problem<float>& p) {
      attention_forward(p.params());
      std::vector<float> dq(p.q.size()), dk(p.k.size()), dv(p.v.size());
      attention_backward(p.params(), {view(dout, {p.T, 4, 16}), view(dq, {p.T, 4, 16}),
                                      view(dk, {p.T, 2, 16}), view(dv, {p.T, 2, 16})});
      return std::vector<std::vector<float>>{p.out, dq, dk, dv};
    };
    const auto ra = run(a), rb = run(b);
    for (size_t which = 0; which < ra.size(); ++which) {
      const size_t width = ra[which].size() / static_cast<size_t>(a.T);
      for (size_t i = 0; i < ra[which].size(); ++i) {
        const size_t t = i / width;
        if (t >= 5 && t < 14) continue;
        ASSERT_EQ(ra[which][i], rb[which][i]) << "output " << which << " token " << t;
      }
      EXPECT_NE(ra[which][6 * width], rb[which][6 * width]) << "the edited example itself changed";
    }
  }
}

TEST(Attention, ResultsDoNotDependOnThreadCount) {
  auto run = [](int threads, bool causal) {
    set_cpu_threads(threads);
    Problem<float> p({40, 3, 17, 1, 25}, 4, 1, 16, {}, 9);
    p.causal = causal;
    attention_forward(p.params());
    std::vector<float> dout(p.out.size(), 0.5f), dq(p.q.size()), dk(p.k.size()), dv(p.v.size());
    attention_backward(p.params(), {view(dout, {p.T, 4, 16}), view(dq, {p.T, 4, 16}), view(dk, {p.T, 1, 16}),
                                    view(dv, {p.T, 1, 16})});
    set_cpu_threads(0);
    return std::tuple{p.out, p.lse, dq, dk, dv};
  };
  for (bool causal : {true, false}) EXPECT_TRUE(run(1, causal) == run(3, causal)) << "causal " << causal;
}

TEST(Attention, InconsistentArgumentsAreErrors) {
  Problem<double> p({3, 4}, 4, 2, 8);
  p.cu.back() = 6;  // does not reach T = 7
  EXPECT_THROW(attention_forward(p.params()), Error);
  Problem<double> gqa({3}, 3, 2, 8);  // 3 heads over 2 kv heads
  EXPECT_THROW(attention_forward(gqa.params()), Error);
  Problem<double> pad({3, 4}, 2, 2, 8, {3, 5});  // valid length beyond the segment
  EXPECT_THROW(attention_forward(pad.params()), Error);
  Problem<double> window({3, 4}, 2, 2, 8);
  window.window = -1;
  EXPECT_THROW(attention_forward(window.params()), Error);
  window.window = 2;  // no family has a bidirectional sliding window
  window.causal = false;
  EXPECT_THROW(attention_forward(window.params()), Error);
}

}  // namespace
}  // namespace pt::ops
