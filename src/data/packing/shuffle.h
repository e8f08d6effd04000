// Seeded shuffling that gives the same permutation on every platform (std::shuffle and the standard
// distributions are implementation-defined, so a run could not be reproduced across standard libraries).
#pragma once

#include <cstdint>
#include <span>
#include <utility>

namespace pt {

// SplitMix64: tiny, fast and well mixed; enough for data order (not for cryptography).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, n), n > 0, without modulo bias.
  uint64_t below(uint64_t n) {
    uint64_t threshold = (0 - n) % n;  // 2^64 mod n: draws under it would favour small results
    for (;;) {
      uint64_t x = next();
      if (x >= threshold) return x % n;
    }
  }

 private:
  uint64_t state_;
};

// One stream per (seed, epoch, purpose), so the example order and bfd's batch order are independent.
inline SplitMix64 seeded_stream(uint64_t seed, int64_t epoch, uint64_t purpose) {
  SplitMix64 mix(seed ^ (purpose * 0xD1B54A32D192ED03ull));
  uint64_t a = mix.next();
  SplitMix64 mix2(a ^ static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ull);
  return SplitMix64(mix2.next());
}

// Fisher-Yates.
template <class T>
void shuffle_in_place(std::span<T> items, SplitMix64& rng) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng.below(i)]);
}

}  // namespace pt
