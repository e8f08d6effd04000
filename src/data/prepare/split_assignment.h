// Train/val assignment by record: record i goes to val when a hash of (seed, i) falls below
// val_fraction. Needs no look-ahead (streaming), is deterministic for a seed, and keeps the pieces of a
// split record together.
#pragma once

#include <xxhash.h>

#include <cstdint>

namespace pt {

inline bool assigned_to_val(uint64_t seed, uint64_t record_index, double val_fraction) {
  uint64_t h = XXH64(&record_index, sizeof record_index, seed);
  return static_cast<double>(h >> 11) * 0x1.0p-53 < val_fraction;  // top 53 bits as a uniform [0, 1)
}

}  // namespace pt
