// Tokenizer that reads Hugging Face tokenizer.json files and gives exactly the ids and decoded text
// HF `tokenizers` gives, for the two families of BPE that models ship and for WordPiece:
//  - byte-level BPE (a ByteLevel pre-tokenizer, optionally behind Split/regex pre-tokenizers and a
//    Unicode normaliser, as in GPT-2, Llama-3 and Qwen2);
//  - SentencePiece-style BPE (tokens spelled in text with "▁" for spaces, put there by Prepend/Replace
//    normalizers or a Metaspace pre-tokenizer; byte_fallback to <0xNN> tokens or an unk token, as in
//    Llama-2, Mistral, Gemma and TinyLlama);
//  - WordPiece as BERT's (BertNormalizer, BertPreTokenizer, the WordPiece model and decoder).
// Anything else that would change ids (other models, normalizers, pre-tokenizers, model options) is
// refused by name. encode() adds no post-processor tokens (BOS/EOS, [CLS]/[SEP]): callers add those
// explicitly, or call encode_with_special_tokens.
// Thread-safe after construction.
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
  // Each call encodes `text` as a whole input: SentencePiece-style tokenizers put their "▁" prefix on it.
  // Any byte string is accepted; invalid UTF-8 bytes are encoded byte by byte (byte-level BPE, or byte
  // fallback), so for byte-level tokenizers without a normaliser or prefix space decode(encode(x)) == x.
  std::vector<int32_t> encode(std::string_view text) const;
  void encode_append(std::string_view text, std::vector<int32_t>& out) const;
  // Encodes `text` as the continuation of text encoded just before it (a completion after its prompt, a
  // message after its header): no prefix at its start (SentencePiece's "▁" from a Prepend normalizer
  // or Metaspace, ByteLevel's add_prefix_space), as HF puts none inside one text; after an added token
  // inside `text` HF's rules apply again. Tokens still never merge across the boundary. The same as
  // encode_append for tokenizers that prefix nothing (GPT-2, Llama-3, Qwen2).
  void encode_continuation_append(std::string_view text, std::vector<int32_t>& out) const;
  // HF encode(text, add_special_tokens=True) of one sequence: encode(text) inside the post-processor's
  // special tokens ([CLS] ... [SEP] for BERT, <s> ... for Llama-2).
  std::vector<int32_t> encode_with_special_tokens(std::string_view text) const;
  // HF decode(ids, skip_special_tokens=False) through the file's decoder, except that a byte-level
  // decoder keeps invalid UTF-8 bytes instead of showing U+FFFD.
  std::string decode(std::span<const int32_t> ids) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;
  int32_t vocab_size() const;  // one past the largest id, added tokens included
  bool has_id(int32_t id) const;  // whether a token has this id (ids below vocab_size may be unused)
  // Ids of the added tokens marked special ([CLS], [SEP], [PAD], [UNK], [MASK] for BERT), ascending.
  std::span<const int32_t> special_ids() const;
  // WordPiece's continuing_subword_prefix ("##" for BERT): a token spelled with it continues the word
  // of the token before. nullopt for BPE, whose tokens carry no such mark.
  std::optional<std::string> continuing_subword_prefix() const;
  // xxh64 of the canonical tokenizer.json bytes: prepared datasets record it to catch a tokenizer swap.
  uint64_t hash() const;
  // Common specials, looked up by name across conventions (<|endoftext|>, </s>, <|end_of_text|>, ...);
  // failing that, the one token the post-processor puts before (BOS) or after (EOS) a sequence, as
  // BERT's [CLS] and [SEP].
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> pad_id() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  void encode_impl(std::string_view text, bool continuation, std::vector<int32_t>& out) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pt
