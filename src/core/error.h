// Errors with context. Every user-facing failure says where (file, line or byte offset), what was
// expected, and what to do; callers throw pt::Error and the CLI prints its message and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

// fmt 9's headers do not compile under nvcc: CUDA translation units throw pt::Error directly.
#ifndef __CUDACC__
#include <fmt/format.h>
#endif

namespace pt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#ifndef __CUDACC__
template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}
#endif

// A place in an input: "data.jsonl:17" or "tokens.bin@4096" (byte offset).
struct Location {
  std::string file;
  long long line = -1;         // 1-based line, or -1
  long long byte_offset = -1;  // or -1

  std::string str() const;
};

}  // namespace pt

// Internal invariant (a bug in packtrain, not bad input).
#define PT_ASSERT(cond)                                                                              \
  do {                                                                                               \
    if (!(cond)) ::pt::fail("internal error at {}:{}: {} does not hold", __FILE__, __LINE__, #cond); \
  } while (0)
