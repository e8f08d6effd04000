// Python's operators on template values, and jinja2's sandboxed attribute and item lookup (obj.x falls back
// to obj['x'] and back, a missing one is undefined, a method that modifies a list or dict is refused).
#pragma once

#include <string>
#include <vector>

#include "data/chat/jinja_ast.h"
#include "data/chat/jinja_value.h"

namespace pt::jinja {

Value binary_op(BinaryOp op, const Value& a, const Value& b);
Value negate(const Value& v);
Value positive(const Value& v);
// `item in container`.
bool contains(const Value& container, const Value& item);

// obj.name; `error_name` (may be null, must outlive the result) names undefined results in errors.
Value get_attr(const Value& obj, std::string_view name, MethodId method, const std::string* error_name);
// obj[key]; `name` (may be null) names the key in errors.
Value get_item(const Value& obj, const Value& key, const std::string* name);
// obj[start:stop:step] (absent parts None); `forgiving`: undefined instead of an error where Python cannot
// slice (jinja2's constant folding).
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step, bool forgiving);

// What `for x in v` visits: a list's own items, or `scratch` filled with a string's characters, a dict's
// keys... Generators are used up. Failure for values Python cannot iterate.
const std::vector<Value>& iterate(const Value& v, std::vector<Value>& scratch);
// next(iter(v)) for `first`: takes one item from a generator, leaving the rest; null when there is none.
const Value* first_item(const Value& v, std::vector<Value>& scratch);
// len(v); Failure where Python has no len().
size_t length(const Value& v);
// A code-point slice of a string with Python's index rules.
std::string string_slice(std::string_view s, int64_t start, int64_t stop, int64_t step, bool has_start,
                         bool has_stop);

Value bound_method(const Value& self, MethodId method);

// markupsafe's escape(): &, <, >, " and ' as HTML entities.
std::string html_escape(std::string_view s);

}  // namespace pt::jinja
