// jinja2's built-in filters (and transformers' tojson), with Python's results: generators where jinja2
// returns them, str() of each item where it joins, the sandbox's lookups where it reads attributes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "data/chat/jinja_eval.h"
#include "data/chat/jinja_json.h"
#include "data/chat/jinja_ops.h"
#include "data/chat/jinja_pyformat.h"
#include "data/chat/jinja_unicode.h"

namespace pt::jinja {

namespace {

[[noreturn]] void unsupported(const char* name) {
  raise_failure(std::string("the '") + name + "' filter is not supported by packtrain's template engine");
}

// markupsafe's soft_str: Markup stays Markup, everything else becomes str(value).
Value soft_str(const Value& v) {
  if (v.is_string()) return v;
  return Value::string(to_str(v));
}

Value generator(std::vector<Value> items) { return Value::list(std::move(items), Flavor::Generator); }

std::vector<Value> to_list(const Value& v) {
  std::vector<Value> scratch;
  const auto& items = iterate(v, scratch);
  if (&items == &scratch) return scratch;
  return items;
}

Value lowered(const Value& v) { return v.is_string() ? Value::string(unicode::lower(v.str())) : v; }

// make_attrgetter: "a.b.0" looks up a, then b, then index 0, each as obj[part].
class AttrGetter {
 public:
  AttrGetter(const Value* attribute, bool ignore_case, const Value* default_value = nullptr)
      : ignore_case_(ignore_case), default_(default_value) {
    if (!attribute || attribute->is_none()) return;
    if (attribute->is_string()) {
      std::string_view s = attribute->str();
      size_t start = 0;
      while (true) {
        size_t dot = s.find('.', start);
        std::string part(
            s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
        bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
        parts_.push_back(digits ? Value::integer(std::stoll(part)) : Value::string(std::move(part)));
        if (dot == std::string_view::npos) break;
        start = dot + 1;
      }
    } else {
      parts_.push_back(*attribute);
    }
  }

  Value operator()(const Value& item) const {
    Value v = item;
    for (const Value& part : parts_) {
      v = get_item(v, part, nullptr);
      if (default_ && !default_->is_none() && v.is_undefined()) v = *default_;
    }
    return ignore_case_ ? lowered(v) : v;
  }

 private:
  std::vector<Value> parts_;
  bool ignore_case_;
  const Value* default_;
};

std::vector<std::pair<Value, Value>> sorted_by_key(std::vector<std::pair<Value, Value>> keyed, bool reverse) {
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? three_way(b.first, a.first) < 0 : three_way(a.first, b.first) < 0;
  });
  return keyed;
}

// Python's float(str): surrounding whitespace, underscores between digits, inf and nan spelled out.
std::optional<double> parse_float(std::string_view text) {
  std::string_view s = unicode::strip(text, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      bool between = i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                     std::isdigit(static_cast<unsigned char>(s[i + 1]));
      if (!between) return std::nullopt;
      continue;
    }
    clean += s[i];
  }
  if (clean.empty() || clean.find_first_of("xX(") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

// Python's int(str, base).
std::optional<int64_t> parse_int(std::string_view text, int base) {
  std::string_view s = unicode::strip(text, nullptr, true, true);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.size() > 2 && s[0] == '0') {
    char p = static_cast<char>(s[1] | 32);
    int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed && (base == prefixed || base == 0)) {
      base = prefixed;
      s.remove_prefix(2);
      if (!s.empty() && s[0] == '_') s.remove_prefix(1);
    }
  }
  if (base == 0) base = 10;
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  bool prev_digit = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_') {
      if (!prev_digit || i + 1 == s.size()) return std::nullopt;
      prev_digit = false;
      continue;
    }
    int d = (c >= '0' && c <= '9')                 ? c - '0'
            : ((c | 32) >= 'a' && (c | 32) <= 'z') ? (c | 32) - 'a' + 10
                                                   : 99;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return std::nullopt;
    prev_digit = true;
  }
  return negative ? -v : v;
}

// A finite float as Python's int() does, within packtrain's 64-bit integers (converting one outside them
// is undefined behaviour in C++).
int64_t truncated(double d) {
  if (!(d >= -0x1p63 && d < 0x1p63))
    raise_failure("integer result too large (packtrain's integers are 64-bit)");
  return static_cast<int64_t>(d);
}

Value filter_int(const Value& v, const Value* default_value, const Value* base_value) {
  Value fallback = default_value ? *default_value : Value::integer(0);
  int64_t base = int_arg(base_value, 10, "int");
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.kind() == Kind::Float) {
    double d = v.as_double();
    if (std::isnan(d)) return fallback;
    if (std::isinf(d)) raise_failure("cannot convert float infinity to integer");
    return Value::integer(truncated(d));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), static_cast<int>(base))) return Value::integer(*i);
    // "42.23"|int is 42: jinja2 retries through float.
    if (auto d = parse_float(v.str()); d && std::isfinite(*d)) return Value::integer(truncated(*d));
  }
  return fallback;
}

Value filter_float(const Value& v, const Value* default_value) {
  Value fallback = default_value ? *default_value : Value::number(0.0);
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string())
    if (auto d = parse_float(v.str())) return Value::number(*d);
  return fallback;
}

Value filter_round(const Value& v, const Value* precision_value, const Value* method_value) {
  int64_t precision = int_arg(precision_value, 0, "round");
  std::string_view method = str_arg(method_value, "common", "round");
  if (method != "common" && method != "ceil" && method != "floor")
    raise_failure("method must be common, ceil or floor");
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number()) raise_failure(std::string("type ") + type_name(v) + " doesn't define __round__ method");
  double x = v.as_double();
  if (method != "common") {
    double scale = std::pow(10.0, static_cast<double>(precision));
    double r = method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale);
    return Value::number(r / scale);
  }
  if (v.is_integral()) return Value::integer(v.as_int());  // round(int, n) stays an int for n >= 0
  if (!std::isfinite(x)) return v;
  if (precision >= 0 && precision < 300) {
    // printf rounds the exact binary value half-to-even, as Python's round() does.
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), x);
    return Value::number(std::strtod(buf, nullptr));
  }
  double scale = std::pow(10.0, static_cast<double>(-precision));
  return Value::number(std::nearbyint(x / scale) * scale);
}

std::string indent(const Value& v, const Value* width_value, bool first, bool blank) {
  std::string indention;
  if (width_value && width_value->is_string()) {
    indention = std::string(width_value->str());
  } else {
    const int64_t width = std::max<int64_t>(0, int_arg(width_value, 4, "indent"));
    check_built_size(static_cast<uint64_t>(width), "indent()'s width");
    indention.assign(static_cast<size_t>(width), ' ');
  }
  std::string s = to_str(v) + "\n";  // jinja2's quirk for splitlines
  auto lines = unicode::splitlines(s, false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      out += '\n';
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
    check_built_size(out.size(), "indent()'s result");
  }
  if (first) out = indention + out;
  return out;
}

std::string title(std::string_view s) {
  // Words start after any run of '-', whitespace, '(', '{', '[' or '<'.
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    char32_t c = unicode::decode(s, i);
    bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
    std::string_view ch = s.substr(start, i - start);
    if (separator)
      out += ch;
    else
      out += word_start ? unicode::upper(ch) : unicode::lower(ch);
    word_start = separator;
  }
  return out;
}

std::string center(std::string_view s, int64_t width) {
  auto len = static_cast<int64_t>(unicode::length(s));
  int64_t marg = width - len;
  if (marg <= 0) return std::string(s);
  check_built_size(static_cast<uint64_t>(width), "center()'s result");
  int64_t left = marg / 2 + (marg & width & 1);
  return std::string(static_cast<size_t>(left), ' ') + std::string(s) +
         std::string(static_cast<size_t>(marg - left), ' ');
}

std::string truncate(const Value& v, const Value* length_value, bool killwords, const Value* end_value,
                     const Value* leeway_value) {
  std::string s = to_str(v);
  int64_t length = int_arg(length_value, 255, "truncate");
  std::string end(str_arg(end_value, "...", "truncate"));
  int64_t leeway = int_arg(leeway_value, 5, "truncate");
  auto end_len = static_cast<int64_t>(unicode::length(end));
  if (length < end_len)
    raise_failure("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (static_cast<int64_t>(unicode::length(s)) <= length + leeway) return s;
  std::string head = string_slice(s, 0, length - end_len, 1, false, true);
  if (killwords) return head + end;
  size_t space = head.rfind(' ');
  if (space != std::string::npos) head.resize(space);
  return head + end;
}

std::string striptags(std::string_view s) {
  std::string text;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "<!--") == 0) {
      size_t e = s.find("-->", i + 4);
      if (e != std::string_view::npos) {
        i = e + 3;
        continue;
      }
    }
    if (s[i] == '<') {
      size_t e = s.find('>', i + 1);
      if (e != std::string_view::npos) {
        i = e + 1;
        continue;
      }
    }
    text += s[i++];
  }
  std::string joined;
  for (auto word : unicode::split_whitespace(text, -1)) {
    if (!joined.empty()) joined += ' ';
    joined += word;
  }
  // The common entities back to characters.
  static constexpr std::pair<std::string_view, std::string_view> kEntities[] = {
      {"&amp;", "&"},  {"&lt;", "<"},  {"&gt;", ">"},  {"&quot;", "\""},
      {"&#34;", "\""}, {"&#39;", "'"}, {"&apos;", "'"}};
  std::string out;
  for (size_t i = 0; i < joined.size();) {
    bool replaced = false;
    for (auto [entity, ch] : kEntities) {
      if (joined.compare(i, entity.size(), entity) == 0) {
        out += ch;
        i += entity.size();
        replaced = true;
        break;
      }
    }
    if (!replaced) out += joined[i++];
  }
  return out;
}

Value tojson(const Value& v, CallArgs& args) {
  const Value* a[4];
  bind(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}, a);
  JsonOptions o;
  o.ensure_ascii = bool_arg(a[0], false);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string())
      o.indent = std::string(a[1]->str());
    else
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, int_arg(a[1], 0, "tojson"))), ' ');
    o.item_separator = ",";
  }
  if (a[2] && !a[2]->is_none()) {
    if (!a[2]->is_sequence() || a[2]->items().size() != 2 || !a[2]->items()[0].is_string() ||
        !a[2]->items()[1].is_string())
      raise_failure("tojson: separators must be a pair of strings");
    o.item_separator = std::string(a[2]->items()[0].str());
    o.key_separator = std::string(a[2]->items()[1].str());
  }
  o.sort_keys = bool_arg(a[3], false);
  return Value::string(to_json(v, o));
}

Value select_or_reject(Evaluator& ev, const Value& seq, CallArgs& args, bool select, bool by_attribute) {
  std::vector<Value> out;
  if (!truthy(seq)) return generator(std::move(out));
  size_t off = 0;
  std::optional<AttrGetter> getter;
  if (by_attribute) {
    if (args.positional.empty()) raise_failure("Missing parameter for attribute name");
    getter.emplace(&args.positional[0], false);
    off = 1;
  }
  TestId test = TestId::Unknown;
  bool has_test = args.positional.size() > off;
  if (has_test) {
    const Value& name = args.positional[off];
    if (!name.is_string() || (test = find_test(name.str())) == TestId::Unknown)
      raise_failure("no test named " + to_str(name));
  }
  CallArgs test_args;
  for (size_t i = off + 1; i < args.positional.size(); ++i)
    test_args.positional.push_back(args.positional[i]);
  test_args.keywords = args.keywords;
  std::vector<Value> scratch;
  for (const Value& item : iterate(seq, scratch)) {
    Value subject = getter ? (*getter)(item) : item;
    bool passed = has_test ? run_test(ev, test, subject, test_args) : truthy(subject);
    if (passed == select) out.push_back(item);
  }
  return generator(std::move(out));
}

Value map(Evaluator& ev, const Value& seq, CallArgs& args) {
  std::vector<Value> out;
  if (!truthy(seq)) return generator(std::move(out));
  std::vector<Value> scratch;
  const auto& items = iterate(seq, scratch);
  if (args.positional.empty() && args.keyword("attribute")) {
    for (const auto& [k, v] : args.keywords)
      if (k != "attribute" && k != "default")
        raise_failure("Unexpected keyword argument '" + std::string(k) + "'");
    AttrGetter getter(args.keyword("attribute"), false, args.keyword("default"));
    for (const Value& item : items) out.push_back(getter(item));
    return generator(std::move(out));
  }
  if (args.positional.empty()) raise_failure("map requires a filter argument");
  const Value& name = args.positional[0];
  FilterId f = name.is_string() ? find_filter(name.str()) : FilterId::Unknown;
  if (f == FilterId::Unknown) raise_failure("no filter named " + to_str(name));
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keywords = args.keywords;
  for (const Value& item : items) {
    CallArgs a = rest;
    out.push_back(run_filter(ev, f, item, a));
  }
  return generator(std::move(out));
}

Value join(const Value& seq, const Value* d, const Value* attribute) {
  std::string sep = d ? to_str(*d) : std::string();
  std::optional<AttrGetter> getter;
  if (attribute && !attribute->is_none()) getter.emplace(attribute, false);
  std::string out;
  std::vector<Value> scratch;
  bool first = true;
  for (const Value& item : iterate(seq, scratch)) {
    if (!first) out += sep;
    first = false;
    append_str(out, getter ? (*getter)(item) : item);
  }
  return Value::string(std::move(out));
}

Value min_max(const Value& seq, CallArgs& args, bool want_max) {
  const Value* a[2];
  bind(args, want_max ? "max" : "min", {"case_sensitive", "attribute"}, a);
  AttrGetter key(a[1], !bool_arg(a[0], false));
  std::vector<Value> scratch;
  const auto& items = iterate(seq, scratch);
  if (items.empty()) return Value::undefined(Missing::Hint, "No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (want_max ? ordered(k, best_key, Order::Gt) : ordered(k, best_key, Order::Lt)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Value sort(const Value& seq, CallArgs& args) {
  const Value* a[3];
  bind(args, "sort", {"reverse", "case_sensitive", "attribute"}, a);
  bool reverse = bool_arg(a[0], false);
  bool ignore_case = !bool_arg(a[1], false);
  std::vector<AttrGetter> keys;
  if (a[2] && a[2]->is_string()) {
    // "a,b" sorts by a, then b.
    std::string_view s = a[2]->str();
    size_t start = 0;
    while (true) {
      size_t comma = s.find(',', start);
      Value part = Value::string(
          std::string(s.substr(start, comma == std::string_view::npos ? comma : comma - start)));
      keys.emplace_back(&part, ignore_case);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  } else {
    keys.emplace_back(a[2], ignore_case);
  }
  std::vector<std::pair<Value, Value>> keyed;
  std::vector<Value> scratch;
  for (const Value& item : iterate(seq, scratch)) {
    std::vector<Value> k;
    for (const auto& getter : keys) k.push_back(getter(item));
    keyed.emplace_back(Value::list(std::move(k)), item);
  }
  std::vector<Value> out;
  for (auto& kv : sorted_by_key(std::move(keyed), reverse)) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Value unique(const Value& seq, CallArgs& args) {
  const Value* a[2];
  bind(args, "unique", {"case_sensitive", "attribute"}, a);
  AttrGetter key(a[1], !bool_arg(a[0], false));
  std::vector<Value> seen, out;
  std::vector<Value> scratch;
  for (const Value& item : iterate(seq, scratch)) {
    Value k = key(item);
    if (k.kind() == Kind::List || k.kind() == Kind::Dict)
      raise_failure(std::string("unhashable type: '") + type_name(k) + "'");
    bool found = false;
    for (const Value& s : seen)
      if (equals(s, k)) found = true;
    if (!found) {
      seen.push_back(std::move(k));
      out.push_back(item);
    }
  }
  return generator(std::move(out));
}

Value dictsort(const Value& v, CallArgs& args) {
  const Value* a[3];
  bind(args, "dictsort", {"case_sensitive", "by", "reverse"}, a);
  bool ignore_case = !bool_arg(a[0], false);
  std::string_view by = str_arg(a[1], "key", "dictsort");
  if (by != "key" && by != "value") raise_failure("You can only sort by either \"key\" or \"value\"");
  if (v.is_undefined()) fail_undefined(v);
  if (v.kind() != Kind::Dict)
    raise_failure(std::string("'") + type_name(v) + "' object has no attribute 'items'");
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, x] : v.dict_obj().items) {
    Value key = by == "key" ? k : x;
    keyed.emplace_back(ignore_case ? lowered(key) : key, Value::tuple({k, x}));
  }
  std::vector<Value> out;
  for (auto& kv : sorted_by_key(std::move(keyed), bool_arg(a[2], false))) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Value groupby(const Value& seq, CallArgs& args) {
  const Value* a[3];
  bind(args, "groupby", {"attribute", "default", "case_sensitive"}, a);
  if (!a[0]) raise_failure("groupby() missing required argument 'attribute'");
  bool ignore_case = !bool_arg(a[2], false);
  AttrGetter key(a[0], ignore_case, a[1]);
  AttrGetter shown(a[0], false, a[1]);
  std::vector<std::pair<Value, Value>> keyed;
  std::vector<Value> scratch;
  for (const Value& item : iterate(seq, scratch)) keyed.emplace_back(key(item), item);
  keyed = sorted_by_key(std::move(keyed), false);
  std::vector<Value> out;
  for (size_t i = 0; i < keyed.size();) {
    size_t j = i;
    std::vector<Value> group;
    while (j < keyed.size() && equals(keyed[j].first, keyed[i].first)) group.push_back(keyed[j++].second);
    Value grouper = ignore_case ? shown(group[0]) : keyed[i].first;
    out.push_back(Value::tuple({grouper, Value::list(std::move(group))}));
    i = j;
  }
  return Value::list(std::move(out));
}

Value batch_or_slice(const Value& seq, CallArgs& args, bool batch) {
  const Value* a[2];
  bind(args, batch ? "batch" : "slice", {batch ? "linecount" : "slices", "fill_with"}, a);
  if (!a[0]) raise_failure(std::string(batch ? "batch" : "slice") + "() missing a required argument");
  int64_t n = int_arg(a[0], 1, batch ? "batch" : "slice");
  bool fill = a[1] && !a[1]->is_none();
  std::vector<Value> items = to_list(seq);
  std::vector<Value> out;
  if (batch) {
    if (n <= 0) raise_failure("batch size must be positive");
    for (size_t i = 0; i < items.size(); i += static_cast<size_t>(n)) {
      std::vector<Value> group(
          items.begin() + static_cast<long>(i),
          items.begin() + static_cast<long>(std::min(items.size(), i + static_cast<size_t>(n))));
      while (fill && group.size() < static_cast<size_t>(n)) group.push_back(*a[1]);
      out.push_back(Value::list(std::move(group)));
    }
    return generator(std::move(out));
  }
  if (n <= 0) raise_failure("integer division or modulo by zero");
  auto length = static_cast<int64_t>(items.size());
  int64_t per = length / n, extra = length % n, offset = 0;
  for (int64_t k = 0; k < n; ++k) {
    int64_t start = offset + k * per;
    if (k < extra) ++offset;
    int64_t end = offset + (k + 1) * per;
    std::vector<Value> group(items.begin() + start, items.begin() + end);
    if (fill && k >= extra) group.push_back(*a[1]);
    out.push_back(Value::list(std::move(group)));
  }
  return generator(std::move(out));
}

Value sum(Evaluator&, const Value& seq, CallArgs& args) {
  const Value* a[2];
  bind(args, "sum", {"attribute", "start"}, a);
  std::optional<AttrGetter> getter;
  if (a[0] && !a[0]->is_none()) getter.emplace(a[0], false);
  Value total = a[1] ? *a[1] : Value::integer(0);
  if (total.is_string()) raise_failure("sum() can't sum strings [use ''.join(seq) instead]");
  std::vector<Value> scratch;
  for (const Value& item : iterate(seq, scratch))
    total = binary_op(BinaryOp::Add, total, getter ? (*getter)(item) : item);
  return total;
}

Value reverse(const Value& v) {
  if (v.is_string()) return Value::string(string_slice(v.str(), 0, 0, -1, false, false), v.is_markup());
  if (v.kind() == Kind::List && (v.flavor() == Flavor::Generator || v.flavor() == Flavor::Iterator)) {
    // reversed() refuses a generator; jinja2 then builds a reversed list.
    std::vector<Value> items = to_list(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (v.is_sequence() || v.kind() == Kind::Dict) {
    std::vector<Value> items = to_list(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items), Flavor::Iterator);
  }
  if (v.is_undefined()) return Value::list({}, Flavor::Iterator);
  raise_failure("argument must be iterable");
}

Value first_or_last(const Value& v, bool first) {
  if (!first && v.kind() == Kind::List && (v.flavor() == Flavor::Generator || v.flavor() == Flavor::Iterator))
    raise_failure(std::string("'") + type_name(v) + "' object is not reversible");
  std::vector<Value> scratch;
  if (first) {
    const Value* item = first_item(v, scratch);
    return item ? *item : Value::undefined(Missing::Hint, "No first item, sequence was empty.");
  }
  const auto& items = iterate(v, scratch);
  return items.empty() ? Value::undefined(Missing::Hint, "No last item, sequence was empty.") : items.back();
}

}  // namespace

Value run_filter(Evaluator& ev, FilterId id, const Value& v, CallArgs& args) {
  const Value* a[4];
  switch (id) {
    case FilterId::Abs:
      bind(args, "abs", {}, a);
      if (v.kind() == Kind::Float) return Value::number(std::fabs(v.as_double()));
      if (v.is_integral()) {
        if (v.as_int() == INT64_MIN)
          raise_failure("integer result too large (packtrain's integers are 64-bit)");
        return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
      }
      raise_failure(std::string("bad operand type for abs(): '") + type_name(v) + "'");
    case FilterId::Attr: {
      bind(args, "attr", {"name"}, a);
      std::string_view name = str_arg(a[0], "", "attr");
      MethodId m = find_method(name);
      if (v.is_undefined()) fail_undefined(v);
      if (v.kind() == Kind::Namespace || v.kind() == Kind::Loop || (m != MethodId::None && has_method(v, m)))
        return get_attr(v, name, m, nullptr);
      return Value::undefined(Missing::Attribute, nullptr, v.kind());
    }
    case FilterId::Batch:
      return batch_or_slice(v, args, true);
    case FilterId::Capitalize:
      bind(args, "capitalize", {}, a);
      return Value::string(unicode::capitalize(to_str(v)), v.is_markup());
    case FilterId::Center:
      bind(args, "center", {"width"}, a);
      return Value::string(center(to_str(v), int_arg(a[0], 80, "center")));
    case FilterId::Count:
    case FilterId::Length:
      bind(args, "length", {}, a);
      return Value::integer(static_cast<int64_t>(length(v)));
    case FilterId::Default:
      bind(args, "default", {"default_value", "boolean"}, a);
      if (v.is_undefined() || (bool_arg(a[1], false) && !truthy(v))) return a[0] ? *a[0] : Value::string("");
      return v;
    case FilterId::Dictsort:
      return dictsort(v, args);
    case FilterId::Escape:
      bind(args, "escape", {}, a);
      if (v.is_markup()) return v;
      return Value::string(html_escape(to_str(v)), true);
    case FilterId::Filesizeformat: {
      bind(args, "filesizeformat", {"binary"}, a);
      bool binary = bool_arg(a[0], false);
      double bytes = filter_float(v, nullptr).as_double();
      double base = binary ? 1024 : 1000;
      static constexpr const char* kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
      static constexpr const char* kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
      if (bytes == 1) return Value::string("1 Byte");
      if (bytes < base) return Value::string(std::to_string(static_cast<int64_t>(bytes)) + " Bytes");
      char buf[64];
      double unit = base;
      for (int i = 0; i < 8; ++i) {
        unit *= base;
        if (bytes < unit || i == 7) {
          std::snprintf(buf, sizeof buf, "%.1f %s", base * bytes / unit, binary ? kBinary[i] : kDecimal[i]);
          break;
        }
      }
      return Value::string(buf);
    }
    case FilterId::First:
      bind(args, "first", {}, a);
      return first_or_last(v, true);
    case FilterId::Last:
      bind(args, "last", {}, a);
      return first_or_last(v, false);
    case FilterId::Float:
      bind(args, "float", {"default"}, a);
      return filter_float(v, a[0]);
    case FilterId::Forceescape:
      bind(args, "forceescape", {}, a);
      return Value::string(html_escape(to_str(v)), true);
    case FilterId::Format: {
      if (!args.positional.empty() && !args.keywords.empty())
        raise_failure("can't handle positional and keyword arguments at the same time");
      Value params;
      if (!args.keywords.empty()) {
        auto d = std::make_shared<DictObj>();
        for (const auto& [k, x] : args.keywords) d->items.emplace_back(Value::string(std::string(k)), x);
        params = Value::dict(std::move(d));
      } else {
        params = Value::tuple(args.positional);
      }
      return Value::string(percent_format(to_str(v), params), v.is_markup());
    }
    case FilterId::Groupby:
      return groupby(v, args);
    case FilterId::Indent:
      bind(args, "indent", {"width", "first", "blank"}, a);
      if (v.is_undefined()) fail_undefined(v);
      // jinja2 appends "\n" to the value, which only strings allow.
      if (!v.is_string())
        raise_failure(std::string("unsupported operand type(s) for +=: '") + type_name(v) + "' and 'str'");
      return Value::string(indent(v, a[0], bool_arg(a[1], false), bool_arg(a[2], false)), v.is_markup());
    case FilterId::Int:
      bind(args, "int", {"default", "base"}, a);
      return filter_int(v, a[0], a[1]);
    case FilterId::Join:
      bind(args, "join", {"d", "attribute"}, a);
      return join(v, a[0], a[1]);
    case FilterId::List:
      bind(args, "list", {}, a);
      return Value::list(to_list(v));
    case FilterId::Lower:
      bind(args, "lower", {}, a);
      return Value::string(unicode::lower(to_str(v)), v.is_markup());
    case FilterId::Upper:
      bind(args, "upper", {}, a);
      return Value::string(unicode::upper(to_str(v)), v.is_markup());
    case FilterId::Items: {
      bind(args, "items", {}, a);
      if (v.is_undefined()) return generator({});
      if (v.kind() != Kind::Dict) raise_failure("Can only get item pairs from a mapping.");
      std::vector<Value> out;
      for (const auto& [k, x] : v.dict_obj().items) out.push_back(Value::tuple({k, x}));
      return generator(std::move(out));
    }
    case FilterId::Map:
      return map(ev, v, args);
    case FilterId::Min:
      return min_max(v, args, false);
    case FilterId::Max:
      return min_max(v, args, true);
    case FilterId::Reject:
      return select_or_reject(ev, v, args, false, false);
    case FilterId::Rejectattr:
      return select_or_reject(ev, v, args, false, true);
    case FilterId::Select:
      return select_or_reject(ev, v, args, true, false);
    case FilterId::Selectattr:
      return select_or_reject(ev, v, args, true, true);
    case FilterId::Replace: {
      bind(args, "replace", {"old", "new", "count"}, a);
      if (!a[0] || !a[1]) raise_failure("replace() missing required arguments");
      CallArgs m;
      m.positional = {Value::string(to_str(*a[0])), Value::string(to_str(*a[1]))};
      if (a[2] && !a[2]->is_none()) m.positional.push_back(*a[2]);
      return run_method(ev, Value::string(to_str(v)), MethodId::Replace, m);
    }
    case FilterId::Reverse:
      bind(args, "reverse", {}, a);
      return reverse(v);
    case FilterId::Round:
      bind(args, "round", {"precision", "method"}, a);
      return filter_round(v, a[0], a[1]);
    case FilterId::Safe:
      bind(args, "safe", {}, a);
      return Value::string(to_str(v), true);
    case FilterId::Slice:
      return batch_or_slice(v, args, false);
    case FilterId::Sort:
      return sort(v, args);
    case FilterId::String:
      bind(args, "string", {}, a);
      return soft_str(v);
    case FilterId::Striptags:
      bind(args, "striptags", {}, a);
      return Value::string(striptags(to_str(v)), true);
    case FilterId::Sum:
      return sum(ev, v, args);
    case FilterId::Title:
      bind(args, "title", {}, a);
      return Value::string(title(to_str(v)), v.is_markup());
    case FilterId::Tojson:
      return tojson(v, args);
    case FilterId::Trim: {
      bind(args, "trim", {"chars"}, a);
      std::string s = to_str(v);
      std::string_view chars;
      bool has_chars = a[0] && !a[0]->is_none();
      if (has_chars) chars = str_arg(a[0], "", "trim");
      return Value::string(std::string(unicode::strip(s, has_chars ? &chars : nullptr, true, true)),
                           v.is_markup());
    }
    case FilterId::Truncate:
      bind(args, "truncate", {"length", "killwords", "end", "leeway"}, a);
      // Anything short enough comes back as it is, strings or not (jinja2 only measures it first).
      if (!v.is_string()) {
        if (static_cast<int64_t>(length(v)) <= int_arg(a[0], 255, "truncate") + int_arg(a[3], 5, "truncate"))
          return v;
        raise_failure(std::string("'") + type_name(v) + "' object is not subscriptable");
      }
      return Value::string(truncate(v, a[0], bool_arg(a[1], false), a[2], a[3]));
    case FilterId::Unique:
      return unique(v, args);
    case FilterId::Wordcount: {
      bind(args, "wordcount", {}, a);
      std::string s = to_str(v);
      int64_t words = 0;
      bool in_word = false;
      for (size_t i = 0; i < s.size();) {
        bool w = unicode::is_word(unicode::decode(s, i));
        if (w && !in_word) ++words;
        in_word = w;
      }
      return Value::integer(words);
    }
    case FilterId::Pprint:
      unsupported("pprint");
    case FilterId::Random:
      unsupported("random");
    case FilterId::Urlencode:
      unsupported("urlencode");
    case FilterId::Urlize:
      unsupported("urlize");
    case FilterId::Wordwrap:
      unsupported("wordwrap");
    case FilterId::Xmlattr:
      unsupported("xmlattr");
    case FilterId::Unknown:
      break;
  }
  raise_failure("unknown filter");
}

}  // namespace pt::jinja
