// Stepping through UTF-8 text that may hold invalid bytes (each then counts as one character).
#pragma once

#include <utf8proc.h>

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace pt {

struct Utf8Char {
  char32_t code_point;  // 0 when !valid
  size_t length;        // bytes; 1 for an invalid byte
  bool valid;
};

inline Utf8Char next_utf8_char(std::string_view text, size_t pos) {
  auto byte = static_cast<unsigned char>(text[pos]);
  if (byte < 0x80) return {byte, 1, true};
  utf8proc_int32_t cp;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                            static_cast<utf8proc_ssize_t>(std::min<size_t>(text.size() - pos, 4)), &cp);
  if (n <= 0) return {0, 1, false};
  return {static_cast<char32_t>(cp), static_cast<size_t>(n), true};
}

}  // namespace pt
