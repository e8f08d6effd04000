// The GPT-2 byte <-> character map that byte-level BPE vocabularies are written in: printable bytes
// stand for themselves, the other 68 bytes map to U+0100.. in byte order, so every byte string has a
// printable, whitespace-free spelling. Internally packtrain works on raw bytes and only uses this map
// at the tokenizer.json boundary.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pt {

// UTF-8 spelling of each byte's character.
const std::array<std::string, 256>& byte_level_chars();

// The code point that byte b is spelled with.
char32_t byte_level_codepoint(uint8_t b);

// Raw bytes -> byte-level spelling ("\n hi" -> "ĊĠhi").
std::string byte_level_encode(std::string_view bytes);

// Byte-level spelling -> raw bytes; nullopt when a character is outside the map or the UTF-8 is invalid.
std::optional<std::string> byte_level_decode(std::string_view spelled);

}  // namespace pt
