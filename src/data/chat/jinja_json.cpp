#include "data/chat/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "data/chat/jinja_unicode.h"

namespace pt::jinja {

namespace {

template <class Json>
Value convert(const Json& j) {
  RecursionGuard guard("while decoding a JSON array or object");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::string(j.template get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(convert(x));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto d = std::make_shared<DictObj>();
      d->items.reserve(j.size());
      // JSON keys are unique already: no lookup needed while building.
      for (auto it = j.begin(); it != j.end(); ++it)
        d->items.emplace_back(Value::string(it.key()), convert(it.value()));
      return Value::dict(std::move(d));
    }
    default:
      raise_failure("binary JSON values are not supported");
  }
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    if (b >= 0x80) {
      size_t start = i;
      char32_t c = unicode::decode(s, i);
      if (!ensure_ascii) {
        out.append(s, start, i - start);
        continue;
      }
      char buf[16];
      if (c >= 0x10000) {
        c -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (c >> 10)),
                      static_cast<unsigned>(0xDC00 + (c & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
      continue;
    }
    ++i;
    switch (b) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (b < 0x20 || (b == 0x7F && ensure_ascii)) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(b));
          out += buf;
        } else {
          out += static_cast<char>(b);
        }
    }
  }
  out += '"';
}

class Dumper {
 public:
  Dumper(std::string& out, const JsonOptions& o) : out_(out), o_(o) {}

  void value(const Value& v, int depth) {
    RecursionGuard guard("while encoding a JSON object");
    switch (v.kind()) {
      case Kind::None:
        out_ += "null";
        return;
      case Kind::Bool:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case Kind::Int:
        append_str(out_, v);
        return;
      case Kind::Float: {
        double d = v.as_double();
        if (std::isnan(d))
          out_ += "NaN";
        else if (std::isinf(d))
          out_ += d < 0 ? "-Infinity" : "Infinity";
        else
          append_float_repr(out_, d);
        return;
      }
      case Kind::String:
        append_json_string(out_, v.str(), o_.ensure_ascii);
        return;
      case Kind::List:
      case Kind::Tuple:
        if (v.kind() == Kind::List && v.flavor() != Flavor::Plain) break;
        sequence(v.items(), depth);
        return;
      case Kind::Dict:
        mapping(v.dict_obj(), depth);
        return;
      default:
        break;
    }
    raise_failure(std::string("Object of type ") + type_name(v) + " is not JSON serializable");
  }

 private:
  void newline(int depth) {
    out_ += '\n';
    for (int i = 0; i < depth; ++i) out_ += *o_.indent;
  }

  void sequence(const std::vector<Value>& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += o_.item_separator;
      if (o_.indent) newline(depth + 1);
      value(items[i], depth + 1);
      check_built_size(out_.size(), "tojson's result");  // before millions of items take their time
    }
    if (o_.indent) newline(depth);
    out_ += ']';
  }

  // JSON object keys: strings as they are, numbers, booleans and null spelled as JSON spells them.
  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Kind::String:
        return std::string(k.str());
      case Kind::None:
        return "null";
      case Kind::Bool:
        return k.as_bool() ? "true" : "false";
      case Kind::Int:
        return to_str(k);
      case Kind::Float: {
        double d = k.as_double();
        if (std::isnan(d)) return "NaN";
        if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
        return to_str(k);
      }
      default:
        raise_failure(std::string("keys must be str, int, float, bool or None, not ") + type_name(k));
    }
  }

  void mapping(const DictObj& d, int depth) {
    if (d.items.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> items;
    items.reserve(d.items.size());
    for (const auto& kv : d.items) items.push_back(&kv);
    if (o_.sort_keys)
      std::stable_sort(items.begin(), items.end(),
                       [](const auto* a, const auto* b) { return three_way(a->first, b->first) < 0; });
    out_ += '{';
    bool first = true;
    for (const auto* kv : items) {
      if (!first) out_ += o_.item_separator;
      first = false;
      if (o_.indent) newline(depth + 1);
      append_json_string(out_, key_text(kv->first), o_.ensure_ascii);
      out_ += o_.key_separator;
      value(kv->second, depth + 1);
    }
    if (o_.indent) newline(depth);
    out_ += '}';
  }

  std::string& out_;
  const JsonOptions& o_;
};

}  // namespace

Value from_json(const nlohmann::ordered_json& j) { return convert(j); }
Value from_json(const nlohmann::json& j) { return convert(j); }

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  Dumper(out, options).value(v, 0);
  return out;
}

}  // namespace pt::jinja
