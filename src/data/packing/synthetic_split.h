// Synthetic splits for packing tests and benchmarks. Token ids are unique (global token index + 1), so a
// test can trace every token of a batch back to its example and position, and pad id 0 never collides.
#pragma once

#include "data/dataset.h"

#include <cstdint>
#include <span>
#include <vector>

namespace pt {

// SFT-like lengths: lognormal around `median`, clamped to [1, max_len] (mean about 1.5x the median).
std::vector<int64_t> sft_like_lengths(int64_t count, uint64_t seed, double median = 330, double sigma = 0.9,
                                      int64_t max_len = 2048);

// Examples of the given lengths; each has a masked prompt of random length (possibly all or none of it),
// then loss-bearing tokens, like chat data.
DatasetSplit synthetic_split(std::span<const int64_t> lengths, uint64_t seed);

}  // namespace pt
