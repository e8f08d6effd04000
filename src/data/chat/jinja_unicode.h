// Python's str semantics over UTF-8 text: templates index, slice, strip and case-map strings by code point
// and by Python's character classes, so the rendered bytes must follow those rules, not C's.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pt::jinja::unicode {

// Next code point of `s` at byte `i` (advanced past it); an invalid byte reads as U+FFFD.
char32_t decode(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
bool is_ascii(std::string_view s);
// Number of code points (Python's len()).
size_t length(std::string_view s);
// Byte offset of every code point, plus s.size() at the end (for indexing non-ASCII text).
std::vector<size_t> offsets(std::string_view s);

// Python's character classes (str.isspace() and friends).
bool is_space(char32_t c);
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);  // str.isdecimal
bool is_digit(char32_t c);    // str.isdigit (decimal and other digits)
bool is_numeric(char32_t c);  // str.isnumeric
bool is_alnum(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
bool is_cased(char32_t c);
bool is_printable(char32_t c);  // str.isprintable (what repr() keeps unescaped)
bool is_word(char32_t c);       // regex \w

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title
std::string capitalize(std::string_view s);  // str.capitalize
std::string swapcase(std::string_view s);

// str.strip/lstrip/rstrip: `chars` null strips whitespace.
std::string_view strip(std::string_view s, const std::string_view* chars, bool left, bool right);
// str.split() without a separator: runs of whitespace, at most `maxsplit` splits (-1: all).
std::vector<std::string_view> split_whitespace(std::string_view s, long long maxsplit);
std::vector<std::string_view> rsplit_whitespace(std::string_view s, long long maxsplit);
// str.splitlines(keepends).
std::vector<std::string_view> splitlines(std::string_view s, bool keepends);

}  // namespace pt::jinja::unicode
