// UTF-8 checks for plain-text inputs (JSON inputs are checked by the JSON parser).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pt {

// Byte index of the first invalid UTF-8 sequence, or npos when `text` is valid.
size_t find_invalid_utf8(std::string_view text);

// `text` with every invalid sequence replaced by U+FFFD.
std::string repair_utf8(std::string_view text);

}  // namespace pt
