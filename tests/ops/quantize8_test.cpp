// The 8-bit dynamic code maps and the block-wise quantizer of the AdamW moments (ops/quantize8.h).
#include "ops/quantize8.h"
#include "ops/adamw.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <vector>

namespace pt::ops {
namespace {

using namespace quant8;

struct Map {
  std::span<const float> values;
  uint8_t zero;
  const char* name;
};

std::vector<Map> maps() {
  return {{signed_map(), kSignedZero, "signed"}, {unsigned_map(), kUnsignedZero, "unsigned"}};
}

TEST(Quantize8, MapsAreSortedAndHoldZeroAndOne) {
  for (const Map& m : maps()) {
    SCOPED_TRACE(m.name);
    EXPECT_TRUE(std::adjacent_find(m.values.begin(), m.values.end(), std::greater_equal<float>()) ==
                m.values.end())
        << "strictly ascending";
    EXPECT_EQ(m.values[m.zero], 0.0f);
    EXPECT_EQ(m.values.back(), 1.0f);
  }
  EXPECT_EQ(unsigned_map().size(), 256u);
  EXPECT_EQ(unsigned_map().front(), 0.0f);
  EXPECT_EQ(unsigned_map()[1], 1e-7f);  // the smallest decade holds one value
  ASSERT_EQ(signed_map().size(), 255u);
  EXPECT_EQ(signed_map().front(), -1.0f);
  for (size_t i = 0; i < signed_map().size(); ++i)
    EXPECT_EQ(signed_map()[i], -signed_map()[signed_map().size() - 1 - i]) << "symmetric at " << i;
  EXPECT_EQ(signed_map()[kSignedZero + 1], 1e-6f);
}

TEST(Quantize8, NearestCodeIsTheNearestEntryWithTiesToTheLowerIndex) {
  const float map[] = {-1.0f, -0.5f, 0.0f, 0.25f, 1.0f};
  EXPECT_EQ(nearest_code(map, 5, -2.0f), 0);
  EXPECT_EQ(nearest_code(map, 5, 2.0f), 4);
  EXPECT_EQ(nearest_code(map, 5, 0.125f), 2) << "a tie goes to the lower index";
  EXPECT_EQ(nearest_code(map, 5, 0.13f), 3);
  EXPECT_EQ(nearest_code(map, 5, -0.75f), 0);
  EXPECT_EQ(nearest_code(map, 5, -0.7f), 1);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(nearest_code(map, 5, map[i]), i);
  // Exhaustively against a linear scan on the real maps.
  for (const Map& m : maps()) {
    const int n = static_cast<int>(m.values.size());
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int k = 0; k < 20000; ++k) {
      const float x = m.zero == kUnsignedZero ? std::fabs(u(rng)) * std::pow(10.0f, -float(k % 8)) : u(rng);
      int best = 0;
      for (int i = 1; i < n; ++i)
        if (std::fabs(x - m.values[i]) < std::fabs(x - m.values[best])) best = i;
      ASSERT_EQ(m.values[nearest_code(m.values.data(), n, x)], m.values[best]) << m.name << " x=" << x;
    }
  }
}

// Quantizes xs in blocks of kQuantBlock as the optimizer does (absmax, then codes) and decodes them.
std::vector<float> round_trip(const Map& m, const std::vector<float>& xs, std::vector<float>* absmax_out) {
  const int n = static_cast<int>(m.values.size());
  std::vector<float> out(xs.size());
  for (size_t b = 0; b < xs.size(); b += kQuantBlock) {
    const size_t e = std::min(xs.size(), b + size_t{kQuantBlock});
    float absmax = 0;
    for (size_t i = b; i < e; ++i) absmax = std::max(absmax, std::fabs(xs[i]));
    for (size_t i = b; i < e; ++i)
      out[i] = decode(m.values.data(), encode(m.values.data(), n, m.zero, xs[i], absmax), absmax);
    if (absmax_out) absmax_out->push_back(absmax);
  }
  return out;
}

// |decoded - x| is at most half the map's gap around x / absmax, times absmax (plus a few ulps of the
// division and the product); over a whole block at most 0.00704 absmax (signed), 0.00352 (unsigned).
void expect_bounded(const Map& m, const std::vector<float>& xs, const char* what) {
  SCOPED_TRACE(std::string(m.name) + ", " + what);
  std::vector<float> absmax;
  const std::vector<float> got = round_trip(m, xs, &absmax);
  const float worst_half_gap = m.zero == kUnsignedZero ? 0.9f / 256 : 0.9f / 128;
  double max_relative = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float a = absmax[i / kQuantBlock];
    const double err = std::fabs(double(got[i]) - double(xs[i]));
    if (a == 0) {
      ASSERT_EQ(got[i], 0.0f);
      continue;
    }
    const float x = xs[i] / a;
    const auto hi = std::lower_bound(m.values.begin(), m.values.end(), x);
    const float upper = hi == m.values.end() ? m.values.back() : *hi,
                lower = hi == m.values.begin() ? *hi : *(hi - 1);
    const double bound = (double(upper) - double(lower)) / 2 * a + 4e-7 * double(a);
    ASSERT_LE(err, bound) << "element " << i << " x=" << xs[i] << " absmax=" << a;
    max_relative = std::max(max_relative, err / a);
    if (std::fabs(xs[i]) == a) {
      ASSERT_EQ(got[i], xs[i]) << "the absmax element decodes exactly";
    }
  }
  EXPECT_LE(max_relative, worst_half_gap * (1 + 1e-4));
  std::cout << "[ measured ] " << m.name << " " << what << ": max |error| / absmax = " << max_relative
            << "\n";
}

TEST(Quantize8, RoundTripErrorIsBoundedByHalfTheMapGapTimesTheBlockAbsmax) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t n = 5 * kQuantBlock + 37;  // the last block partial
  for (const Map& m : maps()) {
    const bool positive = m.zero == kUnsignedZero;
    const auto sample = [&](float scale) {
      std::vector<float> xs(n);
      for (float& x : xs) x = scale * (positive ? std::fabs(normal(rng) * normal(rng)) : normal(rng));
      return xs;
    };
    expect_bounded(m, sample(1.0f), "random");
    expect_bounded(m, sample(1e-30f), "tiny");
    expect_bounded(m, sample(1e30f), "huge");
    expect_bounded(m, std::vector<float>(n, 0.0f), "zero");
    expect_bounded(m, std::vector<float>(n, positive ? 0.375f : -0.375f), "all equal");
    std::vector<float> wide = sample(1.0f);  // many decades in one block, an outlier in another
    for (size_t i = 0; i < n; ++i) wide[i] *= std::pow(10.0f, -float(i % 9));
    wide[kQuantBlock + 3] = positive ? 1e6f : -1e6f;
    expect_bounded(m, wide, "decades and an outlier");
    std::vector<float> partial = sample(2.0f);  // only the partial last block is nonzero
    std::fill(partial.begin(), partial.end() - 37, 0.0f);
    expect_bounded(m, partial, "the last partial block");
  }
}

TEST(Quantize8, ReencodingDecodedCodesGivesTheSameCodes) {
  // A code decodes to map[c] * absmax; the block's absmax is decoded exactly (its code is +-1), and each
  // value encodes back to its code: a checkpoint of decoded values would reproduce the state. (Checkpoints
  // store the codes anyway; this checks the quantizer is a projection for normal absmax values.)
  for (const Map& m : maps()) {
    const int n = static_cast<int>(m.values.size());
    for (const float absmax : {1.0f, 3.7e-3f, 2.5e-20f, 6.1e25f}) {
      for (int c = 0; c < n; ++c) {
        const float x = decode(m.values.data(), static_cast<uint8_t>(c), absmax);
        ASSERT_EQ(encode(m.values.data(), n, m.zero, x, absmax), c) << m.name << " absmax " << absmax;
      }
    }
  }
}

TEST(Quantize8, MomentBytesPerFormat) {
  EXPECT_EQ(moment_bytes(MomentFormat::f32, 1000), 4000);
  EXPECT_EQ(moment_bytes(MomentFormat::bf16, 1000), 2000);
  EXPECT_EQ(moment_bytes(MomentFormat::q8, 1000), 1000 + 4 * 4);  // 4 blocks, the last partial
  EXPECT_EQ(moment_bytes(MomentFormat::q8, 512), 512 + 2 * 4);
  EXPECT_EQ(quant_blocks(0), 0);
  for (auto f : {MomentFormat::f32, MomentFormat::bf16, MomentFormat::q8})
    EXPECT_EQ(parse_moment_format(moment_format_name(f)), f);
  EXPECT_FALSE(parse_moment_format("int8").has_value());
}

}  // namespace
}  // namespace pt::ops
