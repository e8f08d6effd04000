// The BPE model, exactly as HF's BPE::merge_word: a pre-token starts as one symbol per byte (byte-level
// vocabularies, kept in raw bytes) or per UTF-8 character (SentencePiece-style vocabularies, spelled in
// text), and adjacent pairs merge in rank order (lowest rank first, leftmost first among equals). With
// ignore_merges a pre-token that is itself in the vocabulary is emitted directly (Llama-3). A symbol
// missing from the vocabulary becomes its bytes' <0xNN> tokens with byte_fallback (Llama-2), else the
// unknown token (consecutive ones fused into one with fuse_unk), else nothing.
#pragma once

#include "data/tokenizer/string_map.h"
#include "data/tokenizer/word_cache.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pt {

struct BpeMerge {
  int32_t left, right, merged;
};

struct BpeOptions {
  bool ignore_merges = false;
  std::optional<int32_t> unk_id;  // for symbols missing from the vocabulary; without it they are dropped
  bool fuse_unk = false;          // consecutive unknown symbols give one unk token
  bool byte_fallback = false;     // unknown symbols become "<0xNN>" tokens when all their bytes have one
  bool utf8_symbols = false;      // one initial symbol per UTF-8 character (an invalid byte is one)
};

class BpeModel {
 public:
  BpeModel() = default;
  // vocab maps raw-byte tokens to ids; merges are in rank order.
  BpeModel(StringMap<int32_t> vocab, const std::vector<BpeMerge>& merges, BpeOptions options);

  // Appends the ids of one pre-token.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  const StringMap<int32_t>& vocab() const { return vocab_; }

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  StringMap<int32_t> vocab_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // pair -> (rank, merged id)
  std::array<int32_t, 256> byte_id_{};      // one-byte token -> id, -1 when not in the vocabulary
  std::array<int32_t, 256> fallback_id_{};  // byte -> id of its "<0xNN>" token, or -1
  BpeOptions options_;
  std::unique_ptr<WordCache> cache_ = std::make_unique<WordCache>();  // movable model, pinned cache
};

}  // namespace pt
