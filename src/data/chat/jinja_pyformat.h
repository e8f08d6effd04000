// Python's string formatting as templates reach it: `"%s" % x` (and the format filter), str.format and
// format specs, and datetime.strftime for strftime_now().
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/chat/jinja_value.h"

namespace pt::jinja {

// fmt % args: a tuple gives positional arguments, a dict named ones (%(name)s), anything else one argument.
std::string percent_format(std::string_view fmt, const Value& args);

// fmt.format(*positional, **keywords).
std::string str_format(std::string_view fmt, const std::vector<Value>& positional,
                       const std::vector<std::pair<std::string_view, Value>>& keywords);

// format(v, spec) for str, int, float, bool and None.
std::string format_value(const Value& v, std::string_view spec);

// datetime.fromtimestamp(t).strftime(fmt): local time, %f as microseconds, %z and %Z empty (naive time).
std::string strftime_local(std::string_view fmt, std::chrono::system_clock::time_point t);

}  // namespace pt::jinja
