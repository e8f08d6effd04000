// Expressions with Python's results: arithmetic, comparisons, membership, how values print (repr of
// floats, strings, lists, dicts), indexing and slicing by code point, attribute/item lookup in the sandbox,
// undefined values, tests, method calls and the globals transformers installs.
#include "data/chat/jinja_test_util.h"

namespace pt::jinja::testing {
namespace {

const JinjaCase kArithmetic[] = {
    {R"J({{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 10 / 5 }})J", "",
     R"J(3 -4 1 2 -2 3.5 2.0)J"},
    {R"J({{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2.0 ** 0.5 }})J", "",
     R"J(1024 0.5 64 3.0 0.5 1.4142135623730951)J"},
    {R"J({{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }} {{ true + 1 }} {{ 1 + 0.5 }})J", "",
     R"J(7 9 5 2 1.5)J"},
    {R"J({{ -3 }} {{ - -3 }} {{ +3 }} {{ -1 | abs }} {{ -x }} {{ not true }} {{ not none }})J",
     R"J({"x": 2.5})J", R"J(-3 3 3 1 -2.5 False True)J"},
    {R"J({{ 1 / 0 }})J", "", nullptr},
    {R"J({{ 1 // 0 }})J", "", nullptr},
    {R"J({{ 'a' + 1 }})J", "", nullptr},
    {R"J({{ none + 1 }})J", "", nullptr},
    {R"J({{ 'a' ~ 1 ~ none ~ true ~ 2.0 ~ [1] ~ missing }} {{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ 2 * 'x' }})J",
     "", R"J(a1NoneTrue2.0[1] abcd ababab xx)J"},
    {R"J({{ [1] + [2] }} {{ [0] * 3 }} {{ (1,) + (2,) }} {{ [] * 2 }})J", "",
     R"J([1, 2] [0, 0, 0] (1, 2) [])J"},
};

TEST(JinjaExpressions, Arithmetic) { check_cases(kArithmetic); }

const JinjaCase kCompare[] = {
    {R"J({{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 'a' != 'a' }} {{ none == none }})J",
     "", R"J(True False True True True True False True)J"},
    {R"J({{ (1, 2) == [1, 2] }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ 'é' > 'z' }} {{ 2 >= 2.0 }})J",
     "", R"J(False True True True)J"},
    {R"J({{ 1 < 'a' }})J", "", nullptr},
    {R"J({{ missing == missing2 }} {{ missing == 1 }} {{ missing != none }})J", "", R"J(True False True)J"},
    {R"J({{ missing < 1 }})J", "", nullptr},
    {R"J({{ 0 or 'x' }} {{ 1 and 'y' }} [{{ '' and 'z' }}] {{ none or [] }} {{ missing or 'd' }})J", "",
     R"J(x y [] [] d)J"},
    {R"J({{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1, 2] }} {{ 'x' in missing }} {{ (1, 2) in [(1, 2)] }})J",
     "", R"J(True True True True False True)J"},
    {R"J({{ 1 in 'abc' }})J", "", nullptr},
    {R"J({{ 'a' in none }})J", "", nullptr},
    {R"J({{ 'yes' if true else 'no' }} [{{ 'yes' if false }}] {{ 1 if 0 else 2 if 0 else 3 }})J", "",
     R"J(yes [] 3)J"},
};

TEST(JinjaExpressions, ComparisonLogicMembershipConditional) { check_cases(kCompare); }

const JinjaCase kPrinting[] = {
    {R"J({{ [1, 'two', 3.0, none, true, [], {}] }} {{ (1, 2) }} {{ (1,) }} {{ () }} {{ {'a': 1, 'b': [1, 2]} }})J",
     "", R"J([1, 'two', 3.0, None, True, [], {}] (1, 2) (1,) () {'a': 1, 'b': [1, 2]})J"},
    {R"J({{ ["it's", 'say "hi"', 'both \' "', 'tab	', 'nl
', 'é', '\\', '\x00\x7f\u200b'] }})J",
     "", R"J(["it's", 'say "hi"', 'both \' "', 'tab\t', 'nl\n', 'é', '\\', '\x00\x7f\u200b'])J"},
    {R"J({{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 0.0001 }} {{ 123456789.123456789 }} {{ -0.0 }} {{ 3.0 }} {{ 1 / 3 }} {{ 2.5e-10 }} {{ 1.5e300 * 1e10 }})J",
     "",
     R"J(0.30000000000000004 1e+16 1000000000000000.0 1e-05 0.0001 123456789.12345679 -0.0 3.0 0.3333333333333333 2.5e-10 inf)J"},
    {R"J({{ x }} {{ y }} {{ z }} {{ big }})J",
     R"J({"x": 1.0, "y": 1e100, "z": -2, "big": 9007199254740993})J", R"J(1.0 1e+100 -2 9007199254740993)J"},
    {R"J({{ {1: 'a', 'x': none, 1: 'b'} }} {{ {true: 1, 1: 2} }})J", "",
     R"J({1: 'b', 'x': None} {True: 2})J"},
    {R"J({{ d }})J", R"J({"d": {"z": [1, {"k": "v"}], "a": null, "t": true}})J",
     R"J({'z': [1, {'k': 'v'}], 'a': None, 't': True})J"},
};

TEST(JinjaExpressions, ValuesPrintAsPython) { check_cases(kPrinting); }

const JinjaCase kLookup[] = {
    {R"J({{ d.a }} {{ d['a'] }} {{ d.b.c }} {{ d['b']['c'] }} {{ d.get('a') }})J",
     R"J({"d": {"a": 1, "b": {"c": 2}}})J", R"J(1 1 2 2 1)J"},
    {R"J([{{ d.missing }}][{{ d['missing'] }}] {{ d.missing is defined }} {{ d.items is defined }})J",
     R"J({"d": {"a": 1}})J", R"J([][] False True)J"},
    {R"J({{ d.missing.deeper }})J", R"J({"d": {}})J", nullptr},
    {R"J({{ d['items'] }} {{ d.items() | list }})J", R"J({"d": {"items": [1]}})J",
     R"J([1] [('items', [1])])J"},
    {R"J({{ l[0] }} {{ l[-1] }} [{{ l[5] }}] {{ l.1 }} {{ l[true] }})J", R"J({"l": ["a", "b", "c"]})J",
     R"J(a c [] b b)J"},
    {R"J({{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[10:] }} {{ l[-2:] }} {{ l[1:2:-1] }})J",
     R"J({"l": [1, 2, 3, 4]})J", R"J([2, 3, 4] [1, 2, 3] [4, 3, 2, 1] [1, 3] [] [3, 4] [])J"},
    {R"J({{ 'hello'[1:4] }} {{ 'héllo wörld'[::-1] }} {{ 'héllo'[1] }} {{ 'héllo'[-1] }} {{ 'abc'[5] is defined }} {{ (1, 2, 3)[1:] }})J",
     "", R"J(ell dlröw olléh é o False (2, 3))J"},
    {R"J({{ l[::0] }})J", R"J({"l": [1]})J", nullptr},
    // jinja2 folds a constant {{ }} when compiling, where a slice Python refuses is undefined...
    {R"J([{{ (7)[1:] }}] [{{ none[:1] | join }}] {{ ({'a': 1})[1:] is defined }})J", "", R"J([] [] False)J"},
    // ...but slicing a variable is Python's slice, which raises.
    {R"J({{ n[1:] }})J", R"J({"n": 7})J", nullptr},
    {R"J([{{ n.x }}] {{ n.x is defined }} {{ n[0] is defined }})J", R"J({"n": null})J",
     R"J([] False False)J"},
    {R"J({{ missing }}|{{ missing is defined }}|{{ missing | length }}|{% for a in missing %}x{% endfor %}|{{ missing | list }})J",
     "", R"J(|False|0||[])J"},
    {R"J({{ missing.attr }})J", "", nullptr},
    {R"J({{ missing['a'] }})J", "", nullptr},
    {R"J({{ missing() }})J", "", nullptr},
    {R"J({{ missing + 1 }})J", "", nullptr},
    {R"J({{ missing | tojson }})J", "", nullptr},
    {R"J({% set l = [1] %}{{ l.append(2) }})J", "", nullptr},
    {R"J({{ {}.update({}) }})J", "", nullptr},
    {R"J({{ {'a': 1}.pop('a') }})J", "", nullptr},
    {R"J([{{ [1].append }}] {{ [1].append is defined }} {{ [1].count is defined }})J", "",
     R"J([] False True)J"},
    {R"J({{ 'x'.nope() }})J", "", nullptr},
};

TEST(JinjaExpressions, LookupIndexingSlicingUndefined) { check_cases(kLookup); }

const JinjaCase kTests[] = {
    {R"J({{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 'a' is string }} {{ 1 is number }} {{ 1.0 is integer }} {{ 1.0 is float }})J",
     "", R"J(True True True False True True False True)J"},
    {R"J({{ {} is mapping }} {{ [] is iterable }} {{ 'x' is sequence }} {{ 5 is iterable }} {{ true is boolean }} {{ 1 is boolean }} {{ true is true }} {{ false is false }} {{ 1 is true }})J",
     "", R"J(True True True False True False True True False)J"},
    {R"J({{ 'a' is equalto 'a' }} {{ 2 is eq 2 }} {{ 2 is ne 3 }} {{ 3 is gt 2 }} {{ 3 is ge 3 }} {{ 2 is lt 3 }} {{ 2 is le 1 }} {{ 2 is greaterthan 1 }} {{ 2 is lessthan 1 }})J",
     "", R"J(True True True True True True False True False)J"},
    {R"J({{ 'a' is in 'abc' }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aB' is lower }} {{ none is callable }} {{ range is callable }} {{ none is sameas none }} {{ ('<' | e) is escaped }})J",
     "", R"J(True True True False False True True True)J"},
    {R"J({{ 'upper' is filter }} {{ 'odd' is test }} {{ 'nope' is filter }} {{ x is not defined }} {{ not x is defined }} {{ x is undefined }} {{ none is none }} {{ 0 is not none }})J",
     "", R"J(True True False True True True True True)J"},
    {R"J({{ missing is sequence }} {{ missing is iterable }} {{ missing is callable }} {{ missing is none }} {{ missing is mapping }})J",
     "", R"J(True True True False False)J"},
    {R"J({{ 'a' is odd }})J", "", nullptr},
    {R"J({{ x is nonexistent_test }})J", "", nullptr},
    {R"J({% if x is defined %}{{ x is nonexistent_test }}{% endif %}ok)J", "", R"J(ok)J"},
};

TEST(JinjaExpressions, Tests) { check_cases(kTests); }

const JinjaCase kMethods[] = {
    {R"J({{ '  hi  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '  hi  '.lstrip() }}|{{ '  hi  '.rstrip() }}|{{ ' \u3000hi\n'.strip() }}|)J",
     "", R"J(hi|hi|hi  |  hi|hi|)J"},
    {R"J({{ 'a,b,,c'.split(',') }} {{ '  a  b  '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'a  b c '.rsplit(None, 1) }} {{ 'a\nb\r\nc'.splitlines() }} {{ 'a b'.split(maxsplit=0) }})J",
     "",
     R"J(['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a b', 'c'] ['a  b', 'c'] ['a', 'b', 'c'] ['a b'])J"},
    {R"J({{ 'hello'.startswith('he') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith('l', 2) }} {{ 'hello'.endswith('l', 0, 3) }})J",
     "", R"J(True True True True True)J"},
    {R"J({{ 'hello world'.title() }} {{ "they're bill's".title() }} {{ 'hELLO wORLD'.capitalize() }} {{ 'Hi'.upper() }}{{ 'Hi'.lower() }} {{ 'aBc'.swapcase() }} {{ 'éa'.upper() }})J",
     "", R"J(Hello World They'Re Bill'S Hello world HIhi AbC ÉA)J"},
    {R"J({{ 'aaa'.replace('a', 'b', 2) }} {{ 'abc'.replace('', '-') }} {{ 'a.b.c'.replace('.', '') }})J", "",
     R"J(bba -a-b-c- abc)J"},
    {R"J({{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'héllo'.find('l') }} {{ 'hello'.count('l') }} {{ 'hello'.index('e') }} {{ 'hello'.find('l', 3) }})J",
     "", R"J(2 3 -1 2 2 1 3)J"},
    {R"J({{ 'hello'.index('z') }})J", "", nullptr},
    {R"J({{ ', '.join(['a', 'b']) }} {{ ''.join('xyz') }} {{ '-'.join(d) }})J",
     R"J({"d": {"k1": 1, "k2": 2}})J", R"J(a, b xyz k1-k2)J"},
    {R"J({{ ', '.join([1, 2]) }})J", "", nullptr},
    {R"J({{ '{} and {}'.format('x', 1) }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='hi') }} {{ '{:>5}|{:<5}|{:^5}|{:05.2f}|{:,}|{!r}'.format('a', 'b', 'c', 3.14159, 1234567, 'q') }} {{ '{{}}{}'.format(1) }} {{ '{0[k]} {1[1]}'.format({'k': 'v'}, [5, 6]) }})J",
     "", R"J(x and 1 aba hi!     a|b    |  c  |03.14|1,234,567|'q' {}1 v 6)J"},
    {R"J({{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ '   '.isspace() }} {{ 'Ab'.isupper() }} {{ ''.isdigit() }} {{ 'a1'.isalnum() }} {{ 'AB1'.isupper() }} {{ 'Ab Cd'.istitle() }})J",
     "", R"J(True True True False False True True True)J"},
    {R"J({{ '42'.zfill(5) }} {{ '-42'.zfill(5) }} {{ 'ab'.center(6, '*') }} {{ 'ab'.center(5) }}| {{ 'ab'.ljust(4, '.') }}|{{ 'ab'.rjust(4) }})J",
     "", R"J(00042 -0042 **ab**   ab | ab..|  ab)J"},
    {R"J({{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'abc'.partition('x') }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x.py'.removesuffix('.py') }})J",
     "", R"J(('a', '=', 'b=c') ('a=b', '=', 'c') ('abc', '', '') x x)J"},
    {R"J({{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() }} {{ d.keys() }} {{ d.copy() }})J",
     R"J({"d": {"a": 1, "b": 2}})J",
     R"J(1 None dflt [('a', 1), ('b', 2)] ['a', 'b'] [1, 2] dict_items([('a', 1), ('b', 2)]) dict_keys(['a', 'b']) {'a': 1, 'b': 2})J"},
    {R"J({{ [1, 2, 1].count(1) }} {{ [1, 2, 3].index(2) }} {{ (1, 2).index(2) }} {{ range(5).index(3) }})J",
     "", R"J(2 1 1 3)J"},
    {R"J({{ '%s-%d-%.2f-%5s-%-5s|%x %r' % ('a', 3, 2.5, 'r', 'l', 255, 'q') }} {{ '%(a)s' % {'a': 1} }} {{ '100%%' % () }} {{ '%s' % [1, 2] }} {{ '%05.1f' % 3.14159 }})J",
     "", R"J(a-3-2.50-    r-l    |ff 'q' 1 100% [1, 2] 003.1)J"},
    {R"J({{ '%s %s' % ('a',) }})J", "", nullptr},
};

TEST(JinjaExpressions, MethodsOfStrDictListAndFormatting) { check_cases(kMethods); }

const JinjaCase kGlobals[] = {
    {R"J({{ range(3) }} {{ range(1, 10, 3) | list }} {{ range(5)[2] }} {{ range(3) | length }} {{ range(5, 0, -2) | list }} {{ range(0) | list }})J",
     "", R"J(range(0, 3) [1, 4, 7] 2 3 [5, 3, 1] [])J"},
    {R"J({{ range(200000) | length }})J", "", nullptr},
    {R"J({{ dict(a=1, b=2) }} {{ dict({'x': 1}, y=2) }} {{ dict([('k', 'v')]) }} {{ dict.fromkeys(['a', 'b'], 0) }} {{ dict() }})J",
     "", R"J({'a': 1, 'b': 2} {'x': 1, 'y': 2} {'k': 'v'} {'a': 0, 'b': 0} {})J"},
    {R"J({{ strftime_now('%Y-%m %S.%f') }})J", "", R"J(2024-06 00.500000)J"},
    {R"J({% set j = joiner(', ') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %})J", "",
     R"J(1, 2, 3)J"},
    {R"J({% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }})J", "",
     R"J(abab)J"},
    {R"J({{ raise_exception('bad input') }})J", "", nullptr},
    {R"J({{ ('<b>' | safe) + '<i>' }} {{ '<i>' + ('<b>' | safe) }} {{ '<&>"' | e }} {{ ('<b>' | safe) ~ '<i>' }})J",
     "", R"J(<b>&lt;i&gt; &lt;i&gt;<b> &lt;&amp;&gt;&#34; <b><i>)J"},
};

TEST(JinjaExpressions, GlobalsAndMarkup) { check_cases(kGlobals); }

}  // namespace
}  // namespace pt::jinja::testing
