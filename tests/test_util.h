// Helpers shared by tests: a fresh temporary directory per test, a field of a metrics.jsonl line as printed.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace pt::test {

inline std::filesystem::path fresh_temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = std::filesystem::temp_directory_path() / ("packtrain_" + std::string(info->test_suite_name()) +
                                                       "_" + info->name() + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The text of field `name` in one line of flat JSON as written ("loss":5.25 -> "5.25"), or "?": printed
// numbers compare bit for bit where parsed ones might not.
inline std::string printed_field(const std::string& line, const std::string& name) {
  const std::string key = "\"" + name + "\":";
  const size_t at = line.find(key);
  if (at == std::string::npos) return "?";
  const size_t begin = at + key.size();
  return line.substr(begin, line.find_first_of(",}", begin) - begin);
}

}  // namespace pt::test
