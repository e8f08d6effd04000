// The character classes of HF `tokenizers`' BertNormalizer and BertPreTokenizer, each exactly as HF
// 0.23 has them for every code point (tests/fixtures/tokenizer/bert_chars.json checks all of them).
// HF takes them from Rust crates with Unicode tables of different ages; utf8proc (Unicode 15) serves
// as the base and the code points where HF's tables differ are listed.
#pragma once

#include <string>

namespace pt {

// Rust's char::is_whitespace (the White_Space property).
bool bert_whitespace(char32_t c);
// What clean_text deletes: NUL, U+FFFD and HF's "other" characters (Cc, Cf, Co; not \t \n \r).
bool bert_removed(char32_t c);
// What clean_text turns into a space: whitespace that is not deleted.
inline bool bert_space(char32_t c) { return bert_whitespace(c) && !bert_removed(c); }
// ASCII punctuation (symbols such as $+<=>^`|~ included) and Unicode P*: each its own pre-token.
bool bert_punctuation(char32_t c);
// The CJK ideograph blocks handle_chinese_chars puts spaces around.
bool cjk_ideograph(char32_t c);
// The combining marks strip_accents deletes after NFD (Mn, as HF's tables have it).
bool bert_accent(char32_t c);
// Appends Rust's char::to_lowercase of `c` (the full mapping, one character to one or two) as UTF-8.
void append_bert_lowercase(char32_t c, std::string& out);

}  // namespace pt
