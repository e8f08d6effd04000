#include "data/tokenizer/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>

namespace pt {

namespace {

// Decodes the character ending just before `end` (or starting at `begin`); invalid bytes read as -1.
utf8proc_int32_t char_before(std::string_view text, size_t end, size_t* begin) {
  size_t b = end - 1;
  while (b > 0 && end - b < 4 && (static_cast<uint8_t>(text[b]) & 0xC0) == 0x80) --b;
  utf8proc_int32_t cp = -1;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + b),
                            static_cast<utf8proc_ssize_t>(end - b), &cp);
  if (n != static_cast<utf8proc_ssize_t>(end - b)) {
    *begin = end - 1;
    return -1;
  }
  *begin = b;
  return cp;
}

utf8proc_int32_t char_at(std::string_view text, size_t pos, size_t* length) {
  utf8proc_int32_t cp = -1;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                            static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
  *length = n > 0 ? static_cast<size_t>(n) : 1;
  return n > 0 ? cp : -1;
}

// Rust regex's Unicode \s (the White_Space property), which HF uses for lstrip/rstrip.
bool is_whitespace(utf8proc_int32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Rust regex's Unicode \w, which HF uses for single_word: Alphabetic, marks, decimal digits,
// connector punctuation and joiners.
bool is_word_char(utf8proc_int32_t c) {
  if (c < 0) return false;
  if (c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9)) return true;
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns)
    : tokens_(std::move(tokens)), trie_(1) {
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;
    first_byte_[static_cast<uint8_t>(p[0])] = true;
    int32_t node = 0;
    for (char ch : p) {
      auto c = static_cast<uint8_t>(ch);
      auto& kids = trie_[static_cast<size_t>(node)].children;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, int32_t{-1}));
      if (it != kids.end() && it->first == c) {
        node = it->second;
      } else {
        auto child = static_cast<int32_t>(trie_.size());
        kids.insert(it, {c, child});
        trie_.emplace_back();
        node = child;
      }
    }
    // Two tokens with the same content: the first one listed wins, as in HF.
    if (trie_[static_cast<size_t>(node)].token < 0)
      trie_[static_cast<size_t>(node)].token = static_cast<int32_t>(t);
  }
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto c = static_cast<uint8_t>(text[i]);
    const auto& kids = trie_[static_cast<size_t>(node)].children;
    auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, int32_t{-1}));
    if (it == kids.end() || it->first != c) break;
    node = it->second;
    if (trie_[static_cast<size_t>(node)].token >= 0)
      best = {trie_[static_cast<size_t>(node)].token, i + 1 - pos};
  }
  return best;
}

bool AddedTokenMatcher::accepts(const AddedToken& token, std::string_view text, size_t begin,
                                size_t end) const {
  if (!token.single_word) return true;
  size_t unused;
  if (begin > 0 && is_word_char(char_before(text, begin, &unused))) return false;
  if (end < text.size() && is_word_char(char_at(text, end, &unused))) return false;
  return true;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& out) const {
  size_t done = 0;  // end of the last emitted segment
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    auto [index, length] = longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[static_cast<size_t>(index)];
    size_t begin = pos, end = pos + length;
    pos = end;
    if (!accepts(token, text, begin, end)) continue;
    if (token.lstrip) {
      size_t b;
      while (begin > done && is_whitespace(char_before(text, begin, &b))) begin = std::max(b, done);
    }
    if (token.rstrip) {
      size_t n;
      while (end < text.size() && is_whitespace(char_at(text, end, &n))) end += n;
    }
    if (begin > done) out.push_back({text.substr(done, begin - done), -1});
    out.push_back({text.substr(begin, end - begin), token.id});
    done = pos = end;
  }
  if (done < text.size()) out.push_back({text.substr(done), -1});
}

}  // namespace pt
