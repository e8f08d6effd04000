// `packtrain tokenizer train`: byte-level BPE from text or JSONL files to a tokenizer.json that HF
// `tokenizers` loads and encodes identically. Files are memory-mapped and cut into line-aligned chunks;
// threads count pre-tokens per chunk (special tokens in the text are never merged into), then
// learn_bpe() learns merges. Ids: 256 byte tokens, then merges, then the special tokens.
#pragma once

#include "data/tokenizer/presets.h"
#include "data/tokenizer/string_map.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pt {

struct TrainerOptions {
  int32_t vocab_size = 32000;  // byte tokens + merged tokens + special tokens
  Preset preset = Preset::Llama3;
  std::vector<std::string> special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"};
  int threads = 1;
  bool progress = false;  // progress bars on stderr
};

// Pre-token counts over the files. A file ending in .jsonl or .json is JSON Lines of the records
// `packtrain prepare` reads (every text of a record counts); anything else is plain UTF-8 text. Throws
// pt::Error naming file:line for bad records.
StringMap<int64_t> count_pretokens(const std::vector<std::string>& files, const TrainerOptions& options);

// The tokenizer.json text for the learned vocabulary.
std::string train_tokenizer_json(const StringMap<int64_t>& counts, const TrainerOptions& options);

}  // namespace pt
