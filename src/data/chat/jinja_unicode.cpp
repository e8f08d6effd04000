#include "data/chat/jinja_unicode.h"

#include <utf8proc.h>

namespace pt::jinja::unicode {

namespace {

utf8proc_category_t category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }

char32_t map_case(char32_t c, utf8proc_int32_t (*f)(utf8proc_int32_t)) {
  return static_cast<char32_t>(f(static_cast<utf8proc_int32_t>(c)));
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  return map_case(c, utf8proc_toupper);
}
char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  return map_case(c, utf8proc_tolower);
}
char32_t to_title(char32_t c) {
  if (c < 0x80) return to_upper(c);
  return map_case(c, utf8proc_totitle);
}

// Python's full case mappings where one character becomes several (SpecialCasing.txt, unconditional):
// the ones text plausibly holds. {character, upper, title}.
struct Special {
  char32_t c;
  const char* upper;
  const char* title;
};
constexpr Special kSpecial[] = {
    {0xDF, "SS", "Ss"},
    {0x149, "\u02BCN", "\u02BCN"},
    {0x1F0, "J\u030C", "J\u030C"},
    {0x587, "\u0535\u0552", "\u0535\u0582"},
    {0xFB00, "FF", "Ff"},
    {0xFB01, "FI", "Fi"},
    {0xFB02, "FL", "Fl"},
    {0xFB03, "FFI", "Ffi"},
    {0xFB04, "FFL", "Ffl"},
    {0xFB05, "ST", "St"},
    {0xFB06, "ST", "St"},
};

const Special* special(char32_t c) {
  if (c < 0xDF) return nullptr;
  for (const Special& s : kSpecial)
    if (s.c == c) return &s;
  return nullptr;
}

// How a character is cased: 'u'pper, 'l'ower or 't'itle.
void append_cased(std::string& out, char32_t c, char how) {
  if (how != 'l') {
    if (const Special* s = special(c)) {
      out += how == 'u' ? s->upper : s->title;
      return;
    }
  } else if (c == 0x130) {  // İ lowers to i and a combining dot
    out += "i\u0307";
    return;
  }
  append_utf8(out, how == 'u' ? to_upper(c) : how == 'l' ? to_lower(c) : to_title(c));
}

// Applies `how(c, index)` -> 'u', 'l', 't' or 0 (unchanged) to each character.
template <class F>
std::string map_chars(std::string_view s, F how) {
  std::string out;
  out.reserve(s.size());
  size_t index = 0;
  for (size_t i = 0; i < s.size(); ++index) {
    size_t start = i;
    char32_t c = decode(s, i);
    char h = how(c, start);
    if (!h)
      out.append(s, start, i - start);
    else
      append_cased(out, c, h);
  }
  return out;
}

// Final sigma: Σ lowers to ς after a cased letter when no cased letter follows (Python's lower()).
bool final_sigma(std::string_view s, size_t at) {
  size_t after = at;
  decode(s, after);
  if (after < s.size()) {
    size_t j = after;
    if (is_cased(decode(s, j))) return false;
  }
  if (at == 0) return false;
  size_t before = at - 1;
  while (before > 0 && (static_cast<unsigned char>(s[before]) & 0xC0) == 0x80) --before;
  return is_cased(decode(s, before));
}

}  // namespace

char32_t decode(std::string_view s, size_t& i) {
  utf8proc_int32_t cp = -1;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                            static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (n <= 0 || cp < 0) {
    ++i;
    return 0xFFFD;
  }
  i += static_cast<size_t>(n);
  return static_cast<char32_t>(cp);
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

size_t length(std::string_view s) {
  size_t n = 0;
  // Every byte that is not a UTF-8 continuation byte starts a code point.
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<size_t> offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    out.push_back(i);
    decode(s, i);
  }
  out.push_back(s.size());
  return out;
}

bool is_space(char32_t c) {
  // Python's _PyUnicode_IsWhitespace: bidi classes WS, B, S and category Zs.
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_alpha(char32_t c) {
  if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}

bool is_decimal(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return category(c) == UTF8PROC_CATEGORY_ND;
}

bool is_digit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return category(c) == UTF8PROC_CATEGORY_ND || (c >= 0xB2 && c <= 0xB3) || c == 0xB9 ||
         (c >= 0x2070 && c <= 0x2079) || (c >= 0x2080 && c <= 0x2089);
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool is_alnum(char32_t c) { return is_alpha(c) || is_numeric(c); }

bool is_upper(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU;
}

bool is_lower(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  return category(c) == UTF8PROC_CATEGORY_LL;
}

bool is_cased(char32_t c) { return is_upper(c) || is_lower(c) || category(c) == UTF8PROC_CATEGORY_LT; }

bool is_printable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool is_word(char32_t c) { return c == '_' || is_alnum(c); }

std::string upper(std::string_view s) {
  return map_chars(s, [](char32_t, size_t) { return 'u'; });
}

std::string lower(std::string_view s) {
  std::string out =
      map_chars(s, [&](char32_t c, size_t at) { return c == 0x3A3 && final_sigma(s, at) ? '\0' : 'l'; });
  if (out.find("\u03A3") == std::string::npos) return out;
  // The sigmas left unmapped above are final ones.
  std::string fixed;
  for (size_t i = 0; i < out.size();) {
    size_t start = i;
    if (decode(out, i) == 0x3A3)
      fixed += "\u03C2";
    else
      fixed.append(out, start, i - start);
  }
  return fixed;
}

std::string swapcase(std::string_view s) {
  return map_chars(s, [](char32_t c, size_t) { return is_upper(c) ? 'l' : is_lower(c) ? 'u' : '\0'; });
}

std::string title(std::string_view s) {
  // A cased character after an uncased one starts a word; every other cased character is lowered.
  bool previous_cased = false;
  return map_chars(s, [&](char32_t c, size_t) {
    char r = previous_cased ? 'l' : 't';
    previous_cased = is_cased(c);
    return r;
  });
}

std::string capitalize(std::string_view s) {
  bool first = true;
  return map_chars(s, [&](char32_t, size_t) {
    char r = first ? 't' : 'l';
    first = false;
    return r;
  });
}

std::string_view strip(std::string_view s, const std::string_view* chars, bool left, bool right) {
  std::vector<char32_t> set;
  if (chars) {
    for (size_t i = 0; i < chars->size();) set.push_back(decode(*chars, i));
  }
  auto strippable = [&](char32_t c) {
    if (!chars) return is_space(c);
    for (char32_t x : set)
      if (x == c) return true;
    return false;
  };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!strippable(decode(s, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t probe = start;
      if (!strippable(decode(s, probe))) break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

std::vector<std::string_view> split_whitespace(std::string_view s, long long maxsplit) {
  std::vector<std::string_view> out;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < s.size()) {
      size_t next = i;
      if (!is_space(decode(s, next))) break;
      i = next;
    }
  };
  skip_space();
  while (i < s.size()) {
    if (maxsplit >= 0 && static_cast<long long>(out.size()) >= maxsplit) {
      // The rest, with trailing whitespace stripped, is the last item.
      out.push_back(strip(s.substr(i), nullptr, false, true));
      return out;
    }
    size_t start = i;
    while (i < s.size()) {
      size_t next = i;
      if (is_space(decode(s, next))) break;
      i = next;
    }
    out.push_back(s.substr(start, i - start));
    skip_space();
  }
  return out;
}

std::vector<std::string_view> rsplit_whitespace(std::string_view s, long long maxsplit) {
  std::vector<std::string_view> out;
  auto pos = offsets(s);
  size_t n = pos.size() - 1;  // code points
  auto space_at = [&](size_t k) {
    size_t b = pos[k];
    return is_space(decode(s, b));
  };
  size_t end = n;
  while (end > 0 && space_at(end - 1)) --end;
  while (end > 0) {
    if (maxsplit >= 0 && static_cast<long long>(out.size()) >= maxsplit) {
      out.push_back(strip(s.substr(0, pos[end]), nullptr, true, false));
      break;
    }
    size_t start = end;
    while (start > 0 && !space_at(start - 1)) --start;
    out.push_back(s.substr(pos[start], pos[end] - pos[start]));
    end = start;
    while (end > 0 && space_at(end - 1)) --end;
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string_view> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string_view> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    size_t at = i;
    char32_t c = decode(s, i);
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
               c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    out.push_back(s.substr(start, (keepends ? i : at) - start));
    start = i;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

}  // namespace pt::jinja::unicode
