// The per-block arithmetic of the 2:4 ops (ops/sparse24.h), shared by the cpu reference and the cuda
// kernels so both sides run the same operations in the same order: masks agree bit for bit and mvue24
// draws the same entries. Only additions, comparisons and lone products (never a product feeding an
// addition) touch the values, so no compiler can fuse them into FMAs differently on host and device.
// Usable from host and device code (no fmt).
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/counter_hash.h"

#ifdef __CUDACC__
#define PT_SPARSE24_HD __host__ __device__ __forceinline__
#else
#define PT_SPARSE24_HD inline
#endif

// Device code needs the loops over patterns unrolled, so pattern indices become constants and the
// per-block sums stay in registers.
#ifdef __CUDA_ARCH__
#define PT_SPARSE24_UNROLL _Pragma("unroll")
#else
#define PT_SPARSE24_UNROLL
#endif

namespace pt::ops::sparse24 {

constexpr int kPatterns = 90;

// The 6 ways to keep 2 of the 4 entries of a row, as ascending 4-bit masks: 0x3 0x5 0x6 0x9 0xA 0xC.
PT_SPARSE24_HD constexpr int row_pair_bits(int k) {
  int seen = 0;
  for (int bits = 0; bits < 16; ++bits) {
    const int count = (bits & 1) + ((bits >> 1) & 1) + ((bits >> 2) & 1) + ((bits >> 3) & 1);
    if (count == 2 && seen++ == k) return bits;
  }
  return 0;
}
PT_SPARSE24_HD constexpr int row_pair_first(int k) {  // the lower kept column
  const int bits = row_pair_bits(k);
  return (bits & 1) ? 0 : (bits & 2) ? 1 : 2;
}
PT_SPARSE24_HD constexpr int row_pair_second(int k) {  // the higher kept column
  const int bits = row_pair_bits(k);
  return (bits & 8) ? 3 : (bits & 4) ? 2 : 1;
}

// The transposable 4x4 patterns: bits (bit 4r + c = kept) and, per row, which row pair it keeps.
// Row 3 is the most significant nibble, so looping over rows 3..0 with ascending row pairs yields the
// patterns in ascending numeric order: the tie-breaking order of transposable_mask24.
struct Patterns24 {
  int count = 0;
  uint16_t bits[kPatterns] = {};
  uint8_t row_pair[kPatterns][4] = {};
};

PT_SPARSE24_HD constexpr Patterns24 make_patterns24() {
  Patterns24 t;
  for (int k3 = 0; k3 < 6; ++k3)
    for (int k2 = 0; k2 < 6; ++k2)
      for (int k1 = 0; k1 < 6; ++k1)
        for (int k0 = 0; k0 < 6; ++k0) {
          const int rows[4] = {row_pair_bits(k0), row_pair_bits(k1), row_pair_bits(k2), row_pair_bits(k3)};
          bool transposable = true;
          for (int c = 0; c < 4; ++c)
            transposable = transposable && ((rows[0] >> c) & 1) + ((rows[1] >> c) & 1) +
                                                   ((rows[2] >> c) & 1) + ((rows[3] >> c) & 1) ==
                                               2;
          if (!transposable || t.count >= kPatterns) continue;
          t.bits[t.count] =
              static_cast<uint16_t>(rows[0] | (rows[1] << 4) | (rows[2] << 8) | (rows[3] << 12));
          const int ks[4] = {k0, k1, k2, k3};
          for (int r = 0; r < 4; ++r) t.row_pair[t.count][r] = static_cast<uint8_t>(ks[r]);
          ++t.count;
        }
  return t;
}

// The bits of the transposable pattern with the largest kept sum of |w| over one 4x4 block w (row-major),
// the first in ascending order on ties. A pattern's score is ((s0 + s1) + s2) + s3 with s_r the sum of
// the two entries row r keeps (lower column first): R = float on both backends for f32 and bf16 weights.
template <class R>
PT_SPARSE24_HD uint16_t best_pattern24(const R w[16]) {
  constexpr Patterns24 t = make_patterns24();
  R pair_sum[4][6];
  PT_SPARSE24_UNROLL
  for (int r = 0; r < 4; ++r) {
    PT_SPARSE24_UNROLL
    for (int k = 0; k < 6; ++k) {
      const R a = w[4 * r + row_pair_first(k)], b = w[4 * r + row_pair_second(k)];
      pair_sum[r][k] = (a < 0 ? -a : a) + (b < 0 ? -b : b);
    }
  }
  uint16_t best_bits = 0;
  R best = 0;
  PT_SPARSE24_UNROLL
  for (int p = 0; p < kPatterns; ++p) {
    const uint8_t* k = t.row_pair[p];
    const R score = ((pair_sum[0][k[0]] + pair_sum[1][k[1]]) + pair_sum[2][k[2]]) + pair_sum[3][k[3]];
    if (p == 0 || score > best) best = score, best_bits = t.bits[p];
  }
  return best_bits;
}

// |x|, which the GPU folds into the instructions that read it (float there: the kernels compute in f32).
template <class R>
PT_SPARSE24_HD R magnitude(R x) {
#ifdef __CUDA_ARCH__
  return fabsf(x);
#else
  return std::fabs(x);
#endif
}

PT_SPARSE24_HD float float_from_bits(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// mvue24's uniform draw for one (group, column): a counter-based hash of (seed, group, column) in [0,1)
// with 23 random bits, so u and u + 1 are exact floats. The per-draw part is 32-bit arithmetic (the GPU
// prunes a gradient at several groups per nanosecond); in stages, for kernels whose draws share a seed or
// a group: mvue_uniform_at(mvue_group_hash(mvue_seed_hash(seed), group), column).
PT_SPARSE24_HD uint32_t mvue_seed_hash(uint64_t seed) {
  return static_cast<uint32_t>(mix64(seed ^ 0x9e3779b97f4a7c15ull));
}
PT_SPARSE24_HD uint32_t mvue_group_hash(uint32_t seed_hash, int64_t group) {
  return mix32(seed_hash ^ static_cast<uint32_t>(group));
}
PT_SPARSE24_HD float mvue_uniform_at(uint32_t group_hash, int64_t column) {
  const uint32_t h = mix32(group_hash + static_cast<uint32_t>(column) * 0x9e3779b9u);
  return float_from_bits(0x3f800000u | (h >> 9)) - 1.0f;  // 1.xxx - 1: exactly (h >> 9) 2^-23
}
PT_SPARSE24_HD float mvue_uniform(uint64_t seed, int64_t group, int64_t column) {
  return mvue_uniform_at(mvue_group_hash(mvue_seed_hash(seed), group), column);
}

// What MVUE 2:4 keeps of one group: positions i0 < i1 and their values.
template <class R>
struct Kept24 {
  int i0, i1;
  R v0, v1;
};

// The largest R below x >= 0 (0 for 0), alike on host and device.
template <class R>
PT_SPARSE24_HD R below(R x) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(max(__float_as_uint(x), 1u) - 1u);
#else
  return x > 0 ? std::nextafter(x, R(0)) : x;
#endif
}

// MVUE 2:4 of one group g[4] (rows past the tensor's end passed as 0) with the draw u: g[i] / p[i] for the
// two entries systematic sampling keeps, 0 elsewhere.
// p by water-filling: p_i = 2 |g_i| / sum |g| when that is at most 1 for all, otherwise the largest
// entry is kept for sure (p = 1) and the others share the second slot, p_i = |g_i| / (sum of the others).
// Both cases are one systematic sampling with two points, u T / 2 and (u + 1) T / 2, over the weights
// w_i = min(|g_i|, sum of the others) (T their sum): w_i = |g_i| except for a largest entry that exceeds
// the others together, whose weight T / 2 always holds exactly one point. A kept entry's g_i / p_i is then
// sign(g_i) max(|g_i|, T / 2): |g_i| for that capped one, T / 2 for every sampled one. So no division, no
// branch on the case, and each point a single product (u + 1 is exact: u has 23 bits), with no
// multiply-add to be fused differently on host and device.
// A group with at most 2 nonzeros comes out as it is, exactly: the two weights are the smaller one's
// magnitude, each interval holds one point, and max() returns each entry's own magnitude. A single nonzero
// (its "others" are 0, so it keeps its own weight) takes both points and is completed by the lowest other
// position, value 0; all zeros keep positions 0 and 1.
// Comparisons, min/max and selects, and one branch almost never taken: no divergence on the GPU.
template <class R>
PT_SPARSE24_HD Kept24<R> mvue_keep24(const R g[4], R u) {
  R a[4];
  PT_SPARSE24_UNROLL
  for (int i = 0; i < 4; ++i) a[i] = magnitude(g[i]);
  // Each sum of the other three adds to the largest entry, so it never rounds below any of them: w_i is
  // exactly a_i for every entry but a capped largest.
  const R s01 = a[0] + a[1], s23 = a[2] + a[3];
  const R others[4] = {a[1] + s23, a[0] + s23, s01 + a[3], s01 + a[2]};
  R h[4];  // running sums of the weights: entry i is kept when [h_(i-1), h_i) holds a point
  PT_SPARSE24_UNROLL
  for (int i = 0; i < 4; ++i) {
    const R w = others[i] > 0 ? std::fmin(a[i], others[i]) : a[i];
    h[i] = i == 0 ? w : h[i - 1] + w;
  }
  const R total = h[3], half = total * R(0.5);
  R value[4];  // g_i / p_i if kept
  PT_SPARSE24_UNROLL
  for (int i = 0; i < 4; ++i) value[i] = std::copysign(std::fmax(a[i], half), g[i]);
  // Both points lie below total (the second is clamped there against rounding up), so the count of
  // h_0..h_2 at or below a point is its entry, and an entry of weight 0 is never hit. The value is
  // selected by the same comparisons, not by indexing with the count (which the GPU would branch on).
  struct Hit {
    int i;
    R v;
  };
  const auto pick = [&](R point) {
    const bool c0 = h[0] <= point, c1 = h[1] <= point, c2 = h[2] <= point;
    return Hit{int{c0} + int{c1} + int{c2}, c2 ? value[3] : c1 ? value[2] : c0 ? value[1] : value[0]};
  };
  const Hit first = pick(u * half), second = pick(std::fmin((u + R(1)) * half, below(total)));
  if (first.i != second.i) return {first.i, second.i, first.v, second.v};
  // Kept alone (a single nonzero, or rounding put both points in one entry): completed by a zero at the
  // lowest other position. All zeros keep positions 0 and 1, as packing a pruned group's nonzeros does.
  const int alone = total > 0 ? first.i : 0;
  return alone == 0 ? Kept24<R>{0, 1, first.v, R(0)} : Kept24<R>{0, alone, R(0), first.v};
}

// mvue_keep24 written out: out[i] = the kept value at the two positions, 0 elsewhere.
template <class R>
PT_SPARSE24_HD void mvue_group24(const R g[4], R u, R out[4]) {
  const Kept24<R> k = mvue_keep24(g, u);
  PT_SPARSE24_UNROLL
  for (int i = 0; i < 4; ++i) out[i] = i == k.i0 ? k.v0 : i == k.i1 ? k.v1 : R(0);
}

}  // namespace pt::ops::sparse24
