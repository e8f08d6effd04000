// jinja2's tests (`x is defined`, `x is string`...), answering as Python's isinstance and operators do.
#include "data/chat/jinja_eval.h"
#include "data/chat/jinja_ops.h"
#include "data/chat/jinja_unicode.h"

namespace pt::jinja {

namespace {

const Value& one_arg(const CallArgs& args, std::string_view test) {
  const Value* a[1];
  bind(args, test, {"other"}, a);
  if (!a[0]) raise_failure(std::string(test) + "() missing 1 required positional argument");
  return *a[0];
}

void no_args(const CallArgs& args, std::string_view test) {
  const Value* a[1];
  bind(args, test, {}, a);
}

// str(value).islower() / isupper(): some cased character, and none of the other case.
bool has_case(const Value& v, bool upper) {
  std::string s = to_str(v);
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    char32_t c = unicode::decode(s, i);
    if (upper ? unicode::is_lower(c) : unicode::is_upper(c)) return false;
    if (upper ? unicode::is_upper(c) : unicode::is_lower(c)) cased = true;
  }
  return cased;
}

bool remainder_is(const Value& v, const Value& divisor, int64_t expected) {
  return equals(binary_op(BinaryOp::Mod, v, divisor), Value::integer(expected));
}

}  // namespace

bool run_test(Evaluator&, TestId id, const Value& v, CallArgs& args) {
  switch (id) {
    case TestId::Odd:
      no_args(args, "odd");
      return remainder_is(v, Value::integer(2), 1);
    case TestId::Even:
      no_args(args, "even");
      return remainder_is(v, Value::integer(2), 0);
    case TestId::Divisibleby:
      return remainder_is(v, one_arg(args, "divisibleby"), 0);
    case TestId::Defined:
      no_args(args, "defined");
      return !v.is_undefined();
    case TestId::Undefined:
      no_args(args, "undefined");
      return v.is_undefined();
    case TestId::Filter:
      no_args(args, "filter");
      return v.is_string() && find_filter(v.str()) != FilterId::Unknown;
    case TestId::Test:
      no_args(args, "test");
      return v.is_string() && find_test(v.str()) != TestId::Unknown;
    case TestId::None:
      no_args(args, "none");
      return v.is_none();
    case TestId::Boolean:
      no_args(args, "boolean");
      return v.kind() == Kind::Bool;
    case TestId::False:
      no_args(args, "false");
      return v.kind() == Kind::Bool && !v.as_bool();
    case TestId::True:
      no_args(args, "true");
      return v.kind() == Kind::Bool && v.as_bool();
    case TestId::Integer:
      no_args(args, "integer");
      return v.kind() == Kind::Int;
    case TestId::Float:
      no_args(args, "float");
      return v.kind() == Kind::Float;
    case TestId::Lower:
      no_args(args, "lower");
      return has_case(v, false);
    case TestId::Upper:
      no_args(args, "upper");
      return has_case(v, true);
    case TestId::String:
      no_args(args, "string");
      return v.is_string();
    case TestId::Mapping:
      no_args(args, "mapping");
      return v.kind() == Kind::Dict;
    case TestId::Number:
      no_args(args, "number");
      return v.is_number();
    case TestId::Sequence:
      // Anything with len() and indexing; Undefined has both.
      no_args(args, "sequence");
      switch (v.kind()) {
        case Kind::Undefined:
        case Kind::String:
        case Kind::Tuple:
        case Kind::Dict:
          return true;
        case Kind::List:
          return v.flavor() == Flavor::Plain || v.flavor() == Flavor::Range;
        default:
          return false;
      }
    case TestId::Iterable:
      no_args(args, "iterable");
      switch (v.kind()) {
        case Kind::Undefined:
        case Kind::String:
        case Kind::List:
        case Kind::Tuple:
        case Kind::Dict:
        case Kind::Loop:
          return true;
        default:
          return false;
      }
    case TestId::Callable:
      no_args(args, "callable");
      return v.kind() == Kind::Callable || v.kind() == Kind::Undefined || v.kind() == Kind::Loop;
    case TestId::Sameas: {
      const Value& other = one_arg(args, "sameas");
      if (v.kind() != other.kind()) return false;
      switch (v.kind()) {
        case Kind::None:
        case Kind::Undefined:
          return v.is_none();
        case Kind::Bool:
          return v.as_bool() == other.as_bool();
        case Kind::Int:  // CPython keeps one object per small integer
          return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
        default:
          return v.object() == other.object();
      }
    }
    case TestId::Escaped:
      no_args(args, "escaped");
      return v.is_markup();
    case TestId::In:
      return contains(one_arg(args, "in"), v);
    case TestId::Eq:
      return equals(v, one_arg(args, "eq"));
    case TestId::Ne:
      return !equals(v, one_arg(args, "ne"));
    case TestId::Gt:
      return ordered(v, one_arg(args, "gt"), Order::Gt);
    case TestId::Ge:
      return ordered(v, one_arg(args, "ge"), Order::Ge);
    case TestId::Lt:
      return ordered(v, one_arg(args, "lt"), Order::Lt);
    case TestId::Le:
      return ordered(v, one_arg(args, "le"), Order::Le);
    case TestId::Unknown:
      break;
  }
  raise_failure("unknown test");
}

}  // namespace pt::jinja
