#include "data/tokenizer/bert_normalizer.h"

#include "data/tokenizer/bert_chars.h"
#include "data/tokenizer/normalizer.h"
#include "data/tokenizer/utf8.h"

namespace pt {

namespace {

// Copies `text` character by character through `emit(c, bytes, out)`; invalid bytes are copied as they are.
template <class Emit>
std::string map_chars(std::string_view text, Emit emit) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (size_t pos = 0; pos < text.size();) {
    Utf8Char c = next_utf8_char(text, pos);
    std::string_view bytes = text.substr(pos, c.length);
    pos += c.length;
    if (!c.valid) {
      out += bytes;
    } else {
      emit(c.code_point, bytes, out);
    }
  }
  return out;
}

}  // namespace

std::string bert_normalize(std::string_view text, const BertNormalizerOptions& options) {
  std::string s(text);
  if (options.clean_text || options.handle_chinese_chars) {
    s = map_chars(s, [&](char32_t c, std::string_view bytes, std::string& out) {
      if (options.clean_text && bert_removed(c)) return;
      if (options.clean_text && bert_space(c)) {
        out += ' ';
      } else if (options.handle_chinese_chars && cjk_ideograph(c)) {
        out += ' ';
        out += bytes;
        out += ' ';
      } else {
        out += bytes;
      }
    });
  }
  if (options.strip_accents) {
    s = map_chars(normalize_unicode(s, NormalForm::NFD),
                  [](char32_t c, std::string_view bytes, std::string& out) {
                    if (!bert_accent(c)) out += bytes;
                  });
  }
  if (options.lowercase) {
    s = map_chars(s, [](char32_t c, std::string_view, std::string& out) { append_bert_lowercase(c, out); });
  }
  return s;
}

}  // namespace pt
