#include "data/chat/jinja_error.h"

#include <fmt/format.h>

namespace pt::jinja {

TemplateError::TemplateError(std::string origin, int line, int column, std::string reason, bool raised)
    : pt::Error(fmt::format("{}:{}:{}: {}", origin, line, column, reason)),
      origin_(std::move(origin)),
      line_(line),
      column_(column),
      reason_(std::move(reason)),
      raised_(raised) {}

std::pair<int, int> line_column(std::string_view source, uint32_t pos) {
  int line = 1, column = 1;
  for (size_t i = 0; i < pos && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return {line, column};
}

void throw_at(const std::string& origin, std::string_view source, uint32_t pos, std::string reason,
              bool raised) {
  auto [line, column] = line_column(source, pos);
  throw TemplateError(origin, line, column, std::move(reason), raised);
}

}  // namespace pt::jinja
