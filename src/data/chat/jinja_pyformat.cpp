#include "data/chat/jinja_pyformat.h"

#include <cmath>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "data/chat/jinja_unicode.h"

namespace pt::jinja {

namespace {

std::string printf_number(const std::string& spec, double d) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, spec.c_str(), d);
  if (n < 0) raise_failure("bad format");
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), spec.c_str(), d);
  big.pop_back();
  return big;
}

std::string printf_int(const std::string& spec, long long i) {
  char buf[128];
  int n = std::snprintf(buf, sizeof buf, spec.c_str(), i);
  if (n < 0) raise_failure("bad format");
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');  // '%200d': longer than buf, whose end n passed
  std::snprintf(big.data(), big.size(), spec.c_str(), i);
  big.pop_back();
  return big;
}

// Widths and precisions above this are refused (MemoryError) rather than padded out: Python would build
// the gigabyte string '%1000000000d' asks for; glibc's %.1000000000f allocates 4 GB on the way.
constexpr size_t kMaxWidth = size_t{1} << 20;

// An index written as digits in a format field; SIZE_MAX (out of range) for none or too many digits
// (std::stoul threw std::invalid_argument or std::out_of_range past the template's error handling).
size_t index_of(std::string_view digits) {
  if (digits.empty() || digits.size() > 18) return SIZE_MAX;
  size_t v = 0;
  for (char c : digits) v = v * 10 + static_cast<size_t>(c - '0');
  return v;
}

// chr(i) for %c, which Python refuses outside Unicode (the bytes were not UTF-8).
void append_char(std::string& out, long long i) {
  if (i < 0 || i > 0x10FFFF) raise_failure("%c arg not in range(0x110000)");
  unicode::append_utf8(out, static_cast<char32_t>(i));
}

// A width or precision written as digits in a format.
size_t format_size(std::string_view digits) {
  size_t v = 0;
  for (char c : digits)
    if ((v = v * 10 + static_cast<size_t>(c - '0')) > kMaxWidth)
      raise_failure("MemoryError: a format width or precision of " + std::string(digits) + " is too large");
  return v;
}

// Pads `s` to `width` code points.
std::string pad(std::string s, size_t width, char align, std::string_view fill) {
  size_t len = unicode::length(s);
  if (len >= width) return s;
  size_t missing = width - len;
  auto repeat = [&](size_t n) {
    std::string r;
    for (size_t i = 0; i < n; ++i) r += fill;
    return r;
  };
  if (align == '<') return s + repeat(missing);
  if (align == '^') return repeat(missing / 2) + s + repeat(missing - missing / 2);
  if (align == '=') {
    // Padding between the sign and the digits.
    size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ') ? 1 : 0;
    return s.substr(0, sign) + repeat(missing) + s.substr(sign);
  }
  return repeat(missing) + s;
}

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) out += sep;
    out += digits[i];
  }
  return out;
}

double to_double(const Value& v, const char* what) {
  if (v.is_number()) return v.as_double();
  if (v.is_undefined()) fail_undefined(v);
  raise_failure(std::string(what) + ": a real number is required, not " + type_name(v));
}

long long to_integer(const Value& v, const char* what) {
  if (v.is_integral()) return v.as_int();
  if (v.kind() == Kind::Float) {
    if (!std::isfinite(v.as_double())) raise_failure("cannot convert float infinity or NaN to integer");
    if (!(v.as_double() >= -0x1p63 && v.as_double() < 0x1p63))  // converting past it is undefined
      raise_failure("integer result too large (packtrain's integers are 64-bit)");
    return static_cast<long long>(v.as_double());
  }
  if (v.is_undefined()) fail_undefined(v);
  raise_failure(std::string(what) + ": a real number is required, not " + type_name(v));
}

struct Spec {
  std::string fill = " ";
  char align = 0, sign = '-', type = 0, grouping = 0;
  bool alternate = false;
  size_t width = 0;
  int precision = -1;
};

Spec parse_spec(std::string_view s) {
  Spec spec;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '=' || c == '^'; };
  if (!s.empty()) {
    size_t j = 0;
    unicode::decode(s, j);  // the fill may be any character
    if (j < s.size() && is_align(s[j])) {
      spec.fill = std::string(s.substr(0, j));
      spec.align = s[j];
      i = j + 1;
    } else if (is_align(s[0])) {
      spec.align = s[0];
      i = 1;
    }
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == 'z') ++i;
  if (i < s.size() && s[i] == '#') spec.alternate = true, ++i;
  if (i < s.size() && s[i] == '0') {
    if (!spec.align) spec.fill.assign(1, '0'), spec.align = '=';
    ++i;
  }
  size_t digits = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  spec.width = format_size(s.substr(digits, i - digits));
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) spec.grouping = s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    digits = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    spec.precision = static_cast<int>(format_size(s.substr(digits, i - digits)));
  }
  if (i < s.size()) spec.type = s[i++];
  if (i != s.size()) raise_failure("invalid format specifier '" + std::string(s) + "'");
  return spec;
}

std::string signed_text(bool negative, char sign, std::string body) {
  if (negative) return "-" + body;
  if (sign == '+') return "+" + body;
  if (sign == ' ') return " " + body;
  return body;
}

std::string format_int(long long i, const Spec& spec) {
  unsigned long long mag =
      i < 0 ? 0ULL - static_cast<unsigned long long>(i) : static_cast<unsigned long long>(i);
  std::string body;
  char type = spec.type ? spec.type : 'd';
  if (type == 'c') {
    append_char(body, i);
    return body;
  }
  if (type == 'd' || type == 'n') {
    body = std::to_string(mag);
    if (spec.grouping) body = group_digits(body, spec.grouping);
  } else if (type == 'x' || type == 'X' || type == 'o' || type == 'b') {
    int base = type == 'o' ? 8 : type == 'b' ? 2 : 16;
    do {
      int d = static_cast<int>(mag % static_cast<unsigned>(base));
      body.insert(body.begin(), static_cast<char>(d < 10 ? '0' + d : (type == 'X' ? 'A' : 'a') + d - 10));
      mag /= static_cast<unsigned>(base);
    } while (mag);
    if (spec.alternate) body = std::string("0") + (type == 'o' ? 'o' : type == 'b' ? 'b' : type) + body;
  } else {
    raise_failure(std::string("unknown format code '") + type + "' for object of type 'int'");
  }
  return signed_text(i < 0, spec.sign, body);
}

std::string format_float(double d, const Spec& spec) {
  char type = spec.type;
  if (!type && spec.precision < 0) {
    std::string r;
    append_float_repr(r, std::fabs(d));
    return signed_text(std::signbit(d) && !std::isnan(d), spec.sign, r);
  }
  int precision = spec.precision < 0 ? 6 : spec.precision;
  bool percent = type == '%';
  double x = std::fabs(percent ? d * 100 : d);
  std::string conv = !type ? "g" : percent ? "f" : type == 'n' ? "g" : std::string(1, type);
  if (conv != "e" && conv != "E" && conv != "f" && conv != "F" && conv != "g" && conv != "G")
    raise_failure(std::string("unknown format code '") + type + "' for object of type 'float'");
  std::string body;
  if (std::isinf(x)) {
    body = (type == 'E' || type == 'F' || type == 'G') ? "INF" : "inf";
  } else if (std::isnan(x)) {
    body = (type == 'E' || type == 'F' || type == 'G') ? "NAN" : "nan";
  } else {
    body = printf_number(
        std::string("%") + (spec.alternate ? "#" : "") + "." + std::to_string(precision) + conv, x);
    if (!type && body.find_first_of(".e") == std::string::npos) body += ".0";
    if (spec.grouping) {
      size_t end = body.find_first_not_of("0123456789");
      if (end == std::string::npos) end = body.size();
      body = group_digits(body.substr(0, end), spec.grouping) + body.substr(end);
    }
  }
  if (percent) body += '%';
  return signed_text(std::signbit(d) && !std::isnan(d), spec.sign, body);
}

}  // namespace

std::string format_value(const Value& v, std::string_view spec_text) {
  if (spec_text.empty()) return to_str(v);
  Spec spec = parse_spec(spec_text);
  std::string body;
  char default_align = '>';
  switch (v.kind()) {
    case Kind::String: {
      if (spec.type && spec.type != 's')
        raise_failure(std::string("unknown format code '") + spec.type + "' for object of type 'str'");
      body = std::string(v.str());
      if (spec.precision >= 0) {
        auto offs = unicode::offsets(body);
        if (static_cast<size_t>(spec.precision) + 1 < offs.size())
          body.resize(offs[static_cast<size_t>(spec.precision)]);
      }
      default_align = '<';
      break;
    }
    case Kind::Bool:
    case Kind::Int:
      if (spec.type == 'e' || spec.type == 'E' || spec.type == 'f' || spec.type == 'F' || spec.type == 'g' ||
          spec.type == 'G' || spec.type == '%')
        body = format_float(v.as_double(), spec);
      else
        body = format_int(v.as_int(), spec);
      break;
    case Kind::Float:
      body = format_float(v.as_double(), spec);
      break;
    default:
      raise_failure(std::string("unsupported format string passed to ") + type_name(v) + ".__format__");
  }
  return pad(std::move(body), spec.width, spec.align ? spec.align : default_align, spec.fill);
}

std::string percent_format(std::string_view fmt, const Value& args) {
  std::vector<Value> single;
  const std::vector<Value>* positional = &single;
  if (args.kind() == Kind::Tuple)
    positional = &args.items();
  else
    single.push_back(args);
  const DictObj* mapping = args.kind() == Kind::Dict ? &args.dict_obj() : nullptr;
  // Python skips the "not all arguments converted" check for any argument with __getitem__ but str.
  bool indexable =
      mapping || args.is_undefined() ||
      (args.kind() == Kind::List && (args.flavor() == Flavor::Plain || args.flavor() == Flavor::Range));
  size_t next_arg = 0;
  auto take = [&]() -> const Value& {
    if (next_arg >= positional->size()) raise_failure("not enough arguments for format string");
    return (*positional)[next_arg++];
  };
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) raise_failure("incomplete format");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string_view::npos) raise_failure("incomplete format key");
      if (!mapping) raise_failure("format requires a mapping");
      arg = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (!arg) raise_failure("KeyError: '" + std::string(fmt.substr(i + 1, close - i - 1)) + "'");
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos)
      flags += fmt[i++];
    std::string width, precision;
    if (i < fmt.size() && fmt[i] == '*') {
      width = std::to_string(to_integer(take(), "* wants int"));
      ++i;
    }
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') width += fmt[i++];
    bool has_precision = false;
    if (i < fmt.size() && fmt[i] == '.') {
      has_precision = true;
      ++i;
      if (i < fmt.size() && fmt[i] == '*') {
        precision = std::to_string(to_integer(take(), "* wants int"));
        ++i;
      }
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') precision += fmt[i++];
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) raise_failure("incomplete format");
    // As CPython takes '*': a negative width left-justifies, a negative precision is 0. Both bounded.
    if (!width.empty() && width[0] == '-') flags += '-', width.erase(0, 1);
    if (!precision.empty() && precision[0] == '-') precision = "0";
    format_size(width);
    format_size(precision);
    char type = fmt[i];
    if (!arg) arg = &take();
    std::string spec = fmt::format("%{}{}", flags, width);
    if (has_precision) spec += fmt::format(".{}", precision.empty() ? "0" : precision);
    switch (type) {
      case 'd':
      case 'i':
      case 'u':
        out += printf_int(spec + "lld", to_integer(*arg, "%d format"));
        break;
      case 'o':
      case 'x':
      case 'X':
        out += printf_int(spec + "ll" + type, to_integer(*arg, "%x format"));
        break;
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
        out += printf_number(spec + type, to_double(*arg, "must be real number"));
        break;
      case 'c': {
        std::string c;
        if (arg->is_string())
          c = std::string(arg->str());
        else
          append_char(c, to_integer(*arg, "%c requires int or char"));
        out += pad(c, width.empty() ? 0 : std::stoul(width), flags.find('-') != std::string::npos ? '<' : '>',
                   " ");
        break;
      }
      case 's':
      case 'r':
      case 'a': {
        std::string s;
        if (type == 's')
          s = to_str(*arg);
        else
          append_repr(s, *arg);
        if (has_precision) {
          auto offs = unicode::offsets(s);
          size_t p = precision.empty() ? 0 : std::stoul(precision);
          if (p + 1 < offs.size()) s.resize(offs[p]);
        }
        out += pad(s, width.empty() ? 0 : std::stoul(width), flags.find('-') != std::string::npos ? '<' : '>',
                   " ");
        break;
      }
      default:
        raise_failure(std::string("unsupported format character '") + type + "'");
    }
  }
  if (next_arg < positional->size() && !indexable)
    raise_failure("not all arguments converted during string formatting");
  return out;
}

std::string str_format(std::string_view fmt, const std::vector<Value>& positional,
                       const std::vector<std::pair<std::string_view, Value>>& keywords) {
  std::string out;
  int auto_index = 0;
  bool manual = false, automatic = false;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      raise_failure("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    // The field runs to the matching '}' (format specs may nest one level of fields).
    size_t depth = 1, j = i + 1;
    for (; j < fmt.size() && depth; ++j) {
      if (fmt[j] == '{')
        ++depth;
      else if (fmt[j] == '}')
        --depth;
    }
    if (depth) raise_failure("expected '}' before end of string");
    std::string_view field = fmt.substr(i + 1, j - i - 2);
    i = j - 1;
    std::string_view spec;
    char conversion = 0;
    size_t colon = field.find(':');
    if (colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    size_t bang = field.find('!');
    if (bang != std::string_view::npos) {
      if (bang + 2 != field.size()) raise_failure("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    size_t name_end = field.find_first_of(".[");
    std::string_view name = field.substr(0, name_end);
    const Value* arg = nullptr;
    if (name.empty()) {
      if (manual) raise_failure("cannot switch from manual field specification to automatic field numbering");
      automatic = true;
      size_t k = static_cast<size_t>(auto_index++);
      if (k >= positional.size()) raise_failure("Replacement index " + std::to_string(k) + " out of range");
      arg = &positional[k];
    } else if (name.find_first_not_of("0123456789") == std::string_view::npos) {
      if (automatic)
        raise_failure("cannot switch from automatic field numbering to manual field specification");
      manual = true;
      size_t k = index_of(name);
      if (k >= positional.size()) raise_failure("Replacement index " + std::string(name) + " out of range");
      arg = &positional[k];
    } else {
      for (const auto& [k, v] : keywords)
        if (k == name) arg = &v;
      if (!arg) raise_failure("KeyError: '" + std::string(name) + "'");
    }
    Value current = *arg;
    // .attr and [key] on the argument: mapping keys and list indices.
    for (size_t k = name_end; k != std::string_view::npos && k < field.size();) {
      std::string key;
      bool is_attr = field[k] == '.';
      size_t end = is_attr ? field.find_first_of(".[", k + 1) : field.find(']', k);
      if (end == std::string_view::npos) {
        if (!is_attr) raise_failure("Missing ']' in format string");
        end = field.size();
      }
      key = std::string(field.substr(k + 1, end - k - 1));
      k = is_attr ? end : end + 1;
      const Value* found = nullptr;
      if (current.kind() == Kind::Dict) {
        found = current.dict_obj().find(key);
      } else if (current.is_sequence() && !is_attr &&
                 key.find_first_not_of("0123456789") == std::string::npos) {
        size_t idx = index_of(key);
        if (idx < current.items().size()) found = &current.items()[idx];
      }
      if (!found) raise_failure("format field '" + key + "' not found");
      current = *found;
    }
    if (conversion == 'r' || conversion == 'a') {
      std::string r;
      append_repr(r, current);
      current = Value::string(std::move(r));
    } else if (conversion == 's') {
      current = Value::string(to_str(current));
    } else if (conversion) {
      raise_failure(std::string("Unknown conversion specifier ") + conversion);
    }
    std::string resolved_spec =
        spec.find('{') != std::string_view::npos ? str_format(spec, positional, keywords) : std::string(spec);
    out += format_value(current, resolved_spec);
  }
  return out;
}

std::string strftime_local(std::string_view fmt, std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() % 1000000;
  if (micros < 0) micros += 1000000;
  std::tm tm{};
  localtime_r(&secs, &tm);
  // Python expands %f, %z and %Z itself (a naive datetime has no zone) and leaves the rest to C.
  std::string c_fmt;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 >= fmt.size()) {
      c_fmt += fmt[i];
      continue;
    }
    char d = fmt[++i];
    if (d == 'f') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "%06lld", static_cast<long long>(micros));
      c_fmt += buf;
    } else if (d == 'z' || d == 'Z') {
    } else {
      c_fmt += '%';
      c_fmt += d;
    }
  }
  if (c_fmt.empty()) return {};
  std::string out(c_fmt.size() * 4 + 64, '\0');
  while (true) {
    size_t n = std::strftime(out.data(), out.size(), c_fmt.c_str(), &tm);
    if (n > 0 || out.size() > c_fmt.size() * 64 + 4096) {
      out.resize(n);
      return out;
    }
    out.resize(out.size() * 2);
  }
}

}  // namespace pt::jinja
