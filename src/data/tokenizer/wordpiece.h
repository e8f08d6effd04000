// The WordPiece model, exactly as HF's WordPiece::tokenize: a pre-token is split greedily into the longest
// vocabulary token at its start, then the longest "##"-prefixed (continuing_subword_prefix) token at
// each later position. A pre-token with a part no token matches, or longer than max_input_chars_per_word
// characters, becomes the unknown token as a whole.
#pragma once

#include "data/tokenizer/string_map.h"
#include "data/tokenizer/word_cache.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pt {

struct WordPieceOptions {
  int32_t unk_id = 0;
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;
};

class WordPieceModel {
 public:
  WordPieceModel(StringMap<int32_t> vocab, WordPieceOptions options);

  // Appends the ids of one pre-token.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  const std::string& continuing_subword_prefix() const { return options_.continuing_subword_prefix; }

 private:
  // False when some part of `word` matches no token.
  bool split_word(std::string_view word, std::vector<int32_t>& out) const;

  StringMap<int32_t> vocab_;
  WordPieceOptions options_;
  std::unique_ptr<WordCache> cache_ = std::make_unique<WordCache>();  // movable model, pinned cache
};

}  // namespace pt
