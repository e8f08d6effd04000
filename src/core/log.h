// Console logging to stderr, so stdout stays for results (tables, generated text). Best effort: a line
// that cannot be written (stderr redirected to a full disk) is dropped rather than stopping the work.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <utility>

namespace pt {

inline void log_line(const char* prefix, const std::string& text) {
  std::fprintf(stderr, "%s%s\n", prefix, text.c_str());
}

template <class... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) {
  log_line("", fmt::format(format, std::forward<Args>(args)...));
}

template <class... Args>
void log_warn(fmt::format_string<Args...> format, Args&&... args) {
  log_line("warning: ", fmt::format(format, std::forward<Args>(args)...));
}

// For a command that ends with a failure it explains itself (and an exit status of its own).
template <class... Args>
void log_error(fmt::format_string<Args...> format, Args&&... args) {
  log_line("error: ", fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace pt
