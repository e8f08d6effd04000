// Statements: if, for (loop variables, else, inline filters, break/continue), set (plain, block, tuple,
// namespace), macros with call blocks, filter and with blocks, HF's generation tag, and jinja2's scoping.
#include "data/chat/jinja_test_util.h"

namespace pt::jinja::testing {
namespace {

const JinjaCase kIf[] = {
    {R"J({% if x %}a{% elif y %}b{% else %}c{% endif %})J", R"J({"x": 1, "y": 1})J", R"J(a)J"},
    {R"J({% if x %}a{% elif y %}b{% else %}c{% endif %})J", R"J({"x": 0, "y": "s"})J", R"J(b)J"},
    {R"J({% if x %}a{% elif y %}b{% else %}c{% endif %})J", R"J({"x": [], "y": {}})J", R"J(c)J"},
    {R"J({% if missing %}a{% else %}b{% endif %})J", "", R"J(b)J"},
    {R"J({% if x %}a{% elif y %}b{% elif z %}c{% endif %}.)J", R"J({"z": true})J", R"J(c.)J"},
    {R"J({% if 0.0 or '' or none or [] or {} %}t{% else %}f{% endif %})J", "", R"J(f)J"},
};

TEST(JinjaStatements, If) { check_cases(kIf); }

const JinjaCase kFor[] = {
    {R"J({% for x in [10, 20, 30] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %})J",
     "", R"J(1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|)J"},
    {R"J({% for x in 'abc' %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %})J", "", R"J(-b,a-c,b-,)J"},
    {R"J({% for x in range(5) %}{{ loop.cycle('o', 'e') }}{% endfor %} {{ loop is defined }})J", "",
     R"J(oeoeo False)J"},
    {R"J({% for x in [1, 1, 2, 2, 1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %})J", "",
     R"J(121)J"},
    {R"J({% for x in [1] %}{{ loop.depth }}{{ loop.depth0 }}{% endfor %})J", "", R"J(10)J"},
    {R"J({% for x in [] %}x{% else %}empty{% endfor %})J", "", R"J(empty)J"},
    {R"J({% for x in missing %}x{% else %}empty{% endfor %})J", "", R"J(empty)J"},
    {R"J({% for x in [1] %}x{% else %}empty{% endfor %})J", "", R"J(x)J"},
    {R"J({% for x in range(10) if x is odd %}{{ x }}{{ loop.last }}{% endfor %})J", "",
     R"J(1False3False5False7False9True)J"},
    {R"J({% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.content }} {% endfor %})J",
     R"J({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]})J",
     R"J(1:u 2:a )J"},
    {R"J({% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %})J", "", R"J(ba)J"},
    {R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %})J", R"J({"d": {"z": 1, "a": [2]}})J",
     R"J(z=1;a=[2];)J"},
    {R"J({% for a, b in [[1, 2], 'xy', (3, 4)] %}{{ a }}{{ b }}{% endfor %})J", "", R"J(12xy34)J"},
    {R"J({% for a, b in [[1, 2, 3]] %}{% endfor %})J", "", nullptr},
    {R"J({% for c in 'héllo' %}{{ c }}.{% endfor %})J", "", R"J(h.é.l.l.o.)J"},
    {R"J({% for x in none %}{% endfor %})J", "", nullptr},
    {R"J({% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ loop.index }}{{ b }} {% endfor %}{% endfor %})J",
     "", R"J(11x 12y 21x 22y )J"},
    {R"J({% for x in range(10) %}{% if x == 5 %}{% break %}{% endif %}{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %})J",
     "", R"J(13)J"},
    // jinja2 runs the else block unless an iteration reached the end of the body.
    {R"J({% for x in [1, 2] %}{% if x == 1 %}{% break %}{% endif %}{% else %}E{% endfor %})J", "", R"J(E)J"},
    {R"J({% for x in [1, 2] %}{% if x == 2 %}{% break %}{% endif %}{% else %}E{% endfor %})J", "", R"J()J"},
    {R"J({% for x in [1, 2] %}{% continue %}{% else %}E{% endfor %})J", "", R"J(E)J"},
    {R"J({% for x in [1, 2] %}{% for y in [1, 2] %}{% if y == 2 %}{% break %}{% endif %}{{ x }}{{ y }} {% endfor %}{% endfor %})J",
     "", R"J(11 21 )J"},
};

TEST(JinjaStatements, For) { check_cases(kFor); }

const JinjaCase kSet[] = {
    {R"J({% set x = 1 %}{% set y = x + 1 %}{{ x }}{{ y }})J", "", R"J(12)J"},
    {R"J({% set a, b = 1, 2 %}{{ a }}{{ b }})J", "", R"J(12)J"},
    {R"J({% set (a, b), c = [1, 2], 3 %}{{ a }}{{ b }}{{ c }})J", "", R"J(123)J"},
    {R"J({% set a, b = [1] %})J", "", nullptr},
    {R"J({% set t = 1, 2 %}{{ t }})J", "", R"J((1, 2))J"},
    {R"J({% set x %}  hello {{ 1 + 1 }}  {% endset %}[{{ x }}])J", "", R"J([  hello 2  ])J"},
    {R"J({% set x | upper | trim %} hi {{ 'there' }} {% endset %}[{{ x }}])J", "", R"J([HI THERE])J"},
    // Scopes: if shares its scope; a loop iteration, a block set and a macro have their own.
    {R"J({% if true %}{% set y = 3 %}{% endif %}{{ y }})J", "", R"J(3)J"},
    {R"J({% for i in [1] %}{% set y = 3 %}{% endfor %}[{{ y }}])J", "", R"J([])J"},
    {R"J({% set x = 1 %}{% for i in [1, 2] %}{% set x = x + 10 %}{{ x }} {% endfor %}{{ x }})J", "",
     R"J(11 11 1)J"},
    {R"J({% for i in [1, 2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x = i %}{% endfor %})J", "",
     R"J([])J"},
    {R"J({% set x %}{% set inner = 1 %}{% endset %}[{{ inner }}])J", "", R"J([])J"},
    // Namespaces carry values out of loops.
    {R"J({% set ns = namespace(count=0, found=false) %}{% for i in range(3) %}{% set ns.count = ns.count + 1 %}{% if i == 1 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }})J",
     "", R"J(3 True)J"},
    {R"J({% set ns = namespace({'a': 1}, b=2) %}{% set ns.c = 3 %}{{ ns.a }}{{ ns.b }}{{ ns.c }} {{ ns.missing is defined }} {{ ns['b'] }})J",
     "", R"J(123 False 2)J"},
    {R"J({% set ns = namespace() %}{% set ns.x = 1 %}{{ ns }})J", "", R"J(<Namespace {'x': 1}>)J"},
    {R"J({% set d = {} %}{% set d.x = 1 %})J", "", nullptr},
    {R"J({% set ns = namespace(_private=1) %})J", "", nullptr},
};

TEST(JinjaStatements, Set) { check_cases(kSet); }

const JinjaCase kMacros[] = {
    {R"J({% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', '?') }} {{ greet(punct='.', name='Cy') }})J",
     "", R"J(Hi Ann! Hi Bo? Hi Cy.)J"},
    {R"J({% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }})J", "", R"J(3,6)J"},
    {R"J({% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }})J", "", R"J([])J"},
    {R"J({% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }})J", "", nullptr},
    {R"J({% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=2) }})J", "", nullptr},
    {R"J({% macro m(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }})J", "",
     R"J(1|(2, 3)|{'k': 'v'})J"},
    {R"J({% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }})J",
     "", R"J(120)J"},
    // A macro reads the variables of where it was defined as they are when it is called.
    {R"J({% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }})J", "", R"J(2)J"},
    {R"J({% macro m() %}{{ x }}{% endmacro %}{% for x in [1] %}[{{ m() }}]{% endfor %})J", "", R"J([])J"},
    {R"J({% for i in [1, 2] %}{% macro show() %}{{ i }}{% endmacro %}{{ show() }}{% endfor %})J", "",
     R"J(12)J"},
    {R"J({% macro m() %}{% set local = 1 %}{% endmacro %}{{ m() }}[{{ local }}])J", "", R"J([])J"},
    {R"J({% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold{% endcall %})J",
     "", R"J(<b>bold</b>)J"},
    {R"J({% macro each(items) %}{% for i in items %}{{ caller(i, loop.index) }}{% endfor %}{% endmacro %}{% call(item, n) each(['x', 'y']) %}{{ n }}={{ item }};{% endcall %})J",
     "", R"J(1=x;2=y;)J"},
    {R"J({% macro plain() %}p{% endmacro %}{% call plain() %}body{% endcall %})J", "", nullptr},
    {R"J({% macro m() %}x{% endmacro %}{{ m }})J", "", R"J(<Macro 'm'>)J"},
};

TEST(JinjaStatements, MacrosAndCallBlocks) { check_cases(kMacros); }

const JinjaCase kBlocks[] = {
    {R"J({% filter upper %}abc{{ 'd' }}{% endfilter %})J", "", R"J(ABCD)J"},
    {R"J({% filter trim | replace(' ', '_') %}  a b  {% endfilter %})J", "", R"J(a_b)J"},
    {R"J({% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}])J", "", R"J(3[])J"},
    {R"J({% print 1 + 1, 'x' %})J", "", R"J(2x)J"},
    {R"J(a{% generation %}b{% endgeneration %}c)J", "", R"J(abc)J"},
};

TEST(JinjaStatements, FilterWithPrintAndGenerationBlocks) { check_cases(kBlocks); }

TEST(JinjaStatements, GenerationRangesAreBytesOfTheOutput) {
  // As transformers' AssistantTracker records them (character offsets there, UTF-8 bytes here).
  const char* tpl =
      "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
      "{% endgeneration %}{% else %}{{ m.content }}{% endif %}|{% endfor %}";
  Rendered r = render_full(tpl, R"({"messages": [{"role": "user", "content": "héllo"},
      {"role": "assistant", "content": "wörld"}, {"role": "user", "content": "x"},
      {"role": "assistant", "content": ""}]})");
  EXPECT_EQ(r.text, "<user>héllo|<assistant>wörld|<user>x|<assistant>|");
  ASSERT_EQ(r.generation.size(), 2u);
  EXPECT_EQ(r.text.substr(r.generation[0].first, r.generation[0].second - r.generation[0].first), "wörld");
  EXPECT_EQ(r.generation[1].first, r.generation[1].second);
  EXPECT_EQ(r.generation[1].first, r.text.size() - 1);
  // Inside a macro or a block set the block is placed where the template's output stood when it ran
  // (transformers' quirk; these ranges are jinja2's).
  Rendered m =
      render_full("abc{% macro g() %}xy{% generation %}zz{% endgeneration %}{% endmacro %}{{ g() }}");
  EXPECT_EQ(m.text, "abcxyzz");
  ASSERT_EQ(m.generation.size(), 1u);
  EXPECT_EQ(m.generation[0], (std::pair<size_t, size_t>(3, 5)));
  Rendered s = render_full("{% set x %}ab{% generation %}zz{% endgeneration %}{% endset %}q{{ x }}");
  EXPECT_EQ(s.text, "qabzz");
  ASSERT_EQ(s.generation.size(), 1u);
  EXPECT_EQ(s.generation[0], (std::pair<size_t, size_t>(0, 2)));
  Rendered l = render_full("a{% for i in [1, 2] %}{{ i }}{% generation %}z{% endgeneration %}{% endfor %}");
  EXPECT_EQ(l.generation, (std::vector<std::pair<size_t, size_t>>{{2, 3}, {4, 5}}));
}

}  // namespace
}  // namespace pt::jinja::testing
