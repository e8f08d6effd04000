// Shared by the fuzz targets (one file per parser of outside input; scripts/fuzz.sh builds and runs them).
// The rule they check: whatever the input, a parser either succeeds with a result that keeps its promises
// or throws pt::Error. Any other exception (nlohmann's, std::length_error, std::bad_alloc), a PT_ASSERT
// ("internal error": a bug, not bad input) or a broken invariant is a finding and aborts the run, which
// libFuzzer reports with the input that did it. Memory errors and undefined behaviour are ASan's and
// UBSan's to report.
#pragma once

#include "core/error.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <typeinfo>

#define PT_FUZZ_CHECK(cond)                                                                    \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "fuzz invariant broken at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

namespace pt::fuzz {

// Runs `parse`; returns whether it succeeded. A pt::Error is the parser refusing bad input (false);
// anything else aborts.
template <class F>
bool parses(F&& parse) {
  try {
    parse();
    return true;
  } catch (const pt::Error& e) {
    if (std::string_view(e.what()).starts_with("internal error at ")) {  // PT_ASSERT's message
      std::fprintf(stderr, "fuzz: an internal check failed on outside input: %s\n", e.what());
      std::abort();
    }
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: %s escaped instead of pt::Error: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
}

// A directory of this process's own for the files a parser reads by path, removed at a normal exit (a
// crash leaves it for the post-mortem): under $PACKTRAIN_FUZZ_SCRATCH (scripts/fuzz.sh sets it and clears
// it), else on tmpfs when there is one.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const char* given = std::getenv("PACKTRAIN_FUZZ_SCRATCH");
    std::filesystem::path base = given && *given ? std::filesystem::path(given)
                                 : std::filesystem::is_directory("/dev/shm") && access("/dev/shm", W_OK) == 0
                                     ? std::filesystem::path("/dev/shm")
                                     : std::filesystem::temp_directory_path();
    auto d = base / ("packtrain-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] { std::filesystem::remove_all(scratch_dir()); });
    return d;
  }();
  return dir;
}

inline void write_bytes(const std::filesystem::path& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  PT_FUZZ_CHECK(out.good());
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace pt::fuzz
