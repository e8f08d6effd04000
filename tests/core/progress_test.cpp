// Progress lines: redrawn in place on a terminal; in a file (a batch job's log) a plain line at most every
// line_every_s seconds, and the final one.
#include "core/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace pt {
namespace {

// What a progress bar writes to a file with these settings, for updates 1..n of n.
std::string drawn(bool terminal, double line_every_s, int n) {
  std::FILE* file = std::tmpfile();
  {
    Progress p("work", n, "items", {file, terminal, line_every_s});
    for (int i = 1; i <= n; ++i) p.update(i);
  }
  std::string text(static_cast<size_t>(std::ftell(file)), '\0');
  std::rewind(file);
  text.resize(std::fread(text.data(), 1, text.size(), file));
  std::fclose(file);
  return text;
}

int lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

TEST(Progress, AFileGetsOnlyTheFinalLineWithinTheInterval) {
  const std::string text = drawn(false, 3600, 1000);
  EXPECT_EQ(lines(text), 1) << text;
  EXPECT_NE(text.find("work [########################] 100.0% 1000.0/1000.0 items"), std::string::npos)
      << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << "no terminal control codes in a file";
}

TEST(Progress, AZeroIntervalPrintsEveryUpdateAsALine) {
  const std::string text = drawn(false, 0, 5);
  EXPECT_EQ(lines(text), 6) << text;  // five updates and the final line
  EXPECT_NE(text.find("work [####....................]  20.0% 1.0/5.0 items"), std::string::npos) << text;
}

TEST(Progress, ATerminalRedrawsOneLineInPlace) {
  const std::string text = drawn(true, 3600, 1000);
  EXPECT_EQ(lines(text), 1) << text;
  EXPECT_EQ(text.rfind("\r\033[K", 0), 0u) << text;
}

}  // namespace
}  // namespace pt
