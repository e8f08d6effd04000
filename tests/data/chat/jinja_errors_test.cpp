// Malformed templates and failing renders: every error names the template's origin, line and column and
// says what was expected; raise_exception() reaches the caller with the template's own message.
#include "data/chat/jinja_test_util.h"

namespace pt::jinja::testing {
namespace {

struct ErrorCase {
  const char* source;
  int line, column;
  const char* reason;  // a substring of the message
};

TemplateError error_of(std::string_view source, std::string_view context = "") {
  try {
    render(source, context);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << source;
  return TemplateError("", 0, 0, "", false);
}

void check_errors(const ErrorCase* cases, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const ErrorCase& c = cases[i];
    SCOPED_TRACE(c.source);
    TemplateError e = error_of(c.source);
    EXPECT_EQ(e.origin(), "test.jinja");
    EXPECT_EQ(e.line(), c.line);
    EXPECT_EQ(e.column(), c.column);
    EXPECT_NE(e.reason().find(c.reason), std::string::npos) << e.what();
    std::string prefix = "test.jinja:" + std::to_string(c.line) + ":" + std::to_string(c.column) + ": ";
    EXPECT_EQ(std::string(e.what()).substr(0, prefix.size()), prefix);
  }
}

const ErrorCase kSyntax[] = {
    {"{% if x %}\nabc", 2, 4,
     "unexpected end of template, expected 'elif' or 'else' or 'endif' to close the 'if' at line 1 column 4"},
    {"{% for x in y %}\n  {% endif %}", 2, 6, "unknown tag 'endif', expected 'endfor' or 'else'"},
    {"{% if x %}{% else %}{% else %}{% endif %}", 1, 24, "unknown tag 'else', expected 'endif'"},
    {"{% endif %}", 1, 4, "unknown tag 'endif'"},
    {"{% foo %}", 1, 4, "unknown tag 'foo'"},
    {"{{ 1 + }}", 1, 8, "expected an expression"},
    {"{{ x y }}", 1, 6, "expected end of print statement '}}', got 'y'"},
    {"{{ foo( }}", 1, 9, "unexpected '}', expected ')'"},
    {"{{ foo) }}", 1, 7, "unexpected ')'"},
    {"a\n{# never closed", 2, 1, "missing end of comment tag '#}'"},
    {"{% raw %}abc", 1, 1, "missing end of raw directive"},
    {"{{ 'unterminated }}", 1, 4, "unexpected character '''"},
    {"{{ a @ b }}", 1, 6, "unexpected character '@'"},
    {"{{ x | nofilter }}", 1, 8, "no filter named 'nofilter'"},
    {"{% for m in messages %}{{ m is notatest }}{% endfor %}", 1, 32, "no test named 'notatest'"},
    {"{% for x in y %}{% endfor %}{% break %}", 1, 32, "'break' outside loop"},
    {"{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", 1, 35,
     "'continue' outside loop"},
    {"{% macro m(a=1, b) %}{% endmacro %}", 1, 17, "non-default argument follows default argument"},
    {"{% set 1 = 2 %}", 1, 8, "can't assign to integer"},
    {"{% set true = 2 %}", 1, 8, "can't assign to the constant 'true'"},
    {"{% call m %}{% endcall %}", 1, 9, "expected a macro call"},
    {"{% for x in y recursive %}{% endfor %}", 1, 15, "recursive loops are not supported"},
    {"{% extends 'base.html' %}", 1, 4, "'extends' tags are not supported"},
    {"line 1\nline 2 {{ x | }}", 2, 15, "expected a name, got end of print statement"},
    {"{{ 'é' ~ }}", 1, 10, "expected an expression"},
};

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) { check_errors(kSyntax, std::size(kSyntax)); }

const ErrorCase kRender[] = {
    {"line 1\n  {{ x.y.z }}", 2, 7, "'x' is undefined"},
    {"{% set d = {} %}\n{{ d.y.z }}", 2, 7, "'dict object' has no attribute 'y'"},
    {"{{ 1 + 'a' }}", 1, 6, "unsupported operand type(s) for +: 'int' and 'str'"},
    {"{% for x in 5 %}{% endfor %}", 1, 4, "'int' object is not iterable"},
    {"{% macro m() %}\n  {{ 1 // 0 }}\n{% endmacro %}{{ m() }}", 2, 8, "integer division or modulo by zero"},
    {"{{ [1, 2] | join(', ', 'a', 'b') }}", 1, 13, "join() takes at most 2 argument(s) (3 given)"},
    {"{% set l = [] %}{{ l.append(1) }}", 1, 21, "access to attribute 'append' of 'list' object is unsafe."},
};

TEST(JinjaErrors, RenderErrorsNameLineAndColumn) { check_errors(kRender, std::size(kRender)); }

TEST(JinjaErrors, RaiseExceptionCarriesTheTemplatesMessage) {
  const char* tpl =
      "{% for m in messages %}\n"
      "{% if m.role not in ['user', 'assistant'] %}\n"
      "  {{ raise_exception('Only user and assistant roles are supported, got ' ~ m.role) }}\n"
      "{% endif %}\n"
      "{% endfor %}";
  TemplateError e = error_of(tpl, R"({"messages": [{"role": "user"}, {"role": "tool"}]})");
  EXPECT_TRUE(e.raised());
  EXPECT_EQ(e.reason(), "Only user and assistant roles are supported, got tool");
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 6);
  EXPECT_STREQ(e.what(), "test.jinja:3:6: Only user and assistant roles are supported, got tool");
  EXPECT_FALSE(error_of("{{ 1 / 0 }}").raised());
}

TEST(JinjaErrors, DeepNestingIsRefusedNotACrash) {
  std::string deep(1000, '(');
  EXPECT_THROW(render("{{ " + deep + "1" + std::string(1000, ')') + " }}"), TemplateError);
  // Unbounded macro recursion stops with an error, as Python's recursion limit does.
  EXPECT_THROW(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), TemplateError);
}

TEST(JinjaErrors, ContextMustBeAnObject) {
  Template t = Template::parse("x", "t.jinja");
  EXPECT_THROW(t.render(nlohmann::ordered_json::array()), pt::Error);
}

}  // namespace
}  // namespace pt::jinja::testing
