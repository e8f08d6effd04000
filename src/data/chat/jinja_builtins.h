// The names a template can call: jinja2's filters and tests, the globals transformers installs, and the
// methods of Python's str, dict and list. The parser resolves names to these ids once, so rendering never
// compares names.
#pragma once

#include <cstdint>
#include <string_view>

#include "data/chat/jinja_value.h"

namespace pt::jinja {

enum class FilterId : uint8_t {
  Unknown,
  Abs,
  Attr,
  Batch,
  Capitalize,
  Center,
  Count,
  Default,
  Dictsort,
  Escape,
  Filesizeformat,
  First,
  Float,
  Forceescape,
  Format,
  Groupby,
  Indent,
  Int,
  Join,
  Last,
  Length,
  List,
  Lower,
  Items,
  Map,
  Min,
  Max,
  Pprint,
  Random,
  Reject,
  Rejectattr,
  Replace,
  Reverse,
  Round,
  Safe,
  Select,
  Selectattr,
  Slice,
  Sort,
  String,
  Striptags,
  Sum,
  Title,
  Tojson,
  Trim,
  Truncate,
  Unique,
  Upper,
  Urlencode,
  Urlize,
  Wordcount,
  Wordwrap,
  Xmlattr,
};

enum class TestId : uint8_t {
  Unknown,
  Odd,
  Even,
  Divisibleby,
  Defined,
  Undefined,
  Filter,
  Test,
  None,
  Boolean,
  False,
  True,
  Integer,
  Float,
  Lower,
  Upper,
  String,
  Mapping,
  Number,
  Sequence,
  Iterable,
  Callable,
  Sameas,
  Escaped,
  In,
  Eq,
  Ne,
  Gt,
  Ge,
  Lt,
  Le,
};

enum class GlobalId : uint8_t {
  None,
  Range,
  Dict,
  Namespace,
  RaiseException,
  StrftimeNow,
  Joiner,
  Cycler,
  Lipsum
};

// Attribute names that are methods of some built-in type (None: a plain attribute or key).
enum class MethodId : uint8_t {
  None,
  // str
  Capitalize,
  Casefold,
  Center,
  Count,
  Encode,
  Endswith,
  Expandtabs,
  Find,
  Format,
  FormatMap,
  Index,
  Isalnum,
  Isalpha,
  Isascii,
  Isdecimal,
  Isdigit,
  Isidentifier,
  Islower,
  Isnumeric,
  Isprintable,
  Isspace,
  Istitle,
  Isupper,
  Join,
  Ljust,
  Lower,
  Lstrip,
  Maketrans,
  Partition,
  Removeprefix,
  Removesuffix,
  Replace,
  Rfind,
  Rindex,
  Rjust,
  Rpartition,
  Rsplit,
  Rstrip,
  Split,
  Splitlines,
  Startswith,
  Strip,
  Swapcase,
  Title,
  Translate,
  Upper,
  Zfill,
  // dict (and list's copy)
  Clear,
  Copy,
  Fromkeys,
  Get,
  Items,
  Keys,
  Pop,
  Popitem,
  Setdefault,
  Update,
  Values,
  // list
  Append,
  Extend,
  Insert,
  Remove,
  Reverse,
  Sort,
  // loop, cycler
  Cycle,
  Changed,
  Next,
  Reset,
  Current,
};

FilterId find_filter(std::string_view name);
TestId find_test(std::string_view name);
GlobalId find_global(std::string_view name);
MethodId find_method(std::string_view name);
const char* method_name(MethodId id);

// Whether values of `v`'s type have this method, and whether the immutable sandbox forbids it (it modifies
// a list or dict).
bool has_method(const Value& v, MethodId id);
bool is_mutating(const Value& v, MethodId id);

}  // namespace pt::jinja
