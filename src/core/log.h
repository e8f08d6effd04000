// Console logging to stderr, so stdout stays for results (tables, generated text).
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <utility>

namespace pt {

template <class... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "{}\n", fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
void log_warn(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "warning: {}\n", fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace pt
