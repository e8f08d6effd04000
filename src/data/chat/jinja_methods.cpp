// Methods templates call on values: Python's str methods (indices in code points), the read-only dict and
// list methods the immutable sandbox allows, and loop.cycle()/loop.changed().
#include <algorithm>

#include "data/chat/jinja_eval.h"
#include "data/chat/jinja_ops.h"
#include "data/chat/jinja_pyformat.h"
#include "data/chat/jinja_unicode.h"

namespace pt::jinja {

namespace {

[[noreturn]] void unsupported(const Value& self, MethodId id) {
  raise_failure(std::string(type_name(self)) + "." + method_name(id) +
                "() is not supported by packtrain's template engine");
}

std::string_view str_or_none(const Value* v, const char* method, bool* present) {
  *present = v && !v->is_none();
  if (!*present) return {};
  if (v->is_undefined()) fail_undefined(*v);
  if (!v->is_string()) raise_failure(std::string(method) + " arg must be None or str");
  return v->str();
}

// A code-point index range [start, end) of `s` from Python's optional start/end arguments, in bytes.
std::pair<size_t, size_t> byte_range(std::string_view s, const Value* start, const Value* end) {
  if ((!start || start->is_none()) && (!end || end->is_none())) return {0, s.size()};
  auto offs = unicode::offsets(s);
  auto n = static_cast<int64_t>(offs.size() - 1);
  auto clamp = [&](const Value* v, int64_t absent) {
    int64_t i = int_arg(v, absent, "slice index");
    if (i < 0) i = std::max<int64_t>(0, i + n);
    return std::min(i, n);
  };
  int64_t b = clamp(start, 0), e = clamp(end, n);
  if (e < b) return {offs[static_cast<size_t>(b)], offs[static_cast<size_t>(b)]};
  return {offs[static_cast<size_t>(b)], offs[static_cast<size_t>(e)]};
}

int64_t code_points_before(std::string_view s, size_t byte) {
  return static_cast<int64_t>(unicode::length(s.substr(0, byte)));
}

Value strings(const std::vector<std::string_view>& parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto p : parts) out.push_back(Value::string(std::string(p)));
  return Value::list(std::move(out));
}

Value split(std::string_view s, CallArgs& args, bool from_right) {
  const Value* a[2];
  bind(args, from_right ? "rsplit" : "split", {"sep", "maxsplit"}, a);
  bool has_sep;
  std::string_view sep = str_or_none(a[0], "split", &has_sep);
  int64_t maxsplit = int_arg(a[1], -1, "maxsplit");
  if (!has_sep)
    return strings(from_right ? unicode::rsplit_whitespace(s, maxsplit)
                              : unicode::split_whitespace(s, maxsplit));
  if (sep.empty()) raise_failure("empty separator");
  std::vector<std::string_view> parts;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      size_t at = s.find(sep, start);
      if (at == std::string_view::npos) break;
      parts.push_back(s.substr(start, at - start));
      start = at + sep.size();
    }
    parts.push_back(s.substr(start));
    return strings(parts);
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep.size()) break;
    size_t at = s.rfind(sep, end - sep.size());
    if (at == std::string_view::npos) break;
    parts.push_back(s.substr(at + sep.size(), end - at - sep.size()));
    end = at;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return strings(parts);
}

// startswith/endswith: a string or a tuple of strings, within optional start/end.
bool affix(std::string_view s, CallArgs& args, bool prefix) {
  const Value* a[3];
  bind(args, prefix ? "startswith" : "endswith", {"prefix", "start", "end"}, a);
  if (!a[0]) raise_failure("startswith() takes at least 1 argument");
  auto [b, e] = byte_range(s, a[1], a[2]);
  std::string_view part = s.substr(b, e - b);
  auto test = [&](const Value& v) {
    if (!v.is_string())
      raise_failure(std::string(prefix ? "startswith" : "endswith") +
                    " first arg must be str or a tuple of str, not " + type_name(v));
    std::string_view x = v.str();
    if (x.size() > part.size()) return false;
    return prefix ? part.substr(0, x.size()) == x : part.substr(part.size() - x.size()) == x;
  };
  if (a[0]->kind() == Kind::Tuple) {
    for (const Value& x : a[0]->items())
      if (test(x)) return true;
    return false;
  }
  return test(*a[0]);
}

Value find(std::string_view s, CallArgs& args, MethodId id) {
  const char* name = method_name(id);
  const Value* a[3];
  bind(args, name, {"sub", "start", "end"}, a);
  if (!a[0]) raise_failure(std::string(name) + "() takes at least 1 argument");
  std::string_view sub = str_arg(a[0], "", name);
  auto [b, e] = byte_range(s, a[1], a[2]);
  std::string_view part = s.substr(b, e - b);
  if (id == MethodId::Count) {
    if (sub.empty()) return Value::integer(static_cast<int64_t>(unicode::length(part)) + 1);
    int64_t n = 0;
    for (size_t at = part.find(sub); at != std::string_view::npos; at = part.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  bool right = id == MethodId::Rfind || id == MethodId::Rindex;
  size_t at = right ? part.rfind(sub) : part.find(sub);
  if (at == std::string_view::npos) {
    if (id == MethodId::Index || id == MethodId::Rindex) raise_failure("substring not found");
    return Value::integer(-1);
  }
  return Value::integer(code_points_before(s, b + at));
}

Value replace(std::string_view s, CallArgs& args) {
  const Value* a[3];
  bind(args, "replace", {"old", "new", "count"}, a);
  if (!a[0] || !a[1]) raise_failure("replace() takes at least 2 arguments");
  std::string_view old = str_arg(a[0], "", "replace"), rep = str_arg(a[1], "", "replace");
  int64_t count = int_arg(a[2], -1, "replace");
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    for (size_t i = 0; i < s.size();) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
        check_built_size(out.size(), "replace()'s result");
      }
      size_t start = i;
      unicode::decode(s, i);
      out.append(s, start, i - start);
    }
    if (count < 0 || done < count) out += rep;
    return Value::string(std::move(out));
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s, start, at - start);
    out += rep;
    check_built_size(out.size(), "replace()'s result");
    start = at + old.size();
    ++done;
  }
  out.append(s, start);
  return Value::string(std::move(out));
}

Value join(std::string_view sep, CallArgs& args) {
  const Value* a[1];
  bind(args, "join", {"iterable"}, a);
  if (!a[0]) raise_failure("join() takes exactly one argument");
  std::vector<Value> scratch;
  const auto& items = iterate(*a[0], scratch);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string())
      raise_failure("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(items[i]) +
                    " found");
    if (i) out += sep;
    out += items[i].str();
    check_built_size(out.size(), "join()'s result");
  }
  return Value::string(std::move(out));
}

Value justify(std::string_view s, CallArgs& args, MethodId id) {
  const Value* a[2];
  bind(args, method_name(id), {"width", "fillchar"}, a);
  if (!a[0]) raise_failure(std::string(method_name(id)) + "() takes at least 1 argument");
  int64_t width = int_arg(a[0], 0, method_name(id));
  std::string fill(str_arg(a[1], " ", method_name(id)));
  if (unicode::length(fill) != 1) raise_failure("The fill character must be exactly one character long");
  check_built_size(static_cast<uint64_t>(std::max<int64_t>(0, width)), "the justified string");
  auto len = static_cast<int64_t>(unicode::length(s));
  int64_t marg = width - len;
  if (marg <= 0) return Value::string(std::string(s));
  int64_t left = id == MethodId::Ljust ? 0 : id == MethodId::Rjust ? marg : marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = left; i < marg; ++i) out += fill;
  return Value::string(std::move(out));
}

template <class Pred>
bool all_chars(std::string_view s, Pred pred) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();)
    if (!pred(unicode::decode(s, i))) return false;
  return true;
}

Value string_method(Evaluator&, const Value& self, MethodId id, CallArgs& args) {
  std::string_view s = self.str();
  const Value* a[3];
  auto none = [&] { bind(args, method_name(id), {}, a); };
  switch (id) {
    case MethodId::Strip:
    case MethodId::Lstrip:
    case MethodId::Rstrip: {
      bind(args, method_name(id), {"chars"}, a);
      bool has_chars;
      std::string_view chars = str_or_none(a[0], method_name(id), &has_chars);
      return Value::string(std::string(
          unicode::strip(s, has_chars ? &chars : nullptr, id != MethodId::Rstrip, id != MethodId::Lstrip)));
    }
    case MethodId::Split:
      return split(s, args, false);
    case MethodId::Rsplit:
      return split(s, args, true);
    case MethodId::Splitlines:
      bind(args, "splitlines", {"keepends"}, a);
      return strings(unicode::splitlines(s, bool_arg(a[0], false)));
    case MethodId::Startswith:
      return Value::boolean(affix(s, args, true));
    case MethodId::Endswith:
      return Value::boolean(affix(s, args, false));
    case MethodId::Upper:
      none();
      return Value::string(unicode::upper(s));
    case MethodId::Lower:
    case MethodId::Casefold:
      none();
      return Value::string(unicode::lower(s));
    case MethodId::Title:
      none();
      return Value::string(unicode::title(s));
    case MethodId::Capitalize:
      none();
      return Value::string(unicode::capitalize(s));
    case MethodId::Swapcase:
      none();
      return Value::string(unicode::swapcase(s));
    case MethodId::Replace:
      return replace(s, args);
    case MethodId::Find:
    case MethodId::Rfind:
    case MethodId::Index:
    case MethodId::Rindex:
    case MethodId::Count:
      return find(s, args, id);
    case MethodId::Join:
      return join(s, args);
    case MethodId::Format:
      return Value::string(str_format(s, args.positional, args.keywords));
    case MethodId::Isdigit:
      none();
      return Value::boolean(all_chars(s, unicode::is_digit));
    case MethodId::Isdecimal:
      none();
      return Value::boolean(all_chars(s, unicode::is_decimal));
    case MethodId::Isnumeric:
      none();
      return Value::boolean(all_chars(s, unicode::is_numeric));
    case MethodId::Isalpha:
      none();
      return Value::boolean(all_chars(s, unicode::is_alpha));
    case MethodId::Isalnum:
      none();
      return Value::boolean(all_chars(s, unicode::is_alnum));
    case MethodId::Isspace:
      none();
      return Value::boolean(all_chars(s, unicode::is_space));
    case MethodId::Isascii:
      none();
      return Value::boolean(unicode::is_ascii(s));
    case MethodId::Isprintable:
      none();
      return Value::boolean(s.empty() || all_chars(s, unicode::is_printable));
    case MethodId::Isidentifier:
      none();
      return Value::boolean(all_chars(s, [](char32_t c) { return c == '_' || unicode::is_alnum(c); }) &&
                            !unicode::is_digit(static_cast<unsigned char>(s[0])));
    case MethodId::Islower:
    case MethodId::Isupper: {
      none();
      bool upper = id == MethodId::Isupper, cased = false;
      for (size_t i = 0; i < s.size();) {
        char32_t c = unicode::decode(s, i);
        if (upper ? unicode::is_lower(c) : unicode::is_upper(c)) return Value::boolean(false);
        cased |= upper ? unicode::is_upper(c) : unicode::is_lower(c);
      }
      return Value::boolean(cased);
    }
    case MethodId::Istitle:
      none();
      return Value::boolean(!s.empty() && unicode::title(s) == s && unicode::lower(s) != s);
    case MethodId::Zfill: {
      bind(args, "zfill", {"width"}, a);
      int64_t width = int_arg(a[0], 0, "zfill");
      auto len = static_cast<int64_t>(unicode::length(s));
      if (len >= width) return self;
      size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
      return Value::string(std::string(s.substr(0, sign)) +
                           std::string(static_cast<size_t>(width - len), '0') + std::string(s.substr(sign)));
    }
    case MethodId::Center:
    case MethodId::Ljust:
    case MethodId::Rjust:
      return justify(s, args, id);
    case MethodId::Partition:
    case MethodId::Rpartition: {
      bind(args, method_name(id), {"sep"}, a);
      std::string_view sep = str_arg(a[0], "", method_name(id));
      if (sep.empty()) raise_failure("empty separator");
      size_t at = id == MethodId::Partition ? s.find(sep) : s.rfind(sep);
      if (at == std::string_view::npos) {
        Value e = Value::string("");
        return id == MethodId::Partition ? Value::tuple({self, e, e}) : Value::tuple({e, e, self});
      }
      return Value::tuple({Value::string(std::string(s.substr(0, at))), Value::string(std::string(sep)),
                           Value::string(std::string(s.substr(at + sep.size())))});
    }
    case MethodId::Removeprefix:
    case MethodId::Removesuffix: {
      bind(args, method_name(id), {"affix"}, a);
      std::string_view x = str_arg(a[0], "", method_name(id));
      bool pre = id == MethodId::Removeprefix;
      if (x.size() <= s.size() && (pre ? s.substr(0, x.size()) == x : s.substr(s.size() - x.size()) == x))
        return Value::string(std::string(pre ? s.substr(x.size()) : s.substr(0, s.size() - x.size())));
      return self;
    }
    default:
      unsupported(self, id);
  }
}

Value dict_method(const Value& self, MethodId id, CallArgs& args) {
  const DictObj& d = self.dict_obj();
  const Value* a[2];
  switch (id) {
    case MethodId::Items:
    case MethodId::Keys:
    case MethodId::Values: {
      bind(args, method_name(id), {}, a);
      std::vector<Value> out;
      out.reserve(d.items.size());
      for (const auto& [k, v] : d.items)
        out.push_back(id == MethodId::Items ? Value::tuple({k, v}) : id == MethodId::Keys ? k : v);
      return Value::list(std::move(out), id == MethodId::Items  ? Flavor::DictItems
                                         : id == MethodId::Keys ? Flavor::DictKeys
                                                                : Flavor::DictValues);
    }
    case MethodId::Get: {
      bind(args, "get", {"key", "default"}, a);
      if (!a[0]) raise_failure("get expected at least 1 argument, got 0");
      if (a[0]->kind() == Kind::List || a[0]->kind() == Kind::Dict)
        raise_failure(std::string("unhashable type: '") + type_name(*a[0]) + "'");
      if (const Value* v = d.find(*a[0])) return *v;
      return a[1] ? *a[1] : Value::none();
    }
    case MethodId::Copy: {
      bind(args, "copy", {}, a);
      auto c = std::make_shared<DictObj>(d);
      return Value::dict(std::move(c));
    }
    default:
      unsupported(self, id);
  }
}

Value sequence_method(const Value& self, MethodId id, CallArgs& args) {
  const auto& items = self.items();
  const Value* a[3];
  switch (id) {
    case MethodId::Count: {
      bind(args, "count", {"value"}, a);
      if (!a[0]) raise_failure("count() takes exactly one argument");
      int64_t n = 0;
      for (const Value& x : items) n += equals(x, *a[0]);
      return Value::integer(n);
    }
    case MethodId::Index: {
      bind(args, "index", {"value", "start", "stop"}, a);
      if (!a[0]) raise_failure("index expected at least 1 argument");
      auto n = static_cast<int64_t>(items.size());
      auto clamp = [&](const Value* v, int64_t absent) {
        int64_t i = int_arg(v, absent, "index");
        if (i < 0) i = std::max<int64_t>(0, i + n);
        return std::min(i, n);
      };
      for (int64_t i = clamp(a[1], 0), e = clamp(a[2], n); i < e; ++i)
        if (equals(items[static_cast<size_t>(i)], *a[0])) return Value::integer(i);
      raise_failure(to_str(*a[0]) + " is not in list");
    }
    case MethodId::Copy:
      bind(args, "copy", {}, a);
      return Value::list(items);
    default:
      unsupported(self, id);
  }
}

Value loop_method(const Value& self, MethodId id, CallArgs& args) {
  LoopObj& l = self.loop_obj();
  if (!args.keywords.empty()) raise_failure(std::string(method_name(id)) + "() takes no keyword arguments");
  if (id == MethodId::Cycle) {
    if (args.positional.empty()) raise_failure("no items for cycling given");
    return args.positional[l.index % args.positional.size()];
  }
  Value current = Value::tuple(args.positional);
  if (l.changed_called && equals(l.last_changed, current)) return Value::boolean(false);
  l.changed_called = true;
  l.last_changed = std::move(current);
  return Value::boolean(true);
}

}  // namespace

Value run_method(Evaluator& ev, const Value& self, MethodId id, CallArgs& args) {
  switch (self.kind()) {
    case Kind::String:
      return string_method(ev, self, id, args);
    case Kind::Dict:
      return dict_method(self, id, args);
    case Kind::List:
    case Kind::Tuple:
      return sequence_method(self, id, args);
    case Kind::Loop:
      return loop_method(self, id, args);
    case Kind::Callable:
      return run_callable_method(ev, self.callable_obj(), id, args);
    default:
      unsupported(self, id);
  }
}

}  // namespace pt::jinja
