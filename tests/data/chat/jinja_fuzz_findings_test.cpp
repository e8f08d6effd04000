// Chat templates that the fuzzer (fuzz/chat_template.cpp) found mishandled. Their files are kept in
// fuzz/regressions/chat_template/.
#include "jinja_test_util.h"

namespace pt::jinja::testing {
namespace {

// seq * n ran n rounds even for an empty seq, so '' * 10**18 hung; Python answers at once. A result
// too large for memory is a TemplateError (jinja2: MemoryError), not an allocation failure.
TEST(JinjaFuzzFindings, RepeatingIsBoundedByItsResult) {
  EXPECT_EQ(render("[{{ '' * 1000000000000000000 }}]"), "[]");
  EXPECT_EQ(render("{{ ([] * 1000000000000000000) | length }} {{ (() * 4611686018427387904) | length }}"),
            "0 0");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'x' * -5 }}"), "ababab [1, 1] ");
  EXPECT_THROW(render("{{ 'a' * 1000000000000000000 }}"), TemplateError);
  EXPECT_THROW(render("{{ [1, 2] * 4611686018427387904 }}"), TemplateError);  // 2 * 2^62 overflows
}

// center(2 * 10**12) allocated its padding, and a loop could grow the output, until memory ran out. Every
// string a template builds (padding, replace, join, indent, the rendered text) stops at kMaxBuilt with
// Python's MemoryError as a TemplateError; results under it are unchanged.
TEST(JinjaFuzzFindings, BuiltStringsAreBoundedInsteadOfExhaustingMemory) {
  EXPECT_THROW(render("{{ 'a' | center(2000000000000) }}"), TemplateError);
  EXPECT_THROW(render("{{ 'a'.rjust(2000000000000) }}"), TemplateError);
  EXPECT_THROW(render("{{ 'a' | indent(2000000000000) }}"), TemplateError);
  EXPECT_THROW(render("{{ ('a' * 10000000).replace('a', 'bb') }}"), TemplateError);
  EXPECT_THROW(render("{{ ('a' * 10000000).replace('', 'b') }}"), TemplateError);
  EXPECT_THROW(render("{{ ['a' * 10000000, 'b' * 10000000] | join }}"), TemplateError);
  EXPECT_THROW(render("{% for i in range(3) %}{{ 'x' * 10000000 }}{% endfor %}"), TemplateError);
  EXPECT_EQ(render("[{{ 'a' | center(5) }}] [{{ 'a'.rjust(3, '-') }}] {{ 'ab'.replace('', '.') }}"),
            "[  a  ] [--a] .a.b.");
  EXPECT_EQ(render("{{ ('x' * 8000000).replace('x', 'yy') | length }}"), "16000000");
}

// Number formatting: '%200d' read its text past a 128-byte stack buffer; '*' took a negative width as
// 2^64 - 5 (padding without end); indexes and sizes of twenty digits threw std::out_of_range past the
// template's error handling; %c wrote bytes that are not UTF-8 for code points outside Unicode.
TEST(JinjaFuzzFindings, FormattingKeepsWithinItsBuffersAndRanges) {
  EXPECT_EQ(render("{{ '%200d' % 7 }}"), std::string(199, ' ') + "7");
  EXPECT_EQ(render("{{ '%-130x' % 255 }}|"), "ff" + std::string(128, ' ') + "|");
  EXPECT_EQ(render("{{ '%*s' % (-5, 'a') }}|{{ '%.*f' % (-3, 1.5) }}|{{ '%.*s' % (-1, 'abc') }}|"),
            "a    |2||");
  EXPECT_THROW(render("{{ '{99999999999999999999}'.format(1) }}"), TemplateError);
  EXPECT_THROW(render("{{ '{0[]}'.format([1]) }}"), TemplateError);
  EXPECT_THROW(render("{{ '{0[99999999999999999999]}'.format([1]) }}"), TemplateError);
  EXPECT_THROW(render("{{ '%99999999999999999999d' % 1 }}"), TemplateError);
  EXPECT_THROW(render("{{ '{:.99999999999}'.format(1.5) }}"), TemplateError);
  EXPECT_THROW(render("{{ '%.1000000000f' % 1.0 }}"), TemplateError);  // glibc wanted 4 GB for it
  EXPECT_THROW(render("{{ '%c' % -1 }}"), TemplateError);
  EXPECT_THROW(render("{{ '{:c}'.format(1114112) }}"), TemplateError);
}

// Conversions past 64 bits were undefined behaviour: float to int (1e300|int, '%d' % 1e300), abs of the
// smallest integer, and range()'s length when stop - start passes int64. Python's integers are unbounded:
// the first two are errors here, ranges come out exact.
TEST(JinjaFuzzFindings, IntegerConversionsStayDefined) {
  EXPECT_THROW(render("{{ 1e300|int }}"), TemplateError);
  EXPECT_THROW(render("{{ '-1e300'|int }}"), TemplateError);
  EXPECT_THROW(render("{{ '%d' % 1e300 }}"), TemplateError);
  EXPECT_THROW(render("{{ (-9223372036854775807 - 1)|abs }}"), TemplateError);
  EXPECT_EQ(render("{{ 1e18|int }} {{ -2.5|int }}"), "1000000000000000000 -2");
  EXPECT_EQ(render("{{ range(-4611686018427387904, 4611686018427387904, 2305843009213693952)|list }}"),
            "[-4611686018427387904, -2305843009213693952, 0, 2305843009213693952]");
  EXPECT_EQ(render("{{ range(9223372036854775807, -9223372036854775807, -9223372036854775807)|list }}"),
            "[9223372036854775807, 0]");
  EXPECT_THROW(render("{{ range(-9223372036854775807, 9223372036854775807)|list }}"), TemplateError);
}

// A namespace holding itself ({% set ns.me = ns %}, or through a list or another namespace) was a
// reference cycle that outlived the render (LeakSanitizer fails this test then), and printing it recursed
// without end. The render frees it, and it prints as Python's reprlib prints it.
TEST(JinjaFuzzFindings, NamespacesHoldingThemselvesAreFreedAndPrintable) {
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"),
            "<Namespace {'me': <Namespace {...}>}>");
  EXPECT_EQ(render("{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.l = [b, 1] %}{{ a }}"),
            "<Namespace {'l': [<Namespace {'a': <Namespace {...}>}>, 1]}>");
  EXPECT_EQ(render("{% for x in [1] %}{{ loop.changed(loop) }} {{ loop.changed(loop) }}{% endfor %}"),
            "True False");
  EXPECT_THROW(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me.missing.x }}"),
               TemplateError);
}

// A list nested 300,000 deep in a loop: freeing it recursed once per level and overflowed the stack, and
// so did printing, comparing and serialising it. Freeing is iterative now; the rest stop at Python's
// recursion limit with its RecursionError; the same object compares equal without recursing, as in Python.
TEST(JinjaFuzzFindings, DeeplyNestedValuesNeitherOverflowTheStackNorLeak) {
  const std::string deep =
      "{% set ns = namespace(x=0) %}{% for i in range(300) %}{% for j in range(1000) %}"
      "{% set ns.x = [ns.x] %}{% endfor %}{% endfor %}";
  EXPECT_EQ(render(deep + "{{ ns.x | length }} {{ ns.x == ns.x }} {{ [ns.x] == [ns.x] }}"), "1 True True");
  EXPECT_THROW(render(deep + "{{ ns.x }}"), TemplateError);
  EXPECT_THROW(render(deep + "{{ ns.x | tojson }}"), TemplateError);
  EXPECT_THROW(render(deep + "{{ ns.x == [ns.x] }}"), TemplateError);
  EXPECT_THROW(render(deep + "{{ ns.x < [ns.x] }}"), TemplateError);
  EXPECT_THROW(render(deep + "{% set ns.x = 0 %}{{ ns.y.z }}"), TemplateError);  // freed, then an error
  EXPECT_EQ(render("{{ [[[1]]] }} {{ [[1]] == [[1]] }} {{ [[1]] | tojson }}"), "[[[1]]] True [[1]]");
  // A render context nested past the limit (a dataset record) is an error naming the template.
  const std::string nested = "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  try {
    render("{{ x | length }}", nested);
    ADD_FAILURE() << "a context nested 100000 deep rendered";
  } catch (const pt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("RecursionError"), std::string::npos) << e.what();
  }
}

// Printing 7483649 * [0.024...] took 10 s: the text grew to 150 MB before its size was checked, and
// nested loops over range(100000) never end. A printed sequence is checked as it grows, and a render's
// loop iterations and built items stop at kMaxWork (4M) with a TemplateError; less work renders as before.
TEST(JinjaFuzzFindings, ARenderStopsAtItsWorkBudget) {
  EXPECT_THROW(render("{{ 7483649 * [920/38071] }}"), TemplateError);
  EXPECT_THROW(render("{{ (4000000 * [0.25]) | string | length }}"), TemplateError);  // the printed text
  EXPECT_THROW(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
               TemplateError);
  EXPECT_THROW(render("{% for i in range(10) %}{% set x = 1000000 * [1] %}{% endfor %}"), TemplateError);
  EXPECT_EQ(render("{{ (1000000 * [1]) | length }} {{ ('ab' * 4000000) | length }}"), "1000000 8000000");
  EXPECT_EQ(render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}done"),
            "done");
}

// Concatenation was unbounded: a string or list doubled in a loop passed any memory, and one grown a
// little at a time copied quadratically many bytes. Sums and ~ are bounded by kMaxBuilt and charged as work.
TEST(JinjaFuzzFindings, ConcatenationIsBoundedAndCharged) {
  const std::string ns = "{% set ns = namespace(s='ab', l=[1]) %}";
  EXPECT_THROW(render(ns + "{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"),
               TemplateError);
  EXPECT_THROW(render(ns + "{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
               TemplateError);
  EXPECT_THROW(render(ns + "{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"),
               TemplateError);
  EXPECT_THROW(render(ns + "{% for i in range(100000) %}{% set ns.s = ns.s ~ '" + std::string(48, 'x') +
                      "' %}{% endfor %}"),
               TemplateError);
  EXPECT_EQ(render(ns + "{% for i in range(1000) %}{% set ns.s = ns.s ~ '0123456789' %}{% endfor %}"
                        "{{ ns.s | length }} {{ (ns.l + [2, 3]) | length }}"),
            "10002 3");
}

}  // namespace
}  // namespace pt::jinja::testing
