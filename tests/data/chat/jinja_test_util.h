// Helpers for the Jinja engine's tests. The case tables (JinjaCase) hold outputs checked against Python's
// jinja2 set up as transformers does: tests/data/chat/verify_unit_cases.py re-checks every table.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>

#include "data/chat/jinja.h"

namespace pt::jinja::testing {

// A template, its context (a JSON object; empty means {}) and jinja2's output, or nullptr where jinja2
// raises.
struct JinjaCase {
  const char* source;
  const char* context;
  const char* expected;
};

// A fixed strftime_now() time: 2024-06-01 12:00:00.5 UTC (the verifier uses the same instant).
inline std::chrono::system_clock::time_point fixed_now() {
  return std::chrono::system_clock::time_point(std::chrono::microseconds(1717243200500000LL));
}

inline Rendered render_full(std::string_view source, std::string_view context = "") {
  RenderOptions options;
  options.now = fixed_now();
  auto ctx = nlohmann::ordered_json::parse(context.empty() ? std::string_view("{}") : context);
  return Template::parse(source, "test.jinja").render(ctx, options);
}

inline std::string render(std::string_view source, std::string_view context = "") {
  return render_full(source, context).text;
}

inline void check_cases(const JinjaCase* cases, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const JinjaCase& c = cases[i];
    SCOPED_TRACE(std::string("template: ") + c.source + "\ncontext: " + c.context);
    if (c.expected) {
      try {
        EXPECT_EQ(render(c.source, c.context), c.expected);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "raised: " << e.what();
      }
    } else {
      EXPECT_THROW(render(c.source, c.context), TemplateError);
    }
  }
}

template <size_t N>
void check_cases(const JinjaCase (&cases)[N]) {
  check_cases(cases, N);
}

}  // namespace pt::jinja::testing
