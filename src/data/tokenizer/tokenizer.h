// Byte-level BPE tokenizer that reads Hugging Face tokenizer.json files (model type BPE with a
// ByteLevel pre-tokenizer, optionally behind Split/regex pre-tokenizers and an NFC normaliser, as in
// GPT-2, Llama-3 and Qwen2) and gives exactly the ids HF `tokenizers` gives. encode() adds no
// post-processor tokens (BOS/EOS): callers add those explicitly. Thread-safe after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pt {

class Tokenizer {
 public:
  // Throws pt::Error naming the file and the unsupported or malformed part.
  static Tokenizer from_file(const std::string& path);
  static Tokenizer from_json(std::string_view json, const std::string& origin);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Added (special) tokens in the text are recognised as in HF encode(..., add_special_tokens=False).
  // Any byte string is accepted; invalid UTF-8 bytes are encoded byte by byte, so decode(encode(x)) == x.
  std::vector<int32_t> encode(std::string_view text) const;
  void encode_append(std::string_view text, std::vector<int32_t>& out) const;
  std::string decode(std::span<const int32_t> ids) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;
  int32_t vocab_size() const;  // one past the largest id, added tokens included
  // xxh64 of the canonical tokenizer.json bytes: prepared datasets record it to catch a tokenizer swap.
  uint64_t hash() const;
  // Common specials, looked up by name across conventions (<|endoftext|>, </s>, <|end_of_text|>, ...).
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> pad_id() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pt
