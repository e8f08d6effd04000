// Learning byte-level BPE merges from pre-token counts. Each step merges the most frequent adjacent
// pair (ties: the smaller (left, right) id pair), updating pair counts incrementally from the words
// that contain the merged pair, so a step costs what those words cost, not a pass over the corpus.
// Deterministic: the result depends only on the counts.
#pragma once

#include "data/tokenizer/string_map.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace pt {

struct LearnedBpe {
  std::vector<std::string> tokens;                  // id -> raw bytes; ids 0..255 are single bytes
  std::vector<std::pair<int32_t, int32_t>> merges;  // in rank order
};

// The id of each single byte: GPT-2's order (byte-level code point order), as HF's trainer assigns.
int32_t byte_token_id(uint8_t byte);

// Learns merges until there are `target_tokens` distinct tokens or no pair occurs any more.
// `on_progress(tokens_so_far)` is called after each merge.
LearnedBpe learn_bpe(const StringMap<int64_t>& word_counts, int32_t target_tokens,
                     const std::function<void(int32_t)>& on_progress = {});

}  // namespace pt
