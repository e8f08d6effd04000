// Shared helpers for the tokenizer tests: fixture paths and a tiny hand-written tokenizer.json.
#pragma once

#include "data/tokenizer/byte_level.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pt::test {

inline std::string tokenizer_fixture(const std::string& name) {
  return std::string(PACKTRAIN_FIXTURES) + "/tokenizer/" + name;
}

// A GPT-2-style tokenizer.json over all 256 bytes plus `extra` tokens (raw bytes) and `merges`
// (pairs of raw-byte tokens), as a JSON object the error tests can then break.
inline nlohmann::json tiny_tokenizer(const std::vector<std::string>& extra,
                                     const std::vector<std::pair<std::string, std::string>>& merges) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_chars()[static_cast<size_t>(b)]] = b;
  int id = 256;
  for (const auto& t : extra) vocab[byte_level_encode(t)] = id++;
  nlohmann::json m = nlohmann::json::array();
  for (const auto& [a, b] : merges) m.push_back({byte_level_encode(a), byte_level_encode(b)});
  return {{"version", "1.0"},
          {"added_tokens", nlohmann::json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}, {"merges", m}}}};
}

// A SentencePiece-style tokenizer.json: `tokens` spelled as text get ids 0, 1, ... in order, then (with
// byte_tokens) the 256 "<0xNN>" tokens; `merges` are pairs of tokens. No normalizer, pre-tokenizer or
// decoder: the caller sets what it tests.
inline nlohmann::json sp_tokenizer(const std::vector<std::string>& tokens,
                                   const std::vector<std::pair<std::string, std::string>>& merges,
                                   bool byte_tokens = false) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (const auto& t : tokens) vocab[t] = id++;
  if (byte_tokens)
    for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = id++;
  nlohmann::json m = nlohmann::json::array();
  for (const auto& [a, b] : merges) m.push_back({a, b});
  return {{"version", "1.0"},
          {"added_tokens", nlohmann::json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", byte_tokens},
            {"vocab", vocab},
            {"merges", m}}}};
}

}  // namespace pt::test
