#include "data/tokenizer/decoder.h"

#include "core/error.h"
#include "data/tokenizer/byte_level.h"

#include <utf8proc.h>

#include <optional>

namespace pt {

namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// The byte of a "<0xNN>" token. The two characters parse as Rust's u8::from_str_radix(_, 16) does,
// which also takes a '+' sign ("<0x+A>"), to match HF exactly.
std::optional<uint8_t> fallback_byte(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  std::string_view digits = token.substr(3, 2);
  if (digits[0] == '+') digits.remove_prefix(1);
  int value = 0;
  for (char c : digits) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return std::nullopt;
    value = value * 16 + d;
  }
  return static_cast<uint8_t>(value);
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    utf8proc_int32_t cp;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                              static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string run;
  size_t run_tokens = 0;
  auto flush = [&] {
    if (run_tokens == 0) return;
    if (valid_utf8(run)) {
      out.push_back(run);
    } else {
      for (size_t i = 0; i < run_tokens; ++i) out.emplace_back(kReplacementChar);
    }
    run.clear();
    run_tokens = 0;
  };
  for (std::string& token : tokens) {
    if (auto byte = fallback_byte(token)) {
      run += static_cast<char>(*byte);
      ++run_tokens;
    } else {
      flush();
      out.push_back(std::move(token));
    }
  }
  flush();
  return out;
}

std::string replace_all(std::string_view token, std::string_view literal, std::string_view content) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = token.find(literal, pos)) != std::string_view::npos; pos = hit + literal.size()) {
    out += token.substr(pos, hit - pos);
    out += content;
  }
  out += token.substr(pos);
  return out;
}

std::string replace_all(std::string_view token, const Regex& regex, std::string_view content) {
  std::vector<std::pair<size_t, size_t>> matches;
  regex.find_all(token, matches);
  std::string out;
  size_t pos = 0;
  for (auto [begin, end] : matches) {
    out += token.substr(pos, begin - pos);
    out += content;
    pos = end;
  }
  out += token.substr(pos);
  return out;
}

// HF Strip: counts characters, and the trailing cut never reaches into the leading one.
std::string strip(std::string_view token, std::string_view c, size_t start, size_t stop) {
  size_t begin = 0, end = token.size();
  for (size_t i = 0; i < start && token.substr(begin).starts_with(c); ++i) begin += c.size();
  for (size_t i = 0; i < stop && end > begin && token.substr(begin, end - begin).ends_with(c); ++i)
    end -= c.size();
  return std::string(token.substr(begin, end - begin));
}

// HF's cleanup of WordPiece output, one replacement after another.
std::string cleanup(std::string token) {
  static constexpr std::pair<std::string_view, std::string_view> kReplacements[] = {
      {" .", "."},   {" ?", "?"},           {" !", "!"},   {" ,", ","},     {" ' ", "'"},    {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  };
  for (auto [from, to] : kReplacements) token = replace_all(token, from, to);
  return token;
}

}  // namespace

void Decoder::add_byte_level() { steps_.push_back({Kind::ByteLevel, {}, {}, {}}); }

void Decoder::add_replace(std::string literal, std::string content) {
  PT_ASSERT(!literal.empty());
  steps_.push_back({Kind::Replace, std::move(literal), {}, std::move(content)});
}

void Decoder::add_replace(std::shared_ptr<const Regex> regex, std::string content) {
  steps_.push_back({Kind::Replace, {}, std::move(regex), std::move(content)});
}

void Decoder::add_byte_fallback() { steps_.push_back({Kind::ByteFallback, {}, {}, {}}); }

void Decoder::add_fuse() { steps_.push_back({Kind::Fuse, {}, {}, {}}); }

void Decoder::add_strip(std::string character, size_t start, size_t stop) {
  PT_ASSERT(!character.empty());
  Step step{Kind::Strip, std::move(character), {}, {}};
  step.start = start;
  step.stop = stop;
  steps_.push_back(std::move(step));
}

void Decoder::add_metaspace(std::string replacement, bool drop_first) {
  Step step{Kind::Metaspace, std::move(replacement), {}, {}};
  step.drop_first = drop_first;
  steps_.push_back(std::move(step));
}

void Decoder::add_wordpiece(std::string prefix, bool cleanup) {
  Step step{Kind::WordPiece, std::move(prefix), {}, {}};
  step.cleanup = cleanup;
  steps_.push_back(std::move(step));
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::ByteLevel: {
        std::string bytes;
        for (const std::string& token : tokens) {
          auto raw = byte_level_decode(token);
          bytes += raw ? *raw : token;  // a token outside the byte alphabet stands for its own bytes
        }
        tokens.assign(1, std::move(bytes));
        break;
      }
      case Kind::Replace:
        for (std::string& token : tokens)
          token = step.regex ? replace_all(token, *step.regex, step.content)
                             : replace_all(token, step.text, step.content);
        break;
      case Kind::ByteFallback:
        tokens = byte_fallback(std::move(tokens));
        break;
      case Kind::Fuse: {
        std::string all;
        for (const std::string& token : tokens) all += token;
        tokens.assign(1, std::move(all));
        break;
      }
      case Kind::Strip:
        for (std::string& token : tokens) token = strip(token, step.text, step.start, step.stop);
        break;
      case Kind::Metaspace:
        for (size_t i = 0; i < tokens.size(); ++i)
          tokens[i] = replace_all(tokens[i], step.text, i == 0 && step.drop_first ? "" : " ");
        break;
      case Kind::WordPiece:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string& token = tokens[i];
          if (i > 0) {
            if (token.starts_with(step.text)) {
              token.erase(0, step.text.size());
            } else {
              token.insert(0, 1, ' ');
            }
          }
          if (step.cleanup) token = cleanup(std::move(token));
        }
        break;
    }
  }
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0 && join_with_spaces_) out += ' ';
    out += tokens[i];
  }
  return out;
}

}  // namespace pt
