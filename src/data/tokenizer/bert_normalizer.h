// HF `tokenizers`' BertNormalizer: clean_text (delete control and format characters, NUL and U+FFFD;
// whitespace to " "), handle_chinese_chars (a space on each side of every CJK ideograph), strip_accents
// (NFD, then nonspacing marks deleted) and lowercase, in that order. Invalid UTF-8 bytes pass through.
#pragma once

#include <string>
#include <string_view>

namespace pt {

struct BertNormalizerOptions {
  bool clean_text = true;
  bool handle_chinese_chars = true;
  bool strip_accents = true;  // tokenizer.json's null means: as lowercase
  bool lowercase = true;
};

std::string bert_normalize(std::string_view text, const BertNormalizerOptions& options);

}  // namespace pt
