#include "data/chat/jinja_lexer.h"

#include <cstdlib>

#include "data/chat/jinja_error.h"
#include "data/chat/jinja_unicode.h"

namespace pt::jinja {

namespace {

bool ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool ascii_alpha(char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }

// \r\n and \r become \n; one trailing newline goes (jinja2's keep_trailing_newline=False).
std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const std::string& origin) : origin_(origin) { out_.source = std::move(source); }

  Lexed run() {
    while (pos_ < src().size()) lex_root();
    push(Tok::Eof, static_cast<uint32_t>(src().size()));
    return std::move(out_);
  }

 private:
  std::string_view src() const { return out_.source; }

  [[noreturn]] void error(size_t at, std::string message) {
    throw_at(origin_, src(), static_cast<uint32_t>(at), std::move(message));
  }

  Token& push(Tok type, size_t at, std::string text = {}) {
    out_.tokens.push_back(Token{type, static_cast<uint32_t>(at), std::move(text)});
    return out_.tokens.back();
  }

  // Python's \s (Unicode whitespace) at byte i; its length in bytes, 0 when not whitespace.
  size_t space_at(size_t i) const {
    if (i >= src().size()) return 0;
    size_t j = i;
    return unicode::is_space(unicode::decode(src(), j)) ? j - i : 0;
  }
  size_t skip_spaces(size_t i) const {
    while (size_t n = space_at(i)) i += n;
    return i;
  }
  bool at(size_t i, std::string_view s) const { return src().substr(i, s.size()) == s; }

  // `{%-? raw -?%}` at i: the end of the match, or 0.
  size_t match_raw_begin(size_t i) const {
    size_t j = i + 2;
    if (j < src().size() && (src()[j] == '-' || src()[j] == '+')) ++j;
    j = skip_spaces(j);
    if (!at(j, "raw")) return 0;
    j = skip_spaces(j + 3);
    if (at(j, "-%}")) return skip_spaces(j + 3);
    if (at(j, "%}")) return j + 2;
    return 0;
  }

  // Text before a tag, with `-` stripping all whitespace before it and lstrip_blocks stripping the
  // indentation of a tag alone at the start of its line (never for {{ }}, and {%+ opts out).
  void emit_text(size_t begin, size_t end, char sign, bool is_variable) {
    std::string_view text = src().substr(begin, end - begin);
    if (sign == '-') {
      text = unicode::strip(text, nullptr, false, true);
    } else if (sign != '+' && !is_variable) {
      size_t line_start = text.rfind('\n');
      line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
      if (line_start > 0 || line_starting_) {
        std::string_view tail = text.substr(line_start);
        if (!tail.empty() && unicode::strip(tail, nullptr, true, false).empty())
          text = text.substr(0, line_start);
      }
    }
    if (!text.empty()) push(Tok::Data, begin, std::string(text));
  }

  void lex_root() {
    size_t open = pos_;
    char kind = 0;
    for (; open + 1 < src().size(); ++open) {
      if (src()[open] != '{') continue;
      char c = src()[open + 1];
      if (c == '%' || c == '#' || c == '{') {
        kind = c;
        break;
      }
    }
    if (!kind) {
      push(Tok::Data, pos_, std::string(src().substr(pos_)));
      pos_ = src().size();
      return;
    }
    char sign = 0;
    if (open + 2 < src().size() && (src()[open + 2] == '-' || src()[open + 2] == '+')) sign = src()[open + 2];
    size_t raw_end = kind == '%' ? match_raw_begin(open) : 0;
    emit_text(pos_, open, sign, kind == '{');
    line_starting_ = false;
    pos_ = open + 2 + (sign ? 1 : 0);
    if (raw_end) {
      line_starting_ = src()[raw_end - 1] == '\n';
      pos_ = raw_end;
      lex_raw(open);
    } else if (kind == '#') {
      lex_comment(open);
    } else if (kind == '%') {
      push(Tok::BlockBegin, open);
      lex_tag(true);
    } else {
      push(Tok::VarBegin, open);
      lex_tag(false);
    }
  }

  void lex_comment(size_t open) {
    size_t close = src().find("#}", pos_);
    if (close == std::string_view::npos) error(open, "missing end of comment tag '#}'");
    char sign = close > pos_ && (src()[close - 1] == '-' || src()[close - 1] == '+') ? src()[close - 1] : 0;
    finish_tag(close + 2, sign, true);
  }

  // After a tag's closing delimiter: `-` strips all following whitespace, trim_blocks drops one newline
  // after block tags and comments, `+` keeps everything.
  void finish_tag(size_t end, char sign, bool trim) {
    if (sign == '-')
      end = skip_spaces(end);
    else if (sign != '+' && trim && end < src().size() && src()[end] == '\n')
      ++end;
    line_starting_ = src()[end - 1] == '\n';
    pos_ = end;
  }

  void lex_raw(size_t open) {
    // The body runs to the first {% endraw %}; its text gets the same stripping as text before a tag.
    for (size_t i = src().find("{%", pos_); i != std::string_view::npos; i = src().find("{%", i + 1)) {
      size_t j = i + 2;
      char sign = 0;
      if (j < src().size() && (src()[j] == '-' || src()[j] == '+')) sign = src()[j++];
      j = skip_spaces(j);
      if (!at(j, "endraw")) continue;
      j = skip_spaces(j + 6);
      char end_sign = 0;
      if (at(j, "-%}") || at(j, "+%}")) end_sign = src()[j++];
      if (!at(j, "%}")) continue;
      emit_text(pos_, i, sign, false);
      finish_tag(j + 2, end_sign, true);
      return;
    }
    error(open, "missing end of raw directive {% endraw %}");
  }

  void lex_tag(bool block) {
    std::string expected;  // closing brackets still open
    while (true) {
      if (pos_ >= src().size()) return;  // the parser reports the missing end
      if (expected.empty()) {
        if (block) {
          if (at(pos_, "+%}") || at(pos_, "-%}")) {
            push(Tok::BlockEnd, pos_);
            finish_tag(pos_ + 3, src()[pos_], true);
            return;
          }
          if (at(pos_, "%}")) {
            push(Tok::BlockEnd, pos_);
            finish_tag(pos_ + 2, 0, true);
            return;
          }
        } else {
          if (at(pos_, "-}}")) {
            push(Tok::VarEnd, pos_);
            finish_tag(pos_ + 3, '-', false);
            return;
          }
          if (at(pos_, "}}")) {
            push(Tok::VarEnd, pos_);
            finish_tag(pos_ + 2, 0, false);
            return;
          }
        }
      }
      if (size_t n = space_at(pos_)) {
        pos_ = skip_spaces(pos_ + n);
        continue;
      }
      if (lex_number() || lex_name() || lex_string()) continue;
      lex_operator(expected);
    }
  }

  // digits with single underscores between them: `(\d+_)*\d+`
  size_t digits(size_t i) const {
    size_t j = i;
    while (true) {
      size_t k = j;
      while (k < src().size() && ascii_digit(src()[k])) ++k;
      if (k == j) return j == i ? i : j - 1;  // a trailing '_' is not part of the number
      j = k;
      if (j < src().size() && src()[j] == '_')
        ++j;
      else
        return j;
    }
  }

  bool lex_number() {
    size_t begin = pos_;
    if (!ascii_digit(src()[begin])) return false;
    // Floats first, as jinja2 tries them first: digits with a fraction and/or an exponent.
    if (begin == 0 || src()[begin - 1] != '.') {
      size_t j = digits(begin);
      size_t frac = j;
      if (j < src().size() && src()[j] == '.') {
        size_t k = digits(j + 1);
        if (k > j + 1) frac = k;
      }
      size_t end = frac;
      size_t e = frac;
      if (e < src().size() && (src()[e] | 32) == 'e') {
        ++e;
        if (e < src().size() && (src()[e] == '+' || src()[e] == '-')) ++e;
        size_t k = digits(e);
        if (k > e) end = k;
      }
      if (end > j) {
        std::string text;
        for (size_t i = begin; i < end; ++i)
          if (src()[i] != '_') text += src()[i];
        push(Tok::Float, begin).number = std::strtod(text.c_str(), nullptr);
        pos_ = end;
        return true;
      }
    }
    int base = 10;
    size_t j = begin;
    if (src()[begin] == '0' && begin + 1 < src().size()) {
      char p = static_cast<char>(src()[begin + 1] | 32);
      base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 10;
    }
    std::string text;
    if (base != 10) {
      j = begin + 2;
      while (j < src().size()) {
        size_t k = j + (src()[j] == '_' ? 1 : 0);
        if (k >= src().size()) break;
        char c = static_cast<char>(src()[k] | 32);
        int d = ascii_digit(src()[k]) ? src()[k] - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : 99;
        if (d >= base) break;
        text += src()[k];
        j = k + 1;
      }
      if (text.empty()) base = 10, j = begin;  // "0x" alone: the integer 0, then a name
    }
    if (base == 10) {
      text.clear();
      if (src()[begin] == '0') {
        // `0(_?0)*`: a decimal literal may not start with 0.
        j = begin + 1;
        while (j < src().size()) {
          size_t k = j + (src()[j] == '_' ? 1 : 0);
          if (k < src().size() && src()[k] == '0')
            j = k + 1;
          else
            break;
        }
        text.assign(1, '0');
      } else {
        j = digits(begin);
        for (size_t i = begin; i < j; ++i)
          if (src()[i] != '_') text += src()[i];
      }
    }
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(text.c_str(), &end, base);
    if (errno == ERANGE) error(begin, "integer literal too large");
    push(Tok::Integer, begin).integer = v;
    pos_ = j;
    return true;
  }

  bool lex_name() {
    size_t j = pos_;
    auto name_char = [&](size_t i, bool first, size_t* next) {
      char c = src()[i];
      if (ascii_alpha(c) || c == '_' || (!first && ascii_digit(c))) {
        *next = i + 1;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x80) return false;
      size_t k = i;
      char32_t cp = unicode::decode(src(), k);
      if (unicode::is_alpha(cp) || (!first && unicode::is_numeric(cp))) {
        *next = k;
        return true;
      }
      return false;
    };
    size_t next;
    if (!name_char(j, true, &next)) return false;
    j = next;
    while (j < src().size() && name_char(j, false, &next)) j = next;
    push(Tok::Name, pos_, std::string(src().substr(pos_, j - pos_)));
    pos_ = j;
    return true;
  }

  bool lex_string() {
    char quote = src()[pos_];
    if (quote != '\'' && quote != '"') return false;
    size_t j = pos_ + 1;
    while (j < src().size() && src()[j] != quote) j += src()[j] == '\\' ? 2 : 1;
    if (j >= src().size()) return false;  // unterminated: reported as an unexpected character
    push(Tok::String, pos_, unescape(pos_ + 1, j));
    pos_ = j + 1;
    return true;
  }

  // Python's unicode-escape decoding of a string literal's body.
  std::string unescape(size_t begin, size_t end) {
    std::string out;
    std::string_view s = src();
    for (size_t i = begin; i < end; ++i) {
      if (s[i] != '\\' || i + 1 >= end) {
        out += s[i];
        continue;
      }
      char c = s[++i];
      auto hex = [&](size_t n) {
        if (i + n >= end) error(i - 1, "truncated \\x, \\u or \\U escape");
        char32_t v = 0;
        for (size_t k = 1; k <= n; ++k) {
          char h = static_cast<char>(s[i + k] | 32);
          if (!ascii_digit(s[i + k]) && !(h >= 'a' && h <= 'f'))
            error(i - 1, "truncated \\x, \\u or \\U escape");
          v = v * 16 + static_cast<char32_t>(ascii_digit(s[i + k]) ? s[i + k] - '0' : h - 'a' + 10);
        }
        i += n;
        return v;
      };
      switch (c) {
        case '\n':
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
          unicode::append_utf8(out, hex(2));
          break;
        case 'u':
          unicode::append_utf8(out, hex(4));
          break;
        case 'U': {
          char32_t v = hex(8);
          if (v > 0x10FFFF) error(i - 9, "illegal Unicode character in \\U escape");
          unicode::append_utf8(out, v);
          break;
        }
        default:
          if (c >= '0' && c <= '7') {
            char32_t v = 0;
            size_t k = 0;
            for (; k < 3 && i + k < end && s[i + k] >= '0' && s[i + k] <= '7'; ++k)
              v = v * 8 + (s[i + k] - '0');
            i += k - 1;
            unicode::append_utf8(out, v);
          } else {
            out += '\\';  // unknown escapes stay as written
            out += c;
          }
      }
    }
    return out;
  }

  void lex_operator(std::string& expected) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (auto op : kTwo) {
      if (at(pos_, op)) {
        push(Tok::Op, pos_, std::string(op));
        pos_ += 2;
        return;
      }
    }
    char c = src()[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      size_t j = pos_;
      std::string ch;
      unicode::append_utf8(ch, unicode::decode(src(), j));
      error(pos_, "unexpected character '" + ch + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      expected += c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (c == ')' || c == ']' || c == '}') {
      if (expected.empty()) error(pos_, std::string("unexpected '") + c + "'");
      if (expected.back() != c)
        error(pos_, std::string("unexpected '") + c + "', expected '" + expected.back() + "'");
      expected.pop_back();
    }
    push(Tok::Op, pos_, std::string(1, c));
    ++pos_;
  }

  const std::string& origin_;
  Lexed out_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

Lexed tokenize(std::string_view source, const std::string& origin) {
  return Lexer(normalize_newlines(source), origin).run();
}

}  // namespace pt::jinja
