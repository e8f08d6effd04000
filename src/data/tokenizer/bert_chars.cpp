#include "data/tokenizer/bert_chars.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <span>
#include <utility>

namespace pt {

namespace {

using Range = std::pair<char32_t, char32_t>;  // inclusive

// Where HF's tables differ from utf8proc's (found by comparing every code point with HF tokenizers 0.23).
// Format characters (Cf) of later Unicode versions that clean_text keeps.
constexpr std::array<Range, 4> kFormatKept{
    {{0x890, 0x891}, {0x8E2, 0x8E2}, {0x110CD, 0x110CD}, {0x13430, 0x1343F}}};
// Punctuation HF's older tables know as such, and punctuation they do not know.
constexpr std::array<Range, 2> kPunctuationAdded{{{0x166D, 0x166D}, {0x111C9, 0x111C9}}};
constexpr std::array<Range, 32> kPunctuationUnknown{{
    {0x61D, 0x61D},     {0x9FD, 0x9FD},     {0xA76, 0xA76},     {0xC77, 0xC77},     {0xC84, 0xC84},
    {0x1B7D, 0x1B7E},   {0x2E43, 0x2E4F},   {0x2E52, 0x2E5D},   {0x10EAD, 0x10EAD}, {0x10F55, 0x10F59},
    {0x10F86, 0x10F89}, {0x1144B, 0x1144F}, {0x1145A, 0x1145B}, {0x1145D, 0x1145D}, {0x11660, 0x1166C},
    {0x116B9, 0x116B9}, {0x1183B, 0x1183B}, {0x11944, 0x11946}, {0x119E2, 0x119E2}, {0x11A3F, 0x11A46},
    {0x11A9A, 0x11A9C}, {0x11A9E, 0x11AA2}, {0x11B00, 0x11B09}, {0x11C41, 0x11C45}, {0x11C70, 0x11C71},
    {0x11EF7, 0x11EF8}, {0x11F43, 0x11F4F}, {0x11FFF, 0x11FFF}, {0x12FF1, 0x12FF2}, {0x16E97, 0x16E9A},
    {0x16FE2, 0x16FE2}, {0x1E95E, 0x1E95F},
}};
// Nonspacing marks HF's older tables know as such, and those they do not know (which stay).
constexpr std::array<Range, 1> kAccentAdded{{{0x1734, 0x1734}}};
constexpr std::array<Range, 91> kAccentUnknown{{
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8E1},     {0x9FE, 0x9FE},     {0xAFA, 0xAFF},
    {0xB55, 0xB55},     {0xC04, 0xC04},     {0xC3C, 0xC3C},     {0xD00, 0xD00},     {0xD3B, 0xD3C},
    {0xD81, 0xD81},     {0xEBA, 0xEBA},     {0xECE, 0xECE},     {0x180F, 0x180F},   {0x1885, 0x1886},
    {0x1ABF, 0x1ACE},   {0x1DF6, 0x1DFB},   {0xA82C, 0xA82C},   {0xA8C5, 0xA8C5},   {0xA8FF, 0xA8FF},
    {0xA9BD, 0xA9BD},   {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50},
    {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x11073, 0x11074}, {0x110C2, 0x110C2}, {0x111C9, 0x111C9},
    {0x111CF, 0x111CF}, {0x1123E, 0x1123E}, {0x11241, 0x11241}, {0x1133B, 0x1133B}, {0x11438, 0x1143F},
    {0x11442, 0x11444}, {0x11446, 0x11446}, {0x1145E, 0x1145E}, {0x1182F, 0x11837}, {0x11839, 0x1183A},
    {0x1193B, 0x1193C}, {0x1193E, 0x1193E}, {0x11943, 0x11943}, {0x119D4, 0x119D7}, {0x119DA, 0x119DB},
    {0x119E0, 0x119E0}, {0x11A01, 0x11A0A}, {0x11A33, 0x11A38}, {0x11A3B, 0x11A3E}, {0x11A47, 0x11A47},
    {0x11A51, 0x11A56}, {0x11A59, 0x11A5B}, {0x11A8A, 0x11A96}, {0x11A98, 0x11A99}, {0x11C30, 0x11C36},
    {0x11C38, 0x11C3D}, {0x11C3F, 0x11C3F}, {0x11C92, 0x11CA7}, {0x11CAA, 0x11CB0}, {0x11CB2, 0x11CB3},
    {0x11CB5, 0x11CB6}, {0x11D31, 0x11D36}, {0x11D3A, 0x11D3A}, {0x11D3C, 0x11D3D}, {0x11D3F, 0x11D45},
    {0x11D47, 0x11D47}, {0x11D90, 0x11D91}, {0x11D95, 0x11D95}, {0x11D97, 0x11D97}, {0x11EF3, 0x11EF4},
    {0x11F00, 0x11F01}, {0x11F36, 0x11F3A}, {0x11F40, 0x11F40}, {0x11F42, 0x11F42}, {0x13440, 0x13440},
    {0x13447, 0x13455}, {0x16F4F, 0x16F4F}, {0x16FE4, 0x16FE4}, {0x1CF00, 0x1CF2D}, {0x1CF30, 0x1CF46},
    {0x1E000, 0x1E006}, {0x1E008, 0x1E018}, {0x1E01B, 0x1E021}, {0x1E023, 0x1E024}, {0x1E026, 0x1E02A},
    {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF},
    {0x1E944, 0x1E94A},
}};
// Case pairs of Unicode 16, newer than utf8proc's tables: [first, last] lowercases to c + offset.
struct CaseRange {
  char32_t first, last;
  int32_t offset;
};
constexpr std::array<CaseRange, 10> kLowercaseAdded{{
    {0x1C89, 0x1C89, 1},
    {0xA7CB, 0xA7CB, 0x264 - 0xA7CB},
    {0xA7CC, 0xA7CC, 1},
    {0xA7CE, 0xA7CE, 1},
    {0xA7D2, 0xA7D2, 1},
    {0xA7D4, 0xA7D4, 1},
    {0xA7DA, 0xA7DA, 1},
    {0xA7DC, 0xA7DC, 0x19B - 0xA7DC},
    {0x10D50, 0x10D65, 0x20},
    {0x16EA0, 0x16EB8, 0x1B},
}};
constexpr std::array<Range, 8> kCjk{{{0x3400, 0x4DBF},
                                     {0x4E00, 0x9FFF},
                                     {0xF900, 0xFAFF},
                                     {0x20000, 0x2A6DF},
                                     {0x2A700, 0x2B73F},
                                     {0x2B740, 0x2B81F},
                                     {0x2B920, 0x2CEAF},
                                     {0x2F800, 0x2FA1F}}};

bool in(std::span<const Range> ranges, char32_t c) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                             [](char32_t v, const Range& r) { return v < r.first; });
  return it != ranges.begin() && c <= std::prev(it)->second;
}

utf8proc_category_t category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }

void append_utf8(char32_t c, std::string& out) {
  utf8proc_uint8_t buffer[4];
  auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buffer);
  out.append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

}  // namespace

bool bert_whitespace(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool bert_removed(char32_t c) {
  if (c == 0 || c == 0xFFFD) return true;
  if (c == '\t' || c == '\n' || c == '\r') return false;
  auto cat = category(c);
  // Unassigned code points (Cn) would count too, but HF's table of them is empty.
  if (cat == UTF8PROC_CATEGORY_CF) return !in(kFormatKept, c);
  return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CO;
}

bool bert_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  auto cat = category(c);
  if (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO) return !in(kPunctuationUnknown, c);
  return in(kPunctuationAdded, c);
}

bool cjk_ideograph(char32_t c) { return in(kCjk, c); }

bool bert_accent(char32_t c) {
  if (category(c) == UTF8PROC_CATEGORY_MN) return !in(kAccentUnknown, c);
  return in(kAccentAdded, c);
}

void append_bert_lowercase(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  if (c == 0x130) {  // the one full (unconditional) lowercase mapping of more than one character
    out += "i\xCC\x87";
    return;
  }
  for (const CaseRange& r : kLowercaseAdded) {
    if (c >= r.first && c <= r.last) {
      append_utf8(static_cast<char32_t>(static_cast<int32_t>(c) + r.offset), out);
      return;
    }
  }
  append_utf8(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))), out);
}

}  // namespace pt
