#include "data/prepare/utf8.h"

#include <simdjson.h>
#include <utf8proc.h>

namespace pt {

namespace {
// Length of the valid sequence at text[i], or a negative utf8proc error.
utf8proc_ssize_t sequence_at(std::string_view text, size_t i) {
  utf8proc_int32_t cp = 0;
  return utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                          static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
}
}  // namespace

size_t find_invalid_utf8(std::string_view text) {
  if (simdjson::validate_utf8(text.data(), text.size())) return std::string_view::npos;
  for (size_t i = 0; i < text.size();) {
    auto n = sequence_at(text, i);
    if (n <= 0) return i;
    i += static_cast<size_t>(n);
  }
  return std::string_view::npos;
}

std::string repair_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    auto n = sequence_at(text, i);
    if (n <= 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    }
  }
  return out;
}

}  // namespace pt
