#include "ops/quantize8.h"

#include <array>
#include <cmath>

namespace pt::ops::quant8 {
namespace {

// The positive values of a dynamic map with `top_bits` bits in its top decade, ascending: decade d holds
// 2^(top_bits - d) values, d = top_bits .. 0 (see quantize8.h).
template <size_t N>
void fill_positive(std::array<float, N>& out, size_t first, int top_bits) {
  size_t i = first;
  for (int d = top_bits; d >= 0; --d) {
    const double steps = std::ldexp(1.0, top_bits - d), scale = std::pow(10.0, d);
    for (int j = 1; j <= int(steps); ++j) out[i++] = float((steps + 9.0 * j) / (10.0 * steps) / scale);
  }
}

std::array<float, kSignedCodes> make_signed() {
  std::array<float, kSignedCodes> map{};
  fill_positive(map, kSignedZero + 1, 6);
  map[kSignedZero] = 0.0f;
  for (int i = 1; i <= kSignedZero; ++i) map[kSignedZero - i] = -map[kSignedZero + i];
  return map;
}

std::array<float, kUnsignedCodes> make_unsigned() {
  std::array<float, kUnsignedCodes> map{};
  map[kUnsignedZero] = 0.0f;
  fill_positive(map, 1, 7);
  return map;
}

}  // namespace

std::span<const float> signed_map() {
  static const std::array<float, kSignedCodes> map = make_signed();
  return map;
}

std::span<const float> unsigned_map() {
  static const std::array<float, kUnsignedCodes> map = make_unsigned();
  return map;
}

}  // namespace pt::ops::quant8
