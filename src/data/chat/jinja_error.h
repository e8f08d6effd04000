// Template errors: where (origin, line, column) and why, for parse and render failures alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace pt::jinja {

class TemplateError : public pt::Error {
 public:
  TemplateError(std::string origin, int line, int column, std::string reason, bool raised);
  const std::string& origin() const { return origin_; }
  int line() const { return line_; }
  int column() const { return column_; }
  // The message without the location: for raise_exception() the template's own words.
  const std::string& reason() const { return reason_; }
  // Whether the template gave up through raise_exception().
  bool raised() const { return raised_; }

 private:
  std::string origin_;
  int line_, column_;
  std::string reason_;
  bool raised_;
};

// 1-based line and column (in code points) of byte `pos` of `source`.
std::pair<int, int> line_column(std::string_view source, uint32_t pos);

[[noreturn]] void throw_at(const std::string& origin, std::string_view source, uint32_t pos,
                           std::string reason, bool raised = false);

}  // namespace pt::jinja
