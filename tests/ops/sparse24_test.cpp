// The 2:4 sparsity ops on the cpu against independent brute-force and statistical checks: the 90
// transposable patterns, optimal masks and their tie-breaking, MVUE pruning (structure, values,
// unbiasedness), masked decay, apply_mask and mask_flips.
#include "ops/sparse24.h"

#include "core/float16.h"
#include "gradcheck.h"
#include "ops/cpu/threads.h"
#include "ops/sparse24_common.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace pt::ops {
namespace {

using testing::random_values;
using testing::view;

bool transposable(unsigned bits) {
  for (int i = 0; i < 4; ++i) {
    int row = 0, col = 0;
    for (int j = 0; j < 4; ++j) row += (bits >> (4 * i + j)) & 1, col += (bits >> (4 * j + i)) & 1;
    if (row != 2 || col != 2) return false;
  }
  return true;
}

// Every 16-bit mask, filtered: the patterns as the spec defines them, in ascending order.
std::vector<uint16_t> brute_force_patterns() {
  std::vector<uint16_t> all;
  for (unsigned bits = 0; bits < 65536; ++bits)
    if (transposable(bits)) all.push_back(static_cast<uint16_t>(bits));
  return all;
}

template <class T>
double block_value(const std::vector<T>& w, int64_t K, int64_t br, int64_t bc, int i) {
  return double(w[static_cast<size_t>((4 * br + i / 4) * K + 4 * bc + i % 4)]);
}

unsigned block_bits(const std::vector<uint8_t>& mask, int64_t K, int64_t br, int64_t bc) {
  unsigned bits = 0;
  for (int i = 0; i < 16; ++i) {
    const uint8_t m = mask[static_cast<size_t>((4 * br + i / 4) * K + 4 * bc + i % 4)];
    EXPECT_LE(m, 1) << "mask bytes are 0 or 1";
    bits |= unsigned{m != 0} << i;
  }
  return bits;
}

template <class T>
double kept_sum(const std::vector<T>& w, int64_t K, int64_t br, int64_t bc, unsigned bits) {
  double s = 0;
  for (int i = 0; i < 16; ++i)
    if ((bits >> i) & 1) s += std::fabs(block_value(w, K, br, bc, i));
  return s;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Sparse24Patterns, ExactlyNinetyInAscendingOrderAsBruteForceFindsThem) {
  const std::vector<uint16_t> all = brute_force_patterns();
  ASSERT_EQ(all.size(), 90u);
  ASSERT_EQ(kTransposablePatterns24, 90);
  const uint16_t* table = transposable_patterns24();
  for (int p = 0; p < kTransposablePatterns24; ++p) EXPECT_EQ(table[p], all[static_cast<size_t>(p)]) << p;
}

// Every block of the mask is transposable and keeps the largest |w| sum of all 90 patterns; with f64
// weights (distinct sums almost surely) it is exactly the brute-force argmax.
TEST(TransposableMask24, EveryBlockIsTheBestTransposablePattern) {
  const std::vector<uint16_t> patterns = brute_force_patterns();
  const int64_t N = 64, K = 96;
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<double> w = random_values(N * K, 10 + trial, -2, 2);
    if (trial == 2)  // heavy tails: a few large weights dominate, as trained weights have
      for (double& x : w) x = x * x * x * x * x;
    std::vector<float> wf(w.begin(), w.end());
    std::vector<uint8_t> mask(N * K, 7), mask_f(N * K, 7);
    transposable_mask24(view(w, {N, K}), view(mask, {N, K}));
    transposable_mask24(view(wf, {N, K}), view(mask_f, {N, K}));
    for (int64_t br = 0; br < N / 4; ++br)
      for (int64_t bc = 0; bc < K / 4; ++bc) {
        double best = -1;
        unsigned best_bits = 0;
        for (uint16_t p : patterns)
          if (const double s = kept_sum(w, K, br, bc, p); s > best) best = s, best_bits = p;
        const unsigned got = block_bits(mask, K, br, bc), got_f = block_bits(mask_f, K, br, bc);
        ASSERT_TRUE(transposable(got)) << "block " << br << "," << bc << " bits " << got;
        ASSERT_TRUE(transposable(got_f)) << "f32 block " << br << "," << bc << " bits " << got_f;
        EXPECT_EQ(got, best_bits) << "block " << br << "," << bc;
        // f32 sums may reorder near-ties only: the kept sum is within fp32 rounding of the best.
        EXPECT_GE(kept_sum(wf, K, br, bc, got_f), best * (1 - 1e-6)) << "f32 block " << br << "," << bc;
      }
  }
}

// When several patterns share the best sum, the first in ascending bitmask order wins: blocks whose |w|
// is 1 on the union of two patterns (any sign) and 0 elsewhere, where every pattern inside the union ties.
TEST(TransposableMask24, TiesGoToTheFirstPatternInAscendingOrder) {
  const std::vector<uint16_t> patterns = brute_force_patterns();
  std::mt19937 rng(5);
  const int64_t N = 4, K = 4 * 200;
  std::vector<double> w(N * K);
  std::vector<unsigned> want(K / 4);
  for (int64_t bc = 0; bc < K / 4; ++bc) {
    const unsigned uni = bc == 0   ? 0u
                         : bc == 1 ? 0xFFFFu
                                   : unsigned{patterns[rng() % 90]} | patterns[rng() % 90];
    for (int i = 0; i < 16; ++i)
      w[static_cast<size_t>((i / 4) * K + 4 * bc + i % 4)] =
          ((uni >> i) & 1) ? (rng() % 2 ? 1.0 : -1.0) : 0.0;
    want[static_cast<size_t>(bc)] = uni == 0 ? patterns[0] : 0;
    for (uint16_t p : patterns)
      if ((p & uni) == p) {
        want[static_cast<size_t>(bc)] = p;
        break;
      }
  }
  std::vector<float> wf(w.begin(), w.end());
  std::vector<uint8_t> mask(N * K), mask_f(N * K);
  transposable_mask24(view(w, {N, K}), view(mask, {N, K}));
  transposable_mask24(view(wf, {N, K}), view(mask_f, {N, K}));
  for (int64_t bc = 0; bc < K / 4; ++bc) {
    EXPECT_EQ(block_bits(mask, K, 0, bc), want[static_cast<size_t>(bc)]) << "block " << bc;
    EXPECT_EQ(block_bits(mask_f, K, 0, bc), want[static_cast<size_t>(bc)]) << "f32 block " << bc;
  }
  EXPECT_EQ(want[0], patterns[0]);  // all zero: everything ties
  EXPECT_EQ(want[1], patterns[0]);  // all one: everything ties
}

TEST(TransposableMask24, RejectsShapesThatAreNotWholeBlocks) {
  std::vector<double> w(6 * 8);
  std::vector<uint8_t> mask(6 * 8);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{6, 8}, {8, 6}, {2, 24}}) {
    const std::string msg = error_of([&] { transposable_mask24(view(w, {n, k}), view(mask, {n, k})); });
    EXPECT_NE(msg.find("multiples of 4"), std::string::npos) << n << "x" << k << ": '" << msg << "'";
  }
  EXPECT_THROW(transposable_mask24(view(w, {8, 4}), view(mask, {4, 8})), Error);
  std::vector<double> not_a_mask(8 * 4);
  EXPECT_THROW(transposable_mask24(view(w, {8, 4}), view(not_a_mask, {8, 4})), Error);
  std::vector<bf16> wb(8 * 4);
  EXPECT_THROW(transposable_mask24(view(wb, {8, 4}), view(mask, {8, 4})), Error);  // bf16: cuda only
}

TEST(MaskFlips, CountsEntriesThatDiffer) {
  std::mt19937 rng(2);
  std::vector<uint8_t> a(37 * 20), b(37 * 20);
  int64_t want = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(rng() % 2), b[i] = static_cast<uint8_t>(rng() % 2);
    want += a[i] != b[i];
  }
  EXPECT_GT(want, 0);
  EXPECT_EQ(mask_flips(view(a, {37, 20}), view(b, {37, 20})), want);
  EXPECT_EQ(mask_flips(view(a, {37, 20}), view(a, {37, 20})), 0);
  EXPECT_THROW(mask_flips(view(a, {37, 20}), view(b, {20, 37})), Error);
}

TEST(ApplyMask, KeepsMaskedEntriesAndZeroesTheRestInPlaceOrCast) {
  const int64_t N = 8, K = 12;
  std::vector<double> w = random_values(N * K, 3);
  w[5] = std::numeric_limits<double>::quiet_NaN();
  std::vector<uint8_t> mask(N * K);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = static_cast<uint8_t>((i * 7 + i / 5) % 3 == 0);
  mask[5] = 0;  // a pruned NaN is gone
  std::vector<double> out(N * K, 99), in_place = w;
  apply_mask(view(w, {N, K}), view(mask, {N, K}), view(out, {N, K}));
  apply_mask(view(in_place, {N, K}), view(mask, {N, K}), view(in_place, {N, K}));
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(out[i], mask[i] ? w[i] : 0.0) << i;
    EXPECT_EQ(in_place[i], out[i]) << i;
  }

  std::vector<float> wf(w.begin(), w.end());
  std::vector<bf16> cast_out(N * K, bf16{0xFFFF}), bf_in_place(N * K);
  apply_mask(view(wf, {N, K}), view(mask, {N, K}), view(cast_out, {N, K}));
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(cast_out[i].bits, mask[i] ? float_to_bf16(wf[i]) : 0) << i;
    bf_in_place[i].bits = float_to_bf16(wf[i]);
  }
  apply_mask(view(bf_in_place, {N, K}), view(mask, {N, K}), view(bf_in_place, {N, K}));
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(bf_in_place[i].bits, cast_out[i].bits) << i;

  EXPECT_THROW(apply_mask(view(wf, {N, K}), view(mask, {N, K}),
                          Tensor::of(reinterpret_cast<bf16*>(wf.data()), {N, K})),
               Error);  // a cast cannot be in place
  EXPECT_THROW(apply_mask(view(w, {N, K}), view(mask, {N, K}), view(cast_out, {N, K})),
               Error);  // f64 -> bf16
  std::vector<double> small(N * K);
  EXPECT_THROW(apply_mask(view(w, {N, K}), view(mask, {K, N}), view(small, {N, K})), Error);
}

TEST(MaskedDecay, AddsLambdaTimesThePrunedWeights) {
  const int64_t N = 4, K = 9;
  const double lambda = 0.03;
  std::vector<double> w = random_values(N * K, 4), grad = random_values(N * K, 5), want = grad;
  std::vector<uint8_t> mask(N * K);
  for (size_t i = 0; i < mask.size(); ++i) {
    mask[i] = static_cast<uint8_t>(i % 3 != 0);
    if (!mask[i]) want[i] += lambda * w[i];
  }
  masked_decay(view(w, {N, K}), view(mask, {N, K}), lambda, view(grad, {N, K}));
  for (size_t i = 0; i < w.size(); ++i) EXPECT_DOUBLE_EQ(grad[i], want[i]) << i;
  EXPECT_THROW(masked_decay(view(w, {N, K}), view(mask, {N, K}), -1.0, view(grad, {N, K})), Error);
  EXPECT_THROW(masked_decay(view(w, {N, K}), view(mask, {N, K}), NAN, view(grad, {N, K})), Error);
}

// The MVUE inclusion probabilities by an independent route: water-filling over the sorted magnitudes,
// capping the largest at 1 while c |g_i| would exceed it. p_i = 0 for zeros.
std::vector<double> inclusion_probabilities(const double* g) {
  std::vector<double> a(4), p(4, 0);
  for (int i = 0; i < 4; ++i) a[i] = std::fabs(g[i]);
  int nonzero = 0;
  for (double x : a) nonzero += x > 0;
  if (nonzero <= 2) {
    for (int i = 0; i < 4; ++i) p[i] = a[i] > 0 ? 1 : 0;
    return p;
  }
  std::vector<int> order = {0, 1, 2, 3};
  std::sort(order.begin(), order.end(), [&](int x, int y) { return a[x] > a[y]; });
  int capped = 0;
  double c = 0;
  for (;;) {
    double rest = 0;
    for (int j = capped; j < 4; ++j) rest += a[order[j]];
    c = (2.0 - capped) / rest;
    if (c * a[order[capped]] <= 1) break;
    ++capped;
  }
  for (int j = 0; j < 4; ++j) p[order[j]] = j < capped ? 1 : c * a[order[j]];
  return p;
}

// Gradients with exact zeros (groups with 0..4 nonzeros) and dominant entries (capped probabilities).
std::vector<double> mvue_input(int64_t M, int64_t N, uint64_t seed) {
  std::vector<double> g = random_values(M * N, seed, -1, 1);
  std::mt19937 rng(static_cast<unsigned>(seed));
  for (double& x : g) {
    if (rng() % 4 == 0) x = 0;
    if (rng() % 8 == 0) x *= 20;
  }
  return g;
}

double group_value(const std::vector<double>& g, int64_t M, int64_t N, int64_t q, int64_t n, int r) {
  const int64_t row = 4 * q + r;
  return row < M ? g[static_cast<size_t>(row * N + n)] : 0.0;
}

// In every column each group of 4 rows keeps min(2, nonzeros) entries, each g_i / p_i (exactly g_i when
// at most two are nonzero, and always for p_i = 1), and zeroes the rest; for f64 and f32, in place or not.
TEST(Mvue24, KeepsTwoPerGroupScaledByTheirInclusionProbability) {
  for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 5}, {37, 19}, {64, 33}, {11, 3}}) {
    std::vector<double> g = mvue_input(M, N, 100 + M);
    std::vector<float> gf(g.begin(), g.end());
    const std::vector<double> gw(gf.begin(), gf.end());  // the f32 input, widened
    std::vector<double> out(M * N, 1e9);
    mvue24(view(g, {M, N}), 42, view(out, {M, N}));
    std::vector<float> out_f = gf;
    mvue24(view(out_f, {M, N}), 42, view(out_f, {M, N}));  // in place
    for (int precision = 0; precision < 2; ++precision) {
      const std::vector<double>& in = precision == 0 ? g : gw;
      const std::vector<double> got = precision == 0 ? out : std::vector<double>(out_f.begin(), out_f.end());
      const double rtol = precision == 0 ? 1e-12 : 1e-6;
      for (int64_t q = 0; q < (M + 3) / 4; ++q)
        for (int64_t n = 0; n < N; ++n) {
          SCOPED_TRACE(::testing::Message() << (precision ? "f32" : "f64") << " M=" << M << " N=" << N
                                            << " group " << q << " column " << n);
          double v[4];
          int nonzero = 0, kept = 0;
          for (int r = 0; r < 4; ++r) nonzero += (v[r] = group_value(in, M, N, q, n, r)) != 0;
          const std::vector<double> p = inclusion_probabilities(v);
          for (int r = 0; r < 4 && 4 * q + r < M; ++r) {
            const double o = got[static_cast<size_t>((4 * q + r) * N + n)];
            if (nonzero <= 2 || p[r] == 1) {
              EXPECT_EQ(o, v[r]) << "row " << r;
            } else if (o != 0) {
              EXPECT_NEAR(o, v[r] / p[r], rtol * std::fabs(v[r] / p[r])) << "row " << r << " p " << p[r];
            }
            kept += o != 0;
          }
          EXPECT_EQ(kept, std::min(nonzero, 2));
        }
    }
  }
}

// E[out] = g: the mean over S seeds of each entry is g_i within 5 standard errors. One draw of entry i
// is g_i / p_i with probability p_i and 0 otherwise, so Var = g_i^2 / p_i - g_i^2 = g_i^2 (1 / p_i - 1)
// and the mean's standard error is sqrt(Var / S). u has 23 bits, which moves each inclusion probability
// by at most 2 * 2^-23 and the mean by at most that times |g_i / p_i|; the bound adds it. An estimator
// that kept the two largest entries, or forgot to divide by p_i, misses by far more.
TEST(Mvue24, IsUnbiasedOverSeeds) {
  const int64_t M = 11, N = 9, S = 20000;  // M = 11: the last group holds 3 rows and a zero
  std::vector<double> g = mvue_input(M, N, 7);
  g[0 * N + 0] = 8, g[1 * N + 0] = 1, g[2 * N + 0] = 0.5, g[3 * N + 0] = -0.25;  // capped largest entry
  g[0 * N + 1] = 1, g[1 * N + 1] = -1, g[2 * N + 1] = 1, g[3 * N + 1] = 1;       // uniform, p = 1/2
  std::vector<double> sum(M * N, 0), out(M * N);
  set_cpu_threads(1);  // thousands of tiny calls: thread start-up would dominate
  for (int64_t s = 0; s < S; ++s) {
    mvue24(view(g, {M, N}), static_cast<uint64_t>(s) * 977 + 3, view(out, {M, N}));
    for (size_t i = 0; i < out.size(); ++i) sum[i] += out[i];
  }
  set_cpu_threads(0);
  int sampled = 0;
  for (int64_t q = 0; q < (M + 3) / 4; ++q)
    for (int64_t n = 0; n < N; ++n) {
      double v[4];
      for (int r = 0; r < 4; ++r) v[r] = group_value(g, M, N, q, n, r);
      const std::vector<double> p = inclusion_probabilities(v);
      for (int r = 0; r < 4 && 4 * q + r < M; ++r) {
        if (v[r] == 0) continue;
        const double variance = v[r] * v[r] * (1 / p[r] - 1);
        const double bound =
            5 * std::sqrt(variance / double(S)) + 2 * 0x1p-23 * std::fabs(v[r] / p[r]) + 1e-12;
        const double mean = sum[static_cast<size_t>((4 * q + r) * N + n)] / double(S);
        EXPECT_NEAR(mean, v[r], bound) << "row " << 4 * q + r << " column " << n << " p " << p[r];
        sampled += p[r] < 1;
      }
    }
  EXPECT_GT(sampled, 20);  // the test exercised real sampling, not just kept-for-sure entries
}

// The two positions mvue_keep24 reports are what the packers encode (ops/cuda/sparse24_encode.cuh): the
// entries it keeps nonzero, completed by the lowest other positions, in ascending order. So packing g
// pruned by MVUE and pruning inside the packing write the same metadata, also for groups of zeros, single
// nonzeros and ties.
TEST(Mvue24, KeptPositionsAreTheNonzerosCompletedByTheLowestOthers) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-2, 2);
  for (int trial = 0; trial < 20000; ++trial) {
    float g[4];
    for (float& x : g) {
      const auto r = static_cast<uint32_t>(rng() % 6);
      x = r < 2 ? 0.0f : r == 2 ? 0.5f : r == 3 ? 64 * uniform(rng) : uniform(rng);
    }
    const float u = static_cast<float>(rng() >> 9) * 0x1p-23f;
    const sparse24::Kept24<float> k = sparse24::mvue_keep24(g, u);
    SCOPED_TRACE(::testing::Message()
                 << "g " << g[0] << " " << g[1] << " " << g[2] << " " << g[3] << " u " << u);
    unsigned chosen = (k.v0 != 0 ? 1u << k.i0 : 0u) | (k.v1 != 0 ? 1u << k.i1 : 0u);
    while (__builtin_popcount(chosen) < 2) chosen |= (~chosen & 0xFu) & (0u - (~chosen & 0xFu));
    ASSERT_LT(k.i0, k.i1);
    EXPECT_EQ(chosen, (1u << k.i0) | (1u << k.i1));
  }
}

TEST(Mvue24, DrawsDependOnTheSeedOnly) {
  const int64_t M = 16, N = 32;
  std::vector<float> g(M * N);
  const std::vector<double> v = random_values(M * N, 9);
  std::copy(v.begin(), v.end(), g.begin());
  std::vector<float> a(M * N), b(M * N), c(M * N);
  mvue24(view(g, {M, N}), 1, view(a, {M, N}));
  mvue24(view(g, {M, N}), 1, view(b, {M, N}));
  mvue24(view(g, {M, N}), 2, view(c, {M, N}));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<float> other(M * N);
  EXPECT_THROW(mvue24(view(g, {M, N}), 1, view(other, {N, M})), Error);
  std::vector<float> shifted(M * N + 1);
  EXPECT_THROW(mvue24(Tensor::of(shifted.data(), {M, N}), 1, Tensor::of(shifted.data() + 1, {M, N})), Error);
}

}  // namespace
}  // namespace pt::ops
