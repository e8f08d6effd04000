#include "core/file.h"
#include "core/error.h"

#include "core/file_size_limit.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <string>

namespace pt {
namespace {

TEST(AtomicWriter, CommitReplacesAndUncommittedLeavesOldFile) {
  auto dir = test::fresh_temp_dir();
  auto path = (dir / "f.bin").string();
  write_file_atomic(path, "old");
  {
    AtomicWriter w(path);
    w.write("new contents that are never committed");
  }  // abandoned: the old file must survive and no temporary stays behind
  EXPECT_EQ(read_file(path), "old");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  write_file_atomic(path, "new");
  EXPECT_EQ(read_file(path), "new");
  MappedFile m(path);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(static_cast<char>(m.bytes()[0]), 'n');
}

TEST(AtomicWriter, AWriteOutOfSpaceNamesTheFileAndTheSpaceAndKeepsTheOldFile) {
  auto dir = test::fresh_temp_dir();
  auto path = (dir / "f.bin").string();
  write_file_atomic(path, "old");
  const std::string big(256 * 1024, 'x');
  try {
    const test::FileSizeLimit limit(64 * 1024);
    write_file_atomic(path, big);
    FAIL() << "a write past the file size limit succeeded";
  } catch (const WriteError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot write " + path + ".tmp: File too large"), std::string::npos) << m;
    EXPECT_NE(m.find("65.5 kB (65536 bytes) of it written"), std::string::npos) << m;
    EXPECT_NE(m.find("free on its filesystem"), std::string::npos) << m;
    EXPECT_NE(m.find("ulimit -f"), std::string::npos) << m;
  }
  EXPECT_EQ(read_file(path), "old");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(FormatBytes, DecimalUnitsWithTheExactCount) {
  EXPECT_EQ(format_bytes(999), "999 bytes");
  EXPECT_EQ(format_bytes(65536), "65.5 kB (65536 bytes)");
  EXPECT_EQ(format_bytes(15934832), "15.9 MB (15934832 bytes)");
  EXPECT_EQ(format_bytes(5'000'000'000), "5.0 GB (5000000000 bytes)");
}

TEST(FreeDiskBytes, AskTheNearestExistingDirectory) {
  const auto dir = test::fresh_temp_dir();
  const auto free = free_disk_bytes((dir / "not/yet/made").string());
  ASSERT_TRUE(free.has_value());
  EXPECT_GT(*free, 0u);
}

TEST(MappedFile, MissingFileNamesThePath) {
  try {
    MappedFile m("/nonexistent/packtrain/file.bin");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/packtrain/file.bin"), std::string::npos);
  }
}

}  // namespace
}  // namespace pt
