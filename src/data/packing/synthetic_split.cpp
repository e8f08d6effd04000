#include "data/packing/synthetic_split.h"

#include "core/error.h"
#include "data/packing/shuffle.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace pt {

std::vector<int64_t> sft_like_lengths(int64_t count, uint64_t seed, double median, double sigma,
                                      int64_t max_len) {
  SplitMix64 rng(seed);
  auto uniform = [&] { return (static_cast<double>(rng.next() >> 11) + 0.5) * 0x1.0p-53; };  // (0, 1)
  std::vector<int64_t> lengths(static_cast<size_t>(count));
  for (auto& length : lengths) {
    double normal =
        std::sqrt(-2 * std::log(uniform())) * std::cos(2 * std::numbers::pi * uniform());  // Box-Muller
    length = std::clamp<int64_t>(std::llround(median * std::exp(sigma * normal)), 1, max_len);
  }
  return lengths;
}

DatasetSplit synthetic_split(std::span<const int64_t> lengths, uint64_t seed) {
  std::vector<uint64_t> offsets{0};
  offsets.reserve(lengths.size() + 1);
  for (int64_t length : lengths) offsets.push_back(offsets.back() + static_cast<uint64_t>(length));
  if (offsets.back() >= uint64_t{1} << 31)
    fail("synthetic_split: {} tokens do not fit int32 ids", offsets.back());
  std::vector<uint32_t> tokens(offsets.back());
  std::vector<uint8_t> mask(offsets.back(), 1);
  for (size_t t = 0; t < tokens.size(); ++t) tokens[t] = static_cast<uint32_t>(t + 1);
  SplitMix64 rng(seed);
  for (size_t i = 0; i < lengths.size(); ++i) {
    uint64_t prompt = rng.below(static_cast<uint64_t>(lengths[i]) + 1);
    std::fill_n(mask.begin() + static_cast<int64_t>(offsets[i]), prompt, uint8_t{0});
  }
  return DatasetSplit::from_vectors(std::move(tokens), std::move(mask), std::move(offsets));
}

}  // namespace pt
