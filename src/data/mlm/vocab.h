// What masked-LM masking needs to know of a vocabulary, per token id: whether the token may be masked at
// all, and whether it starts a word or continues the word of the token before it (whole-word masking).
// For WordPiece both follow from the tokenizer alone: special tokens are its added tokens marked special,
// and a token continues a word exactly when it is spelled with the continuing_subword_prefix ("##").
// So a prepared dataset needs nothing stored for masking: the table is built from its tokenizer.json.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace pt {

class Tokenizer;

enum class TokenRole : uint8_t {
  kSpecial,       // never masked, never drawn as a random replacement ([CLS], [SEP], [PAD], unused ids)
  kWordStart,     // a maskable token that begins a word
  kContinuation,  // a maskable token that continues the word before it ("##ing")
};

class MlmVocab {
 public:
  // roles: one per token id. Throws pt::Error when the mask id is out of range or no token is maskable.
  MlmVocab(std::vector<TokenRole> roles, int32_t mask_id);

  // From a tokenizer: mask_token names the mask token; empty: "[MASK]" (BERT) or "<mask>" (RoBERTa).
  static MlmVocab from_tokenizer(const Tokenizer& tokenizer, std::string_view mask_token = {});

  // Throws pt::Error for an id the table does not cover (data prepared with another tokenizer).
  TokenRole role(uint32_t id) const;
  int32_t mask_id() const { return mask_id_; }
  // The ids a random replacement is drawn from, uniformly: every non-special token.
  const std::vector<int32_t>& random_ids() const { return random_ids_; }
  // Whether some token continues a word: without one, whole words are single tokens (BPE).
  bool marks_words() const { return marks_words_; }

 private:
  std::vector<TokenRole> roles_;
  std::vector<int32_t> random_ids_;
  int32_t mask_id_;
  bool marks_words_ = false;
};

}  // namespace pt
