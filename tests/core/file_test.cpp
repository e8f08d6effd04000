#include "core/file.h"
#include "core/error.h"

#include "test_util.h"

#include <gtest/gtest.h>

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
