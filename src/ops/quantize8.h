// 8-bit block-wise dynamic quantization of the AdamW moments (the q8 format of ops/adamw.h), after
// Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization".
//
// A block of kQuantBlock values x is stored as A = max |x| (f32) and, per value, the index of the entry
// of a sorted code map nearest to x / A (a number in [-1, 1]); it decodes to map[code] * A. The maps are
// "dynamic": they spend their codes on decades, as a float spends its exponent, so values from A down to
// 1e-6 A (signed) or 1e-7 A (unsigned) keep a few significant bits instead of rounding to 0.
//
//   unsigned map (second moment, >= 0), 256 entries: 0 and, for each decade d = 0..7, the 2^(7-d) values
//     10^-d * (0.1 + 0.9 j / 2^(7-d)),  j = 1 .. 2^(7-d)
//   (the top decade [0.1, 1] gets 128 linear steps of 0.9/128, the next 64, ..., 1e-7 alone);
//   signed map (first moment), 255 entries: 0 and +-(decades d = 0..6 with 2^(6-d) values each), the
//   same form one bit narrower; code 255 is never produced.
//
// Both are sorted ascending, hold 0 and 1 (signed: -1 too) exactly, and the signed one is symmetric. Each
// value is computed in double as (2^k + 9 j) / (10 * 2^k) / 10^d and rounded to f32 once.
//
// Error bound: a value with x / A between entries lo < hi decodes within (hi - lo) / 2 * A of itself, plus
// the f32 rounding of the division and the product (a few ulps). The widest gaps are in the top decade:
// 0.9 / 64 (signed) and 0.9 / 128 (unsigned), so |decoded - x| <= 0.00704 A and 0.00352 A. Values under
// half the smallest nonzero entry (5e-7 A, 5e-8 A) become 0.
//
// Encoding is the same f32 arithmetic on the cpu and in CUDA (one IEEE division, then comparisons and
// subtractions: nothing a compiler may fuse), and the nearest entry is found by the same binary search with
// ties going to the lower index, so both backends produce the same codes. A = 0 (an all-zero block) gives
// every value the code of 0. Usable from host and device code.
#pragma once

#include <cstdint>
#include <span>

#ifdef __CUDACC__
#define PT_QUANT_HD __host__ __device__ __forceinline__
#else
#define PT_QUANT_HD inline
#endif

namespace pt::ops::quant8 {

inline constexpr int kSignedCodes = 255, kUnsignedCodes = 256;
inline constexpr uint8_t kSignedZero = 127, kUnsignedZero = 0;  // the codes of 0

// The maps above (host memory, built once).
std::span<const float> signed_map();
std::span<const float> unsigned_map();

// The index of the entry of map[0, n) (sorted ascending) nearest to x; ties go to the lower index.
PT_QUANT_HD uint8_t nearest_code(const float* map, int n, float x) {
  if (!(x > map[0])) return 0;
  if (x >= map[n - 1]) return static_cast<uint8_t>(n - 1);
  int lo = 0, hi = n - 1;  // map[lo] < x < map[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (map[mid] <= x)
      lo = mid;
    else
      hi = mid;
  }
  return static_cast<uint8_t>(x - map[lo] <= map[hi] - x ? lo : hi);
}

// The code of x in a block of absmax A (A >= |x|); zero_code when A is 0.
PT_QUANT_HD uint8_t encode(const float* map, int n, uint8_t zero_code, float x, float absmax) {
  return absmax > 0 ? nearest_code(map, n, x / absmax) : zero_code;
}

PT_QUANT_HD float decode(const float* map, uint8_t code, float absmax) { return map[code] * absmax; }

}  // namespace pt::ops::quant8
