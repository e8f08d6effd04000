// ops::cast on the cpu: f32 -> bf16 is pt::float_to_bf16 element by element (ties to even, overflow to
// inf, NaN kept), bf16 -> f32 is exact, and equal types copy.
#include "ops/elementwise.h"

#include "core/float16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace pt::ops {
namespace {

// Random floats of every magnitude plus the cases rounding gets wrong: ties, near-ties, overflow,
// subnormals, infinities, signed zeros and NaN.
std::vector<float> cast_inputs() {
  std::vector<float> v = {
      0.0f,
      -0.0f,
      1.0f,
      -1.5f,
      std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::quiet_NaN(),
      std::numeric_limits<float>::max(),
      std::numeric_limits<float>::denorm_min(),
      std::bit_cast<float>(0x3F808000u),   // tie between 1.0 and the next bf16: to even (down)
      std::bit_cast<float>(0x3F818000u),   // tie with an odd neighbour: rounds up
      std::bit_cast<float>(0x3F808001u),   // just above a tie: up
      std::bit_cast<float>(0x3F807FFFu),   // just below a tie: down
      std::bit_cast<float>(0x7F7FFFFFu)};  // rounds past the largest bf16 to inf
  std::mt19937 rng(7);
  for (int i = 0; i < 4096; ++i) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return v;
}

TEST(Cast, F32ToBf16RoundsLikeFloatToBf16) {
  std::vector<float> src = cast_inputs();
  const auto n = static_cast<int64_t>(src.size());
  std::vector<bf16> dst(src.size(), bf16{0x1234});
  cast(Tensor::of(src.data(), {n}), Tensor::of(dst.data(), {n}));
  for (size_t i = 0; i < src.size(); ++i)
    ASSERT_EQ(dst[i].bits, float_to_bf16(src[i])) << "element " << i << " = " << src[i];
  EXPECT_EQ(dst[9].bits, 0x3F80);  // the tie went to even
  EXPECT_EQ(dst[10].bits, 0x3F82);
  EXPECT_EQ(dst[13].bits, 0x7F80);  // inf
}

TEST(Cast, Bf16ToF32IsExactAndEqualTypesCopy) {
  std::vector<bf16> src;
  for (uint32_t b = 0; b < 65536; b += 7) src.push_back(bf16{static_cast<uint16_t>(b)});
  const auto n = static_cast<int64_t>(src.size());
  std::vector<float> dst(src.size()), again(src.size());
  cast(Tensor::of(src.data(), {n}), Tensor::of(dst.data(), {n}));
  for (size_t i = 0; i < src.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(dst[i]), static_cast<uint32_t>(src[i].bits) << 16) << "element " << i;
  cast(Tensor::of(dst.data(), {n}), Tensor::of(again.data(), {n}));  // f32 -> f32
  EXPECT_EQ(0, std::memcmp(dst.data(), again.data(), dst.size() * sizeof(float)));
}

TEST(Cast, RejectsMismatchedSizesAndUnsupportedTypes) {
  std::vector<float> f(4);
  std::vector<double> d(4);
  std::vector<bf16> h(3);
  EXPECT_THROW(cast(Tensor::of(f.data(), {4}), Tensor::of(h.data(), {3})), Error);
  EXPECT_THROW(cast(Tensor::of(d.data(), {4}), Tensor::of(f.data(), {4})), Error);
}

}  // namespace
}  // namespace pt::ops
