// A Jinja template engine for models' chat templates (tokenizer_config.json "chat_template"). It renders
// as Python's jinja2 3.1 does when transformers sets it up: ImmutableSandboxedEnvironment(trim_blocks=True,
// lstrip_blocks=True) with loop controls, HF's {% generation %} tag, transformers' tojson, raise_exception,
// strftime_now, dict and namespace, and the default Undefined. Parse once, render per record.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/chat/jinja_error.h"

namespace pt::jinja {

struct Rendered {
  std::string text;
  // Byte ranges [begin, end) of `text` produced inside {% generation %} ... {% endgeneration %} blocks
  // (HF's marker for assistant tokens; outside HF they render their body unchanged). As in transformers,
  // a block rendered inside a macro or block set is placed where the template's output stood when it ran.
  std::vector<std::pair<size_t, size_t>> generation;
};

struct RenderOptions {
  // The time strftime_now() formats, as local time like Python's datetime.now(); unset: the clock's now.
  // Tests and reproducible data preparation fix it.
  std::optional<std::chrono::system_clock::time_point> now;
};

struct Program;

class Template {
 public:
  // Parses `source`; errors (TemplateError, a pt::Error) name `origin`, line and column and what was
  // expected.
  static Template parse(std::string_view source, std::string origin);

  // Renders with variables from a JSON object; dicts iterate in the object's key order, so pass an
  // ordered_json where that order matters (nlohmann::json sorts keys). Errors, including the template's own
  // raise_exception(), are TemplateErrors naming the template's origin, line and column. Safe to call from
  // several threads at once.
  Rendered render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;
  Rendered render(const nlohmann::json& context, const RenderOptions& options = {}) const;

  const std::string& origin() const { return origin_; }

 private:
  template <class Json>
  Rendered render_json(const Json& context, const RenderOptions& options) const;

  std::string origin_;
  std::string source_;  // newline-normalised, for error locations
  std::shared_ptr<const Program> program_;
};

}  // namespace pt::jinja
