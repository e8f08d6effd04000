// What becomes of an example longer than max_len tokens: truncate keeps its first max_len tokens,
// split cuts it into consecutive pieces of at most max_len tokens (each its own example), drop skips it.
// A piece left with no loss target teaches nothing and is not kept.
#pragma once

#include "data/prepare/encoder.h"
#include "data/prepare/options.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pt {

struct LengthOutcome {
  std::vector<uint32_t> piece_lengths;  // the example's kept pieces, in order (tokens are trimmed to them)
  std::optional<std::string> action;    // set when the example was altered or skipped: what happened
};

// Trims `example` in place to the kept pieces.
LengthOutcome apply_length_policy(LongPolicy policy, int64_t max_len, EncodedExample& example);

}  // namespace pt
