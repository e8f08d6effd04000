// Splits a template into text and the tokens of its tags, as jinja2's lexer does with trim_blocks and
// lstrip_blocks on: the whitespace it drops around tags is what makes the rendered bytes match.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pt::jinja {

enum class Tok : uint8_t {
  Data,
  VarBegin,
  VarEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Integer,
  Float,
  Op,
  Eof
};

struct Token {
  Tok type;
  uint32_t pos;      // byte offset in the normalised source
  std::string text;  // Data: the text; Name: the name; String: the unescaped value; Op: the operator
  int64_t integer = 0;
  double number = 0;
};

struct Lexed {
  std::string source;  // newlines normalised to \n, one trailing newline dropped (keep_trailing_newline off)
  std::vector<Token> tokens;  // ends with Eof
};

// Errors (unclosed comments, stray characters, unbalanced brackets) name `origin`, line and column.
Lexed tokenize(std::string_view source, const std::string& origin);

}  // namespace pt::jinja
