#include "data/tokenizer/byte_level.h"

#include <unordered_map>

namespace pt {

namespace {

bool stands_for_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

struct Tables {
  std::array<char32_t, 256> codepoint{};
  std::array<std::string, 256> chars;
  std::unordered_map<char32_t, uint8_t> byte_of;
  Tables() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      codepoint[b] = stands_for_itself(b) ? static_cast<char32_t>(b) : next++;
      chars[b] = utf8(codepoint[b]);
      byte_of[codepoint[b]] = static_cast<uint8_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::array<std::string, 256>& byte_level_chars() { return tables().chars; }

char32_t byte_level_codepoint(uint8_t b) { return tables().codepoint[b]; }

std::string byte_level_encode(std::string_view bytes) {
  const auto& chars = tables().chars;
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += chars[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view spelled) {
  const auto& byte_of = tables().byte_of;
  std::string out;
  out.reserve(spelled.size());
  size_t i = 0;
  while (i < spelled.size()) {
    auto c = static_cast<uint8_t>(spelled[i]);
    char32_t cp;
    size_t len;
    // The map only uses code points below U+0144, so one- and two-byte sequences suffice.
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < spelled.size() && (spelled[i + 1] & 0xC0) == 0x80) {
      cp = static_cast<char32_t>(((c & 0x1F) << 6) | (static_cast<uint8_t>(spelled[i + 1]) & 0x3F));
      len = 2;
    } else {
      return std::nullopt;
    }
    auto it = byte_of.find(cp);
    if (it == byte_of.end()) return std::nullopt;
    out += static_cast<char>(it->second);
    i += len;
  }
  return out;
}

}  // namespace pt
