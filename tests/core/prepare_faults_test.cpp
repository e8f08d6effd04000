// `prepare` on a full disk (RLIMIT_FSIZE, core/file_size_limit.h) and beside another writer: the dataset
// already in the output directory stays loadable, the error names the file and the space the dataset
// needs, and nothing of the failed attempt is left behind. (Here rather than in tests/data: these are the
// output directory's guarantees, core/file.h and core/dir_lock.h.)
#include "core/dir_lock.h"
#include "core/error.h"
#include "core/file.h"
#include "data/dataset.h"
#include "data/prepare/prepare.h"

#include "core/file_size_limit.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace pt {
namespace {

namespace fs = std::filesystem;

std::string records(int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += "{\"text\": \"record " + std::to_string(i) + ": the quick brown fox jumps over the lazy dog\"}\n";
  return out;
}

PrepareOptions options(const fs::path& input, const fs::path& out) {
  PrepareOptions o;
  o.inputs = {input.string()};
  o.tokenizer_path = PACKTRAIN_FIXTURES "/prepare/tokenizer.json";
  o.output_dir = out.string();
  o.val_fraction = 0.1;
  o.show_progress = false;
  return o;
}

int64_t examples(const fs::path& dir) {
  const auto ds = PreparedDataset::open(dir.string());
  return ds.train().size() + ds.val().size();
}

TEST(PrepareOutOfSpace, ThePreviousDatasetStaysLoadableAndTheErrorSaysWhatIsNeeded) {
  const auto dir = test::fresh_temp_dir();
  const auto out = dir / "data";
  write_file_atomic((dir / "small.jsonl").string(), records(20));
  write_file_atomic((dir / "large.jsonl").string(), records(4000));  // tokens.bin well over 64 kB
  prepare_dataset(options(dir / "small.jsonl", out));
  ASSERT_EQ(examples(out), 20);

  try {
    const test::FileSizeLimit limit(64 * 1024);
    prepare_dataset(options(dir / "large.jsonl", out));
    FAIL() << "the dataset was written past the file size limit";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cannot write the dataset in " + out.string() + ": cannot write " + out.string()),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("File too large"), std::string::npos) << m;
    EXPECT_NE(m.find("It needs about "), std::string::npos) << m;
    EXPECT_NE(m.find(" bytes)"), std::string::npos) << m;
    EXPECT_NE(m.find("the dataset already there is unchanged"), std::string::npos) << m;
  }
  EXPECT_EQ(examples(out), 20);
  EXPECT_FALSE(fs::exists(out / ".prepare.partial"));

  prepare_dataset(options(dir / "large.jsonl", out));  // with room, the new dataset replaces the old one
  EXPECT_EQ(examples(out), 4000);
  EXPECT_FALSE(fs::exists(out / ".prepare.partial"));
}

TEST(PrepareOutOfSpace, AFailedFirstDatasetLeavesNoDataset) {
  const auto dir = test::fresh_temp_dir();
  write_file_atomic((dir / "large.jsonl").string(), records(4000));
  try {
    const test::FileSizeLimit limit(64 * 1024);
    prepare_dataset(options(dir / "large.jsonl", dir / "data"));
    FAIL() << "the dataset was written past the file size limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("there is no complete dataset there"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "data" / "metadata.json"));
  EXPECT_FALSE(fs::exists(dir / "data" / ".prepare.partial"));
}

TEST(PrepareLock, ASecondWriterOfTheSameDirectoryFailsNamingTheFirst) {
  const auto dir = test::fresh_temp_dir();
  write_file_atomic((dir / "small.jsonl").string(), records(20));
  fs::create_directories(dir / "data");
  const DirectoryLock first((dir / "data").string(), "prepare", "--output");
  try {
    prepare_dataset(options(dir / "small.jsonl", dir / "data"));
    FAIL() << "two writers prepared one directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is in use: packtrain prepare (pid "), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("or give another --output"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "data" / "metadata.json"));
}

}  // namespace
}  // namespace pt
