#include "data/mlm/vocab.h"

#include "core/error.h"
#include "data/tokenizer/tokenizer.h"

#include <algorithm>

namespace pt {

MlmVocab::MlmVocab(std::vector<TokenRole> roles, int32_t mask_id)
    : roles_(std::move(roles)), mask_id_(mask_id) {
  if (mask_id < 0 || static_cast<size_t>(mask_id) >= roles_.size())
    fail("masked LM: the mask token id {} is outside the vocabulary of {}", mask_id, roles_.size());
  for (size_t id = 0; id < roles_.size(); ++id)
    if (roles_[id] != TokenRole::kSpecial) random_ids_.push_back(static_cast<int32_t>(id));
  marks_words_ = std::find(roles_.begin(), roles_.end(), TokenRole::kContinuation) != roles_.end();
  if (random_ids_.empty()) fail("masked LM: every token of the vocabulary is special; nothing can be masked");
}

MlmVocab MlmVocab::from_tokenizer(const Tokenizer& tokenizer, std::string_view mask_token) {
  std::optional<int32_t> mask_id;
  if (!mask_token.empty()) {
    mask_id = tokenizer.token_to_id(mask_token);
    if (!mask_id) fail("masked LM: the mask token \"{}\" is not a token of the tokenizer", mask_token);
  } else {
    mask_id = tokenizer.token_to_id("[MASK]");
    if (!mask_id) mask_id = tokenizer.token_to_id("<mask>");
    if (!mask_id) fail("masked LM: the tokenizer has no [MASK] or <mask> token; name its mask token");
  }
  const std::optional<std::string> prefix = tokenizer.continuing_subword_prefix();
  std::vector<TokenRole> roles(static_cast<size_t>(tokenizer.vocab_size()), TokenRole::kSpecial);
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.has_id(id)) continue;
    const bool continues = prefix && !prefix->empty() && tokenizer.id_to_token(id).starts_with(*prefix);
    roles[static_cast<size_t>(id)] = continues ? TokenRole::kContinuation : TokenRole::kWordStart;
  }
  for (int32_t id : tokenizer.special_ids()) roles[static_cast<size_t>(id)] = TokenRole::kSpecial;
  roles[static_cast<size_t>(*mask_id)] = TokenRole::kSpecial;  // even where a tokenizer does not mark it
  return MlmVocab(std::move(roles), *mask_id);
}

TokenRole MlmVocab::role(uint32_t id) const {
  if (id >= roles_.size())
    fail(
        "masked LM: token id {} is outside the tokenizer's vocabulary of {}; prepare the data with this "
        "tokenizer",
        id, roles_.size());
  return roles_[id];
}

}  // namespace pt
