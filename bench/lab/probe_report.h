// What the kernel-lab probes share: an exact comparison of a probe's output with its CPU product, printed
// so that a layout bug shows as a pattern (a map of 8 x 8 blocks) and its first wrong elements.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace pt::lab {

// Compares rows x cols values; prints "ok" or the wrong count, the 8 x 8 block map and the first wrong
// elements (explain adds a note to each). Returns whether all matched.
inline bool report(const std::string& what, const std::vector<float>& got, const std::vector<float>& want,
                   int rows, int cols, const std::function<std::string(int, int, float)>& explain = nullptr) {
  int wrong = 0;
  std::vector<std::string> map(static_cast<size_t>((rows + 7) / 8),
                               std::string(static_cast<size_t>((cols + 7) / 8), '.'));
  std::vector<std::string> first;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r) * cols + c;
      if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
      ++wrong;
      map[static_cast<size_t>(r / 8)][static_cast<size_t>(c / 8)] = 'X';
      if (first.size() < 8)
        first.push_back(fmt::format("      [{:3}][{:3}] got {} want {}{}", r, c, got[i], want[i],
                                    explain ? explain(r, c, got[i]) : std::string()));
    }
  fmt::print("  {:<58} {}\n", what,
             wrong == 0 ? std::string("ok") : fmt::format("{} of {} wrong", wrong, rows * cols));
  if (wrong == 0) return true;
  fmt::print("    rows/8 x cols/8 blocks (X: wrong):\n");
  for (const std::string& line : map) fmt::print("      {}\n", line);
  for (const std::string& line : first) fmt::print("{}\n", line);
  return false;
}

}  // namespace pt::lab
