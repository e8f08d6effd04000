#include "data/chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "data/chat/jinja_ast.h"
#include "data/chat/jinja_unicode.h"

namespace pt::jinja {

// --- construction and access ---

Value Value::undefined(Missing why, const void* what, Kind owner) {
  Value v;
  v.aux_ = static_cast<uint8_t>(why);
  v.owner_ = owner;
  v.p_ = what;
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.i_ = b;  // as an integer too: True is 1 in arithmetic
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}

Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = d;
  return v;
}

Value Value::string(std::string s, bool markup) {
  return string(std::make_shared<const StrObj>(std::move(s)), markup);
}

Value Value::string(std::shared_ptr<const StrObj> s, bool markup) {
  Value v;
  v.kind_ = Kind::String;
  v.aux_ = markup;
  // Strings are immutable; the const is restored by the accessors.
  v.obj_ = std::const_pointer_cast<StrObj>(std::move(s));
  return v;
}

Value Value::list(std::vector<Value> items, Flavor flavor) {
  auto l = std::make_shared<ListObj>();
  l->items = std::move(items);
  l->flavor = flavor;
  return list(std::move(l));
}

Value Value::list(std::shared_ptr<ListObj> l) {
  Value v;
  v.kind_ = Kind::List;
  v.obj_ = std::move(l);
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::Tuple;
  return v;
}

Value Value::dict(std::shared_ptr<DictObj> d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.obj_ = std::move(d);
  return v;
}

Value Value::namespace_(std::shared_ptr<NamespaceObj> ns) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.obj_ = std::move(ns);
  return v;
}

Value Value::callable(std::shared_ptr<CallableObj> c) {
  Value v;
  v.kind_ = Kind::Callable;
  v.obj_ = std::move(c);
  return v;
}

Value Value::loop(std::shared_ptr<LoopObj> l) {
  Value v;
  v.kind_ = Kind::Loop;
  v.obj_ = std::move(l);
  return v;
}

namespace {

struct Trashcan {
  bool emptying = false;
  std::vector<std::shared_ptr<Object>> waiting;
};
thread_local Trashcan trashcan;

}  // namespace

void Value::release(std::shared_ptr<Object> obj) noexcept {
  if (obj.use_count() > 1) return;  // not the last owner: dropping it destroys nothing
  Trashcan& t = trashcan;
  if (t.emptying) {
    t.waiting.push_back(std::move(obj));
    return;
  }
  t.emptying = true;
  obj.reset();
  while (!t.waiting.empty()) {
    std::shared_ptr<Object> next = std::move(t.waiting.back());
    t.waiting.pop_back();
    next.reset();  // its values' containers join `waiting`
  }
  t.emptying = false;
}

std::string_view Value::str() const { return static_cast<const StrObj&>(*obj_).s; }
const ListObj& Value::list_obj() const { return static_cast<const ListObj&>(*obj_); }
const std::vector<Value>& Value::items() const { return list_obj().items; }
Flavor Value::flavor() const { return list_obj().flavor; }
const DictObj& Value::dict_obj() const { return static_cast<const DictObj&>(*obj_); }
NamespaceObj& Value::namespace_obj() const { return static_cast<NamespaceObj&>(*obj_); }
const CallableObj& Value::callable_obj() const { return static_cast<const CallableObj&>(*obj_); }
LoopObj& Value::loop_obj() const { return static_cast<LoopObj&>(*obj_); }

const Value* DictObj::find(const Value& key) const {
  if (key.is_string()) return find(key.str());
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* DictObj::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void DictObj::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value* NamespaceObj::find(std::string_view name) {
  for (auto& [k, v] : attrs)
    if (k == name) return &v;
  return nullptr;
}

// --- truth, equality, order ---

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return v.as_bool();
    case Kind::Int:
      return v.as_int() != 0;
    case Kind::Float:
      return v.as_double() != 0.0;
    case Kind::String:
      return !v.str().empty();
    case Kind::List:
    case Kind::Tuple: {
      Flavor f = v.flavor();
      // Generators and iterators define no __len__: Python calls them true even when empty.
      if (f == Flavor::Generator || f == Flavor::Iterator) return true;
      return !v.items().empty();
    }
    case Kind::Dict:
      return !v.dict_obj().items.empty();
    default:
      return true;
  }
}

namespace {

bool numbers_equal(const Value& a, const Value& b) {
  if (a.kind() != Kind::Float && b.kind() != Kind::Float) return a.as_int() == b.as_int();
  return a.as_double() == b.as_double();
}

// Items of containers compare as Python's PyObject_RichCompareBool does: the same object is equal
// without looking inside it.
bool items_equal(const Value& a, const Value& b) {
  return (a.object() && a.object() == b.object()) || equals(a, b);
}

bool sequences_equal(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!items_equal(a[i], b[i])) return false;
  return true;
}

const char* order_symbol(Order op) {
  switch (op) {
    case Order::Lt:
      return "<";
    case Order::Le:
      return "<=";
    case Order::Gt:
      return ">";
    default:
      return ">=";
  }
}

template <class T>
bool apply_order(const T& a, const T& b, Order op) {
  switch (op) {
    case Order::Lt:
      return a < b;
    case Order::Le:
      return a <= b;
    case Order::Gt:
      return a > b;
    default:
      return a >= b;
  }
}

}  // namespace

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  RecursionGuard guard("in comparison");
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List:
    case Kind::Tuple: {
      Flavor fa = a.flavor(), fb = b.flavor();
      if (fa == Flavor::Generator || fa == Flavor::Iterator || fb == Flavor::Generator ||
          fb == Flavor::Iterator)
        return a.object() == b.object();
      if ((fa == Flavor::DictValues) || (fb == Flavor::DictValues)) return a.object() == b.object();
      if (fa != fb) return false;
      return sequences_equal(a.items(), b.items());
    }
    case Kind::Dict: {
      const auto& x = a.dict_obj().items;
      const auto& y = b.dict_obj();
      if (x.size() != y.items.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = y.find(k);
        if (!other || !items_equal(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.object() == b.object();
  }
}

bool ordered(const Value& a, const Value& b, Order op) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Kind::Float && b.kind() != Kind::Float) return apply_order(a.as_int(), b.as_int(), op);
    return apply_order(a.as_double(), b.as_double(), op);
  }
  if (a.is_string() && b.is_string()) return apply_order(a.str(), b.str(), op);
  if (a.kind() == b.kind() && a.is_sequence() && a.flavor() == Flavor::Plain && b.flavor() == Flavor::Plain) {
    RecursionGuard guard("in comparison");
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i])) return ordered(x[i], y[i], op);
    return apply_order(x.size(), y.size(), op);
  }
  raise_failure(std::string("'") + order_symbol(op) + "' not supported between instances of '" +
                type_name(a) + "' and '" + type_name(b) + "'");
}

int three_way(const Value& a, const Value& b) {
  if (ordered(a, b, Order::Lt)) return -1;
  if (ordered(b, a, Order::Lt)) return 1;
  return 0;
}

// --- str() and repr() ---

void append_float_repr(std::string& out, double d) {
  if (std::isnan(d)) {
    out += "nan";
    return;
  }
  if (std::isinf(d)) {
    out += d < 0 ? "-inf" : "inf";
    return;
  }
  // The shortest digits that round-trip, laid out as Python's repr() does: positional for exponents in
  // [-4, 16), scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  size_t e = sci.find('e');
  std::string_view mantissa = sci.substr(0, e);
  int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  if (!mantissa.empty() && mantissa[0] == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      size_t int_digits = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_digits) {
        out += digits;
        out.append(int_digits - digits.size(), '0');
        out += ".0";
      } else {
        out.append(digits, 0, int_digits);
        out += '.';
        out.append(digits, int_digits, std::string::npos);
      }
    } else {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    }
    return;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1, std::string::npos);
  }
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  out += exp;
}

namespace {

void append_int(std::string& out, int64_t i) {
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, i);
  out.append(buf, res.ptr);
}

void append_string_repr(std::string& out, std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  for (size_t i = 0; i < s.size();) {
    char32_t c = unicode::decode(s, i);
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (unicode::is_printable(c)) {
      unicode::append_utf8(out, c);
    } else {
      if (c <= 0xFF)
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c <= 0xFFFF)
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  out += quote;
}

// A sequence of up to kMaxBuilt items prints past kMaxBuilt bytes: the text is checked as it grows, so the
// MemoryError comes before the time to print millions of items.
void append_items_repr(std::string& out, const std::vector<Value>& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, items[i]);
    check_built_size(out.size(), "a printed sequence");
  }
}

}  // namespace

void append_str(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return;
    case Kind::None:
      out += "None";
      return;
    case Kind::Bool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Kind::Int:
      append_int(out, v.as_int());
      return;
    case Kind::Float:
      append_float_repr(out, v.as_double());
      return;
    case Kind::String:
      out += v.str();
      return;
    default:
      append_repr(out, v);
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return std::string(v.str());
  std::string s;
  append_str(s, v);
  return s;
}

namespace {

// Namespaces being printed, outermost first: one met again inside itself prints as reprlib prints it.
thread_local std::vector<const NamespaceObj*> printing_namespaces;

struct PrintingNamespace {
  explicit PrintingNamespace(const NamespaceObj& ns) { printing_namespaces.push_back(&ns); }
  ~PrintingNamespace() { printing_namespaces.pop_back(); }
  PrintingNamespace(const PrintingNamespace&) = delete;
  PrintingNamespace& operator=(const PrintingNamespace&) = delete;
};

bool printing(const NamespaceObj& ns) {
  return std::find(printing_namespaces.begin(), printing_namespaces.end(), &ns) != printing_namespaces.end();
}

}  // namespace

void append_repr(std::string& out, const Value& v) {
  RecursionGuard guard("while getting the repr of an object");
  switch (v.kind()) {
    case Kind::Undefined:
      out += "Undefined";
      return;
    case Kind::String:
      if (v.is_markup()) {
        out += "Markup(";
        append_string_repr(out, v.str());
        out += ')';
      } else {
        append_string_repr(out, v.str());
      }
      return;
    case Kind::Tuple:
      out += '(';
      append_items_repr(out, v.items());
      if (v.items().size() == 1) out += ',';
      out += ')';
      return;
    case Kind::List: {
      const ListObj& l = v.list_obj();
      switch (l.flavor) {
        case Flavor::Plain:
          out += '[';
          append_items_repr(out, l.items);
          out += ']';
          return;
        case Flavor::Generator:
          out += "<generator object>";
          return;
        case Flavor::Iterator:
          out += "<list_reverseiterator object>";
          return;
        case Flavor::Range:
          out += "range(";
          append_int(out, l.range[0]);
          out += ", ";
          append_int(out, l.range[1]);
          if (l.range[2] != 1) {
            out += ", ";
            append_int(out, l.range[2]);
          }
          out += ')';
          return;
        default:
          out += l.flavor == Flavor::DictKeys     ? "dict_keys(["
                 : l.flavor == Flavor::DictValues ? "dict_values(["
                                                  : "dict_items([";
          append_items_repr(out, l.items);
          out += "])";
          return;
      }
    }
    case Kind::Dict: {
      out += '{';
      bool first = true;
      for (const auto& [k, val] : v.dict_obj().items) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, k);
        out += ": ";
        append_repr(out, val);
        check_built_size(out.size(), "a printed dict");
      }
      out += '}';
      return;
    }
    case Kind::Namespace: {
      const NamespaceObj& ns = v.namespace_obj();
      if (printing(ns)) {
        out += "<Namespace {...}>";
        return;
      }
      PrintingNamespace open(ns);
      out += "<Namespace {";
      bool first = true;
      for (const auto& [k, val] : ns.attrs) {
        if (!first) out += ", ";
        first = false;
        append_string_repr(out, k);
        out += ": ";
        append_repr(out, val);
      }
      out += "}>";
      return;
    }
    case Kind::Callable: {
      const CallableObj& c = v.callable_obj();
      if (c.kind == CallableKind::Macro) {
        out += "<Macro ";
        append_string_repr(out, c.macro->name);
        out += '>';
      } else {
        out += "<function>";
      }
      return;
    }
    case Kind::Loop: {
      const LoopObj& l = v.loop_obj();
      out += "<LoopContext ";
      append_int(out, static_cast<int64_t>(l.index + 1));
      out += '/';
      append_int(out, static_cast<int64_t>(l.items.size()));
      out += '>';
      return;
    }
    default:
      append_str(out, v);
  }
}

// --- names and errors ---

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return "list";
    case Kind::Tuple:
      return "tuple";
    case Kind::Dict:
      return "dict";
    case Kind::Namespace:
      return "Namespace";
    case Kind::Callable:
      return "function";
    default:
      return "LoopContext";
  }
}

const char* type_name(const Value& v) {
  if (v.is_markup()) return "Markup";
  if (v.kind() == Kind::List) {
    switch (v.flavor()) {
      case Flavor::Generator:
        return "generator";
      case Flavor::Iterator:
        return "list_reverseiterator";
      case Flavor::DictKeys:
        return "dict_keys";
      case Flavor::DictValues:
        return "dict_values";
      case Flavor::DictItems:
        return "dict_items";
      case Flavor::Range:
        return "range";
      default:
        return "list";
    }
  }
  if (v.kind() == Kind::Callable && v.callable_obj().kind == CallableKind::Macro) return "Macro";
  return kind_name(v.kind());
}

std::string undefined_message(const Value& v) {
  const void* what = v.missing_what();
  if (v.missing() == Missing::Hint) return what ? static_cast<const char*>(what) : "undefined value";
  std::string name = what ? *static_cast<const std::string*>(what) : std::string("?");
  std::string owner = v.missing_owner() == Kind::None
                          ? std::string("None")
                          : fmt::format("{} object", kind_name(v.missing_owner()));
  switch (v.missing()) {
    case Missing::Name:
      return fmt::format("'{}' is undefined", name);
    case Missing::Attribute:
      return fmt::format("'{}' has no attribute '{}'", owner, name);
    case Missing::Item:
      if (!what) return fmt::format("'{}' has no such element", owner);
      return fmt::format("'{}' has no element '{}'", owner, name);
    default:
      return fmt::format("access to attribute '{}' of '{}' object is unsafe.", name,
                         kind_name(v.missing_owner()));
  }
}

void fail_undefined(const Value& v) { throw Failure(undefined_message(v)); }

void raise_failure(const std::string& message) { throw Failure(message); }

namespace {
thread_local int recursion_depth = 0;
constexpr int kRecursionLimit = 1000;  // Python's default sys.getrecursionlimit()
}  // namespace

RecursionGuard::RecursionGuard(const char* where) {
  if (recursion_depth >= kRecursionLimit)
    raise_failure(std::string("RecursionError: maximum recursion depth exceeded ") + where);
  ++recursion_depth;
}

RecursionGuard::~RecursionGuard() { --recursion_depth; }

namespace {
thread_local uint64_t work_done = 0;
}  // namespace

void start_work() { work_done = 0; }

void charge_built(uint64_t size, bool string, const char* what) {
  check_built_size(size, what);
  charge_work(string ? size / 16 : size);
}

void charge_work(uint64_t units) {
  work_done += units;
  if (work_done > kMaxWork)
    raise_failure("the template does too much work: more than " + std::to_string(kMaxWork) +
                  " loop iterations and built items (packtrain's limit; a chat template takes thousands)");
}

void check_built_size(uint64_t size, const char* what) {
  if (size > kMaxBuilt)
    raise_failure("MemoryError: " + std::string(what) + " of " + std::to_string(size) +
                  " bytes or items is too large (packtrain's limit: " + std::to_string(kMaxBuilt) + ")");
}

}  // namespace pt::jinja
