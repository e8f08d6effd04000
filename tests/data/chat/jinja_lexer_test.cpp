// Template text around tags: trim_blocks, lstrip_blocks and the -/+ markers exactly as jinja2 applies them
// (this decides the bytes between a chat template's tags), comments, raw blocks and literals.
#include "data/chat/jinja_test_util.h"

namespace pt::jinja::testing {
namespace {

const JinjaCase kWhitespace[] = {
    // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before it goes.
    {R"J(a
{% if true %}
b
{% endif %}
c)J",
     "", R"J(a
b
c)J"},
    {R"J(a
    {% if true %}
    b
    {% endif %}
c)J",
     "", R"J(a
    b
c)J"},
    {R"J({% for x in [1, 2] %}
  - {{ x }}
{% endfor %}
)J",
     "", R"J(  - 1
  - 2
)J"},
    // Only one newline is trimmed.
    {R"J({% if true %}

x{% endif %})J",
     "", R"J(
x)J"},
    // Variables are neither trimmed nor stripped.
    {R"J(a
  {{ 'x' }}
b)J",
     "", R"J(a
  x
b)J"},
    // Text before the tag on the same line keeps its spaces.
    {R"J(a  {% if true %}b{% endif %})J", "", R"J(a  b)J"},
    {R"J({{ 'x' }}  {% if true %}y{% endif %})J", "", R"J(x  y)J"},
    // The start of the template is the start of a line.
    {R"J(   {% if true %}y{% endif %})J", "", R"J(y)J"},
    {R"J(	 {% if true %}y{% endif %})J", "", R"J(y)J"},
    // {%+ keeps the indentation, +%} keeps the newline.
    {R"J(x
  {%+ if true %}y{% endif %})J",
     "", R"J(x
  y)J"},
    {R"J({% if true +%}
z{% endif %})J",
     "", R"J(
z)J"},
    // - strips all whitespace, newlines included, on its side.
    {R"J(a  
  {%- if true %}b{% endif %})J",
     "", R"J(ab)J"},
    {R"J({% if true -%}  

  b{% endif %})J",
     "", R"J(b)J"},
    {R"J(a  {{- 'x' -}}  
 b)J",
     "", R"J(axb)J"},
    {R"J(<{{- ' x ' -}}>)J", "", R"J(< x >)J"},
    // After a trimmed newline the next tag starts a line, so its indentation is stripped too.
    {R"J({% if true %}
    {% if true %}
x
    {% endif %}
{% endif %})J",
     "", R"J(x
)J"},
    // Comments: gone, with the same trimming as block tags.
    {R"J(a{# a comment #}b)J", "", R"J(ab)J"},
    {R"J(a
{# comment #}
b)J",
     "", R"J(a
b)J"},
    {R"J(a
   {# indented comment #}
b)J",
     "", R"J(a
b)J"},
    {R"J(a  {#- both sides -#}  b)J", "", R"J(ab)J"},
    {R"J({# {{ not rendered }} {% if %} #}ok)J", "", R"J(ok)J"},
    // Raw blocks: their body is text; {% raw %} trims nothing after it, {% endraw %} does.
    {R"J({% raw %}{{ x }}{% if %}{% endraw %})J", "", R"J({{ x }}{% if %})J"},
    {R"J({% raw %}
  {{ x }}
{% endraw %}
after)J",
     "", R"J(
  {{ x }}
after)J"},
    {R"J(a {%- raw -%} b {%- endraw -%} c)J", "", R"J(abc)J"},
    // One trailing newline of the template is dropped (keep_trailing_newline off).
    {R"J(abc

)J",
     "", R"J(abc
)J"},
    {R"J({% if true %}x{% endif %}
)J",
     "", R"J(x)J"},
};

TEST(JinjaLexer, WhitespaceControlMatchesJinja2) { check_cases(kWhitespace); }

const JinjaCase kLiterals[] = {
    {R"J({{ "a" 'b' "c" }})J", "", R"J(abc)J"},
    {R"J({{ "tab\tnewline\nquote\"back\\" | tojson }})J", "", R"J("tab\tnewline\nquote\"back\\")J"},
    {R"J({{ "\u00e9\x41\U0001F600\101" }})J", "", R"J(éA😀A)J"},
    {R"J({{ 'it\'s' }} {{ "\q" }})J", "", R"J(it's \q)J"},
    {R"J({{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 0 }})J", "", R"J(1000 31 15 5 0)J"},
    {R"J({{ 1e3 }} {{ 1.5e-3 }} {{ 2.50 }} {{ 1_0.5 }})J", "", R"J(1000.0 0.0015 2.5 10.5)J"},
    {R"J({{ true }} {{ True }} {{ false }} {{ none }} {{ None }})J", "", R"J(True True False None None)J"},
    {R"J({{ "multi
line" }})J",
     "", R"J(multi
line)J"},
    {R"J({{ {'a': {'b': 1}} }})J", "", R"J({'a': {'b': 1}})J"},
};

TEST(JinjaLexer, LiteralsMatchPython) { check_cases(kLiterals); }

TEST(JinjaLexer, NewlinesAreNormalised) {
  // \r\n and \r read as \n, in text and in string literals (checked against jinja2 by hand).
  EXPECT_EQ(render("a\r\nb\rc\r\n"), "a\nb\nc");
  EXPECT_EQ(render("{% if true %}\r\nx{% endif %}"), "x");
  EXPECT_EQ(render("{{ 'p\r\nq' }}"), "p\nq");
}

}  // namespace
}  // namespace pt::jinja::testing
