// The parts of a loaded Tokenizer, in pipeline order. Built by tokenizer_json.cpp from a tokenizer.json;
// used by tokenizer.cpp to encode and decode.
#pragma once

#include "data/tokenizer/added_tokens.h"
#include "data/tokenizer/bpe.h"
#include "data/tokenizer/decoder.h"
#include "data/tokenizer/normalizer.h"
#include "data/tokenizer/post_processor.h"
#include "data/tokenizer/pretokenizer.h"
#include "data/tokenizer/string_map.h"
#include "data/tokenizer/tokenizer.h"
#include "data/tokenizer/wordpiece.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pt {

struct Tokenizer::Impl {
  Impl(std::string_view json, const std::string& origin);  // parses; throws pt::Error

  AddedTokenMatcher raw_added;  // added tokens with normalized=false, matched on the input
  Normalizer normalizer;
  AddedTokenMatcher normalized_added;  // added tokens with normalized=true, matched after normalising
  PreTokenizer pretokenizer;
  std::variant<BpeModel, WordPieceModel> model;
  PostProcessor post_processor;
  Decoder decoder;

  std::vector<std::string> spelling;  // id -> token as written in tokenizer.json ("" for unused ids)
  std::vector<bool> used;             // id -> whether any token has it
  StringMap<int32_t> ids;             // spelling -> id, added tokens included
  std::vector<int32_t> special_ids;   // added tokens marked special, ascending
  uint64_t hash = 0;
};

}  // namespace pt
