// The normalizer of tokenizer.json as a list of steps run in order (a "Sequence" flattened): Unicode
// normal forms ("NFC", "NFD", "NFKC", "NFKD", via utf8proc), "Prepend" (a prefix on non-empty text, as
// Llama-2's "▁"), "Replace" (every non-overlapping match of a literal or a regex, left to right, by
// a fixed string) and "BertNormalizer" (bert_normalizer.h). Runs of invalid UTF-8 (which HF cannot be given)
// pass through the normal forms unchanged so every byte string can still be encoded.
#pragma once

#include "data/tokenizer/bert_normalizer.h"
#include "data/tokenizer/regex.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pt {

enum class NormalForm { NFC, NFD, NFKC, NFKD };

// `text` in a Unicode normal form as HF's tables give it (characters they do not know stay as they are).
std::string normalize_unicode(std::string_view text, NormalForm form);

class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(const std::vector<NormalForm>& forms);

  void add_normal_form(NormalForm form);
  void add_prepend(std::string prefix);
  void add_replace(std::string literal, std::string content);  // literal must not be empty
  void add_replace(std::shared_ptr<const Regex> regex, std::string content);
  void add_bert(const BertNormalizerOptions& options);

  bool empty() const { return steps_.empty(); }
  // With `at_start` (in: `text` begins the input; out: the result's first character still comes from
  // the input's offset 0, which is false once a Replace deleted the text's beginning, as HF's offsets
  // say; Metaspace's prepend_scheme "first" depends on it).
  // `prepend`: false skips the Prepend steps (text that continues other text gets no prefix).
  std::string apply(std::string_view text, bool* at_start = nullptr, bool prepend = true) const;

 private:
  enum class Kind { NormalForm, Prepend, Replace, Bert };
  struct Step {
    Kind kind;
    NormalForm form = NormalForm::NFC;
    std::string text;                    // Prepend: the prefix; Replace: the literal, when not a regex
    std::shared_ptr<const Regex> regex;  // Replace by regex
    std::string content;                 // Replace: the replacement
    BertNormalizerOptions bert{};
  };
  std::vector<Step> steps_;
};

}  // namespace pt
