// JSON in and out of templates: the render context arrives as JSON, and `tojson` writes what transformers'
// version writes (json.dumps with ensure_ascii=False, its separators, indent and sort_keys).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "data/chat/jinja_value.h"

namespace pt::jinja {

Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // unset: one line
  std::string item_separator = ", ";  // json.dumps' defaults (", " becomes "," with an indent)
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(v, ...): Failure for values JSON cannot hold (undefined, macros, namespaces).
std::string to_json(const Value& v, const JsonOptions& options);

}  // namespace pt::jinja
