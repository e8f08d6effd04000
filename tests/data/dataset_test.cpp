// PreparedDataset::open on a good dataset and on truncated or tampered copies: every defect is an
// Error naming the file and telling the user to re-run prepare.
#include "data/dataset.h"

#include "core/error.h"
#include "prepare/prepare_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>

namespace pt {
namespace {

namespace fs = std::filesystem;

class DatasetOpenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::string jsonl;
    for (int i = 0; i < 20; ++i)
      jsonl += fmt::format(R"({{"prompt": "q{}", "completion": "answer {}"}})", i, i) + "\n";
    auto o = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl", jsonl)});
    o.val_fraction = 0.3;
    prepare_dataset(o);
    out_ = o.output_dir;
  }
  void TearDown() override { fs::remove_all(dir_); }

  nlohmann::json metadata() const { return nlohmann::json::parse(read_file(out_ + "/metadata.json")); }
  void set_metadata(const nlohmann::json& m) const { write_file_atomic(out_ + "/metadata.json", m.dump(2)); }

  // Replaces a data file and records its new size and checksum, so only the content checks can object.
  template <class T>
  void rewrite(const std::string& split, const std::string& name, const std::vector<T>& values) const {
    std::string bytes(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
    write_file_atomic(out_ + "/" + split + "/" + name, bytes);
    auto m = metadata();
    m["splits"][split]["files"][name] = {
        {"bytes", bytes.size()}, {"xxh64", fmt::format("{:016x}", XXH64(bytes.data(), bytes.size(), 0))}};
    set_metadata(m);
  }
  template <class T>
  std::vector<T> load(const std::string& split, const std::string& name) const {
    auto bytes = read_file(out_ + "/" + split + "/" + name);
    std::vector<T> values(bytes.size() / sizeof(T));
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
    return values;
  }

  // The open error; both named pieces must be in it, along with the advice to re-run prepare.
  void expect_open_error(const std::string& file, const std::string& what, bool verify = true) const {
    try {
      PreparedDataset::open(out_, verify);
      ADD_FAILURE() << "opened without error; expected one about " << file;
    } catch (const Error& e) {
      std::string message = e.what();
      EXPECT_NE(message.find(file), std::string::npos) << message;
      EXPECT_NE(message.find(what), std::string::npos) << message;
      EXPECT_NE(message.find("re-run `packtrain prepare`"), std::string::npos) << message;
    }
  }

  fs::path dir_;
  std::string out_;
};

TEST_F(DatasetOpenTest, OpensWhatPrepareWrote) {
  auto ds = PreparedDataset::open(out_);
  auto m = metadata();
  EXPECT_EQ(ds.train().size(), m["splits"]["train"]["examples"].get<int64_t>());
  EXPECT_EQ(ds.val().size(), m["splits"]["val"]["examples"].get<int64_t>());
  EXPECT_EQ(ds.train().size() + ds.val().size(), 20);
  EXPECT_EQ(ds.train().num_tokens(), m["splits"]["train"]["tokens"].get<int64_t>());
  EXPECT_EQ(ds.vocab_size(), Tokenizer::from_file(test::fixture_tokenizer()).vocab_size());
  EXPECT_EQ(ds.dir(), out_);
  for (int64_t i = 0; i < ds.train().size(); ++i) {
    auto e = ds.train().example(i);
    ASSERT_EQ(e.tokens.size(), e.loss_mask.size());
    EXPECT_EQ(e.loss_mask[0], 0);  // every example starts with its prompt
    EXPECT_EQ(e.loss_mask.back(), 1);
  }
}

TEST_F(DatasetOpenTest, MissingMetadataIsNotADataset) {
  fs::remove(out_ + "/metadata.json");
  expect_open_error("metadata.json", "is not a prepared dataset");
}

TEST_F(DatasetOpenTest, MalformedMetadata) {
  write_file_atomic(out_ + "/metadata.json", "{\"format_version\": 1,");
  expect_open_error("metadata.json", "not valid JSON");
  auto m = nlohmann::json{{"format_version", 1}};
  set_metadata(m);
  expect_open_error("metadata.json", "lacks a field");
}

TEST_F(DatasetOpenTest, WrongFormatVersion) {
  auto m = metadata();
  m["format_version"] = kDatasetFormatVersion + 1;
  set_metadata(m);
  expect_open_error("metadata.json", fmt::format("version {}", kDatasetFormatVersion + 1));
}

TEST_F(DatasetOpenTest, MissingDataFile) {
  fs::remove(out_ + "/val/loss_mask.bin");
  expect_open_error("val/loss_mask.bin", "missing");
}

TEST_F(DatasetOpenTest, TruncatedFileIsASizeMismatch) {
  auto bytes = read_file(out_ + "/train/tokens.bin");
  write_file_atomic(out_ + "/train/tokens.bin", bytes.substr(0, bytes.size() - 4));
  expect_open_error("train/tokens.bin", "truncated");
}

TEST_F(DatasetOpenTest, ChangedByteFailsTheChecksumUnlessChecksumsAreSkipped) {
  auto mask = load<uint8_t>("train", "loss_mask.bin");
  mask[0] ^= 1;
  write_file_atomic(out_ + "/train/loss_mask.bin", std::string(mask.begin(), mask.end()));
  expect_open_error("train/loss_mask.bin", "checksum");
  EXPECT_NO_THROW(PreparedDataset::open(out_, /*verify_checksums=*/false));
}

TEST_F(DatasetOpenTest, OffsetsThatDecrease) {
  auto offsets = load<uint64_t>("train", "offsets.bin");
  ASSERT_GE(offsets.size(), 4u);
  std::swap(offsets[1], offsets[2]);
  rewrite("train", "offsets.bin", offsets);
  expect_open_error("train/offsets.bin", "offsets decrease");
}

TEST_F(DatasetOpenTest, OffsetsNotEndingAtTheTokenCount) {
  auto offsets = load<uint64_t>("val", "offsets.bin");
  offsets.back() -= 1;
  rewrite("val", "offsets.bin", offsets);
  expect_open_error("val/offsets.bin", "expected the token count");
}

TEST_F(DatasetOpenTest, TokenIdOutsideTheVocabulary) {
  auto tokens = load<uint32_t>("train", "tokens.bin");
  tokens[3] = static_cast<uint32_t>(metadata()["tokenizer"]["vocab_size"].get<int>());
  rewrite("train", "tokens.bin", tokens);
  expect_open_error("train/tokens.bin", "token 3");
}

}  // namespace
}  // namespace pt
