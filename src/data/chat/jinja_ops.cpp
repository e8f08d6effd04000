#include "data/chat/jinja_ops.h"

#include <cmath>

#include "data/chat/jinja_pyformat.h"
#include "data/chat/jinja_unicode.h"

namespace pt::jinja {

namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "+";
    case BinaryOp::Sub:
      return "-";
    case BinaryOp::Mul:
      return "*";
    case BinaryOp::Div:
      return "/";
    case BinaryOp::FloorDiv:
      return "//";
    case BinaryOp::Mod:
      return "%";
    default:
      return "** or pow()";
  }
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
  raise_failure(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + type_name(a) +
                "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() { raise_failure("integer result too large (packtrain's integers are 64-bit)"); }

// Python's seq * n. An empty result comes at once (n rounds of nothing hung on '' * 10**18), and one past
// kMaxBuilt is refused as too large for memory.
Value repeat(const Value& seq, int64_t n) {
  const uint64_t size = seq.is_string() ? seq.str().size() : seq.items().size();
  uint64_t total = 0;
  if (n > 0 && (__builtin_mul_overflow(size, static_cast<uint64_t>(n), &total) || total > kMaxBuilt))
    raise_failure("MemoryError: a sequence of length " + std::to_string(size) + " repeated " +
                  std::to_string(n) + " times is too large");
  if (total == 0) n = 0;
  charge_work(seq.is_string() ? total / 16 : total);
  if (seq.is_string()) {
    std::string out;
    out.reserve(total);
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::string(std::move(out), seq.is_markup());
  }
  std::vector<Value> out;
  out.reserve(total);
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.kind() == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

bool plain_list(const Value& v) { return v.kind() == Kind::List && v.flavor() == Flavor::Plain; }
bool repeatable(const Value& v) { return v.is_string() || plain_list(v) || v.kind() == Kind::Tuple; }

// CPython's float floor division and modulo (signs follow the divisor).
std::pair<double, double> float_divmod(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  return {floordiv, mod};
}

Value int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1)
      if (__builtin_mul_overflow(result, base, &result)) overflow();
    exp >>= 1;
    if (exp && __builtin_mul_overflow(base, base, &base)) overflow();
  }
  return Value::integer(result);
}

Value numeric(BinaryOp op, const Value& a, const Value& b) {
  bool ints = a.kind() != Kind::Float && b.kind() != Kind::Float;
  if (op == BinaryOp::Div) {
    if (b.as_double() == 0) raise_failure("division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (ints) {
    int64_t x = a.as_int(), y = b.as_int(), r = 0;
    switch (op) {
      case BinaryOp::Add:
        if (__builtin_add_overflow(x, y, &r)) overflow();
        return Value::integer(r);
      case BinaryOp::Sub:
        if (__builtin_sub_overflow(x, y, &r)) overflow();
        return Value::integer(r);
      case BinaryOp::Mul:
        if (__builtin_mul_overflow(x, y, &r)) overflow();
        return Value::integer(r);
      case BinaryOp::FloorDiv:
      case BinaryOp::Mod: {
        if (y == 0)
          raise_failure(op == BinaryOp::Mod ? "integer modulo by zero"
                                            : "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) overflow();
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          --q;
        }
        return Value::integer(op == BinaryOp::Mod ? m : q);
      }
      default:
        if (y >= 0) return int_pow(x, y);
        if (x == 0) raise_failure("0.0 cannot be raised to a negative power");
        return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }
  }
  double x = a.as_double(), y = b.as_double();
  switch (op) {
    case BinaryOp::Add:
      return Value::number(x + y);
    case BinaryOp::Sub:
      return Value::number(x - y);
    case BinaryOp::Mul:
      return Value::number(x * y);
    case BinaryOp::FloorDiv:
    case BinaryOp::Mod: {
      if (y == 0) raise_failure("float division by zero");
      auto [q, m] = float_divmod(x, y);
      return Value::number(op == BinaryOp::Mod ? m : q);
    }
    default:
      if (x == 0 && y < 0) raise_failure("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) raise_failure("negative number raised to a fractional power");
      double r = std::pow(x, y);
      // Unlike * and +, Python's float ** raises instead of giving infinity.
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y))
        raise_failure("(34, 'Numerical result out of range')");
      return Value::number(r);
  }
}

int64_t normalize_index(int64_t i, size_t n) { return i < 0 ? i + static_cast<int64_t>(n) : i; }

// PySlice_AdjustIndices: the first index, the end and the step of a slice of a sequence of `n` items.
struct SliceRange {
  int64_t start, stop, step;
};

SliceRange adjust(size_t length, const Value& start, const Value& stop, const Value& step) {
  auto index = [](const Value& v) {
    if (!v.is_integral()) raise_failure("slice indices must be integers or None");
    return v.as_int();
  };
  int64_t n = static_cast<int64_t>(length);
  int64_t st = step.is_none() ? 1 : index(step);
  if (st == 0) raise_failure("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t absent) {
    if (v.is_none()) return absent;
    int64_t i = index(v);
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  return {clamp(start, st < 0 ? n - 1 : 0), clamp(stop, st < 0 ? -1 : n), st};
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value binary_op(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  // str % undefined formats it like any value (str() is empty; only %d and the like fail).
  if (op == BinaryOp::Mod && a.is_string()) return Value::string(percent_format(a.str(), b), a.is_markup());
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return numeric(op, a, b);
  switch (op) {
    case BinaryOp::Add:
      if (a.is_string() && b.is_string()) {
        // Markup + str escapes the plain operand (markupsafe), whichever side it is on.
        charge_built(a.str().size() + b.str().size(), true, "a sum of strings");
        if (a.is_markup() || b.is_markup()) {
          std::string l = a.is_markup() ? std::string(a.str()) : html_escape(a.str());
          std::string r = b.is_markup() ? std::string(b.str()) : html_escape(b.str());
          return Value::string(l + r, true);
        }
        std::string s;
        s.reserve(a.str().size() + b.str().size());
        s += a.str();
        s += b.str();
        return Value::string(std::move(s));
      }
      if ((plain_list(a) && plain_list(b)) || (a.kind() == Kind::Tuple && b.kind() == Kind::Tuple)) {
        charge_built(a.items().size() + b.items().size(), false, "a sum of sequences");
        std::vector<Value> out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return a.kind() == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
      }
      if (a.is_string())
        raise_failure(std::string("can only concatenate str (not \"") + type_name(b) + "\") to str");
      break;
    case BinaryOp::Mul:
      if (repeatable(a) && b.is_integral()) return repeat(a, b.as_int());
      if (a.is_integral() && repeatable(b)) return repeat(b, a.as_int());
      break;
    default:
      break;
  }
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.kind() == Kind::Float) return Value::number(-v.as_double());
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) overflow();
    return Value::integer(-v.as_int());
  }
  raise_failure(std::string("bad operand type for unary -: '") + type_name(v) + "'");
}

Value positive(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.kind() == Kind::Float) return v;
  if (v.is_integral()) return Value::integer(v.as_int());
  raise_failure(std::string("bad operand type for unary +: '") + type_name(v) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined:
      return false;
    case Kind::String:
      if (!item.is_string())
        raise_failure(std::string("'in <string>' requires string as left operand, not ") + type_name(item));
      return container.str().find(item.str()) != std::string_view::npos;
    case Kind::List:
    case Kind::Tuple: {
      std::vector<Value> scratch;
      for (const Value& x : iterate(container, scratch))
        if (equals(x, item)) return true;
      return false;
    }
    case Kind::Dict:
      if (item.kind() == Kind::List || item.kind() == Kind::Dict)
        raise_failure(std::string("unhashable type: '") + type_name(item) + "'");
      return container.dict_obj().find(item) != nullptr;
    default:
      raise_failure(std::string("argument of type '") + type_name(container) + "' is not iterable");
  }
}

Value bound_method(const Value& self, MethodId method) {
  auto c = std::make_shared<CallableObj>();
  c->kind = CallableKind::Method;
  c->id = static_cast<int>(method);
  c->self = self;
  return Value::callable(std::move(c));
}

namespace {

Value method_or_unsafe(const Value& obj, MethodId method, const std::string* error_name) {
  if (is_mutating(obj, method)) return Value::undefined(Missing::Unsafe, error_name, obj.kind());
  return bound_method(obj, method);
}

Value loop_attr(const Value& obj, std::string_view name, const std::string* error_name) {
  const LoopObj& l = obj.loop_obj();
  auto n = static_cast<int64_t>(l.items.size());
  auto i = static_cast<int64_t>(l.index);
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem")
    return i > 0 ? l.items[static_cast<size_t>(i - 1)]
                 : Value::undefined(Missing::Hint, "there is no previous item");
  if (name == "nextitem")
    return i + 1 < n ? l.items[static_cast<size_t>(i + 1)]
                     : Value::undefined(Missing::Hint, "there is no next item");
  return Value::undefined(Missing::Attribute, error_name, Kind::Loop);
}

}  // namespace

Value get_attr(const Value& obj, std::string_view name, MethodId method, const std::string* error_name) {
  switch (obj.kind()) {
    case Kind::Undefined:
      fail_undefined(obj);
    case Kind::Dict:
      if (method != MethodId::None && has_method(obj, method))
        return method_or_unsafe(obj, method, error_name);
      if (const Value* v = obj.dict_obj().find(name)) return *v;
      break;
    case Kind::Namespace:
      if (Value* v = obj.namespace_obj().find(name)) return *v;
      break;
    case Kind::Loop:
      if (method == MethodId::Cycle || method == MethodId::Changed) return bound_method(obj, method);
      return loop_attr(obj, name, error_name);
    case Kind::Callable: {
      const CallableObj& c = obj.callable_obj();
      if (c.kind == CallableKind::Cycler && method == MethodId::Current)
        return c.state.empty() ? Value::none() : c.state[c.counter % c.state.size()];
      if (c.kind == CallableKind::Macro && name == "name") return Value::string(c.macro->name);
      if (method != MethodId::None && has_method(obj, method)) return bound_method(obj, method);
      break;
    }
    default:
      if (method != MethodId::None && has_method(obj, method))
        return method_or_unsafe(obj, method, error_name);
      break;
  }
  return Value::undefined(Missing::Attribute, error_name, obj.kind());
}

Value get_item(const Value& obj, const Value& key, const std::string* name) {
  switch (obj.kind()) {
    case Kind::Undefined:
      fail_undefined(obj);
    case Kind::Dict:
      if (key.kind() != Kind::List && key.kind() != Kind::Dict)
        if (const Value* v = obj.dict_obj().find(key)) return *v;
      break;
    case Kind::List:
    case Kind::Tuple: {
      Flavor f = obj.flavor();
      if (f != Flavor::Plain && f != Flavor::Range) break;  // views and generators are not subscriptable
      if (key.is_integral()) {
        const auto& items = obj.items();
        int64_t i = normalize_index(key.as_int(), items.size());
        if (i >= 0 && static_cast<size_t>(i) < items.size()) return items[static_cast<size_t>(i)];
      }
      break;
    }
    case Kind::String:
      if (key.is_integral()) {
        std::string_view s = obj.str();
        if (unicode::is_ascii(s)) {
          int64_t i = normalize_index(key.as_int(), s.size());
          if (i >= 0 && static_cast<size_t>(i) < s.size())
            return Value::string(std::string(1, s[static_cast<size_t>(i)]));
        } else {
          auto offs = unicode::offsets(s);
          int64_t i = normalize_index(key.as_int(), offs.size() - 1);
          if (i >= 0 && static_cast<size_t>(i) + 1 < offs.size()) {
            auto k = static_cast<size_t>(i);
            return Value::string(std::string(s.substr(offs[k], offs[k + 1] - offs[k])));
          }
        }
      }
      break;
    default:
      break;
  }
  // Not an item: a string key may still name an attribute (d['items'] is the method).
  if (key.is_string() && obj.kind() != Kind::Dict)
    return get_attr(obj, key.str(), find_method(key.str()), name);
  if (key.is_string()) {
    MethodId m = find_method(key.str());
    if (m != MethodId::None && has_method(obj, m)) return method_or_unsafe(obj, m, name);
  }
  return Value::undefined(Missing::Item, name, obj.kind());
}

std::string string_slice(std::string_view s, int64_t start, int64_t stop, int64_t step, bool has_start,
                         bool has_stop) {
  bool ascii = unicode::is_ascii(s);
  std::vector<size_t> offs;
  if (!ascii) offs = unicode::offsets(s);
  size_t n = ascii ? s.size() : offs.size() - 1;
  SliceRange r = adjust(n, has_start ? Value::integer(start) : Value::none(),
                        has_stop ? Value::integer(stop) : Value::none(), Value::integer(step));
  std::string out;
  if (r.step == 1 && r.start < r.stop) {
    auto b = static_cast<size_t>(r.start), e = static_cast<size_t>(r.stop);
    return ascii ? std::string(s.substr(b, e - b)) : std::string(s.substr(offs[b], offs[e] - offs[b]));
  }
  for (int64_t i = r.start; r.step > 0 ? i < r.stop : i > r.stop; i += r.step) {
    auto k = static_cast<size_t>(i);
    if (ascii)
      out += s[k];
    else
      out.append(s, offs[k], offs[k + 1] - offs[k]);
  }
  return out;
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step, bool forgiving) {
  // jinja2 slices with Python's obj[a:b:c] directly (not through its forgiving getitem): what Python
  // refuses raises.
  if (obj.is_undefined()) fail_undefined(obj);
  Value refused = Value::undefined(Missing::Item, nullptr, obj.kind());
  for (const Value* v : {&start, &stop, &step}) {
    if (v->is_undefined()) fail_undefined(*v);
    if (!v->is_none() && !v->is_integral()) {
      if (forgiving) return refused;
      raise_failure("slice indices must be integers or None or have an __index__ method");
    }
  }
  if (obj.is_string()) {
    auto idx = [](const Value& v) { return v.is_integral() ? v.as_int() : 0; };
    bool has_step = step.is_integral();
    if (has_step && step.as_int() == 0) raise_failure("slice step cannot be zero");
    return Value::string(string_slice(obj.str(), idx(start), idx(stop), has_step ? step.as_int() : 1,
                                      start.is_integral(), stop.is_integral()),
                         obj.is_markup());
  }
  if (obj.is_sequence() && (obj.flavor() == Flavor::Plain || obj.flavor() == Flavor::Range)) {
    const auto& items = obj.items();
    SliceRange r = adjust(items.size(), start, stop, step);
    std::vector<Value> out;
    for (int64_t i = r.start; r.step > 0 ? i < r.stop : i > r.stop; i += r.step)
      out.push_back(items[static_cast<size_t>(i)]);
    if (obj.kind() == Kind::Tuple) return Value::tuple(std::move(out));
    if (obj.flavor() != Flavor::Range) return Value::list(std::move(out));
    // A slice of a range is a range.
    auto l = std::make_shared<ListObj>();
    const int64_t* parent = obj.list_obj().range;
    l->items = std::move(out);
    l->flavor = Flavor::Range;
    l->range[0] = parent[0] + r.start * parent[2];
    l->range[1] = parent[0] + r.stop * parent[2];
    l->range[2] = parent[2] * r.step;
    return Value::list(std::move(l));
  }
  if (forgiving) return refused;
  raise_failure(std::string("'") + type_name(obj) + "' object is not subscriptable");
}

const std::vector<Value>& iterate(const Value& v, std::vector<Value>& scratch) {
  static const std::vector<Value> kEmpty;
  switch (v.kind()) {
    case Kind::Undefined:
      return kEmpty;
    case Kind::List:
    case Kind::Tuple: {
      const ListObj& l = v.list_obj();
      if (l.flavor == Flavor::Generator || l.flavor == Flavor::Iterator) {
        size_t from = l.next;
        l.next = l.items.size();
        if (from == 0) return l.items;
        scratch.assign(l.items.begin() + static_cast<long>(from), l.items.end());
        return scratch;
      }
      return l.items;
    }
    case Kind::Dict:
      scratch.clear();
      scratch.reserve(v.dict_obj().items.size());
      for (const auto& kv : v.dict_obj().items) scratch.push_back(kv.first);
      return scratch;
    case Kind::String: {
      std::string_view s = v.str();
      scratch.clear();
      for (size_t i = 0; i < s.size();) {
        size_t start = i;
        unicode::decode(s, i);
        scratch.push_back(Value::string(std::string(s.substr(start, i - start))));
      }
      return scratch;
    }
    case Kind::Loop:
      return v.loop_obj().items;
    default:
      raise_failure(std::string("'") + type_name(v) + "' object is not iterable");
  }
}

const Value* first_item(const Value& v, std::vector<Value>& scratch) {
  if (v.kind() == Kind::List && (v.flavor() == Flavor::Generator || v.flavor() == Flavor::Iterator)) {
    const ListObj& l = v.list_obj();
    return l.next < l.items.size() ? &l.items[l.next++] : nullptr;
  }
  const auto& items = iterate(v, scratch);
  return items.empty() ? nullptr : &items.front();
}

size_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return unicode::length(v.str());
    case Kind::List:
    case Kind::Tuple:
      if (v.flavor() == Flavor::Generator || v.flavor() == Flavor::Iterator) break;
      return v.items().size();
    case Kind::Dict:
      return v.dict_obj().items.size();
    case Kind::Loop:
      return v.loop_obj().items.size();
    default:
      break;
  }
  raise_failure(std::string("object of type '") + type_name(v) + "' has no len()");
}

}  // namespace pt::jinja
