// metadata.json contents that the fuzzer (fuzz/dataset_metadata.cpp) found mishandled by
// PreparedDataset::open: each is now an Error naming the field. Their inputs are kept in
// fuzz/regressions/dataset_metadata/.
#include "core/error.h"
#include "core/file.h"
#include "data/dataset.h"
#include "prepare/prepare_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace pt {
namespace {

class DatasetFuzzFindings : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto o = test::quiet_options(
        dir_, {test::write_input(dir_, "in.jsonl",
                                 "{\"text\": \"ab\"}\n{\"prompt\": \"a\", \"completion\": \"b\"}\n")});
    o.val_fraction = 0;
    prepare_dataset(o);
    out_ = o.output_dir;
    meta_ = nlohmann::json::parse(read_file(out_ + "/metadata.json"));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void expect_refused(const nlohmann::json& meta, const std::string& what, bool verify = true) const {
    write_file_atomic(out_ + "/metadata.json", meta.dump());
    try {
      PreparedDataset::open(out_, verify);
      ADD_FAILURE() << "opened; expected an error about " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }

  std::filesystem::path dir_;
  std::string out_;
  nlohmann::json meta_;
};

// nlohmann's get<int32_t> of 2.6e303 was undefined; a negative vocab size let every token id through.
TEST_F(DatasetFuzzFindings, CountsMustBeIntegersOfTheirRange) {
  auto m = meta_;
  m["tokenizer"]["vocab_size"] = 2.601e303;
  expect_refused(m, "tokenizer.vocab_size is 2.601e+303, not an integer");
  m["tokenizer"]["vocab_size"] = -5;
  expect_refused(m, "tokenizer.vocab_size is -5, not positive");
  m = meta_;
  m["splits"]["train"]["tokens"] = -1;
  expect_refused(m, "splits.train.tokens is -1, not an integer");
  m = meta_;
  m["format_version"] = 1.5;
  expect_refused(m, "format_version is 1.5");
}

// (examples + 1) * 8 wrapped to 0 for 2^64 - 1 examples: an empty offsets.bin matched it, and its first
// entry was read.
TEST_F(DatasetFuzzFindings, CountsWhoseFileSizesWrapAreRefused) {
  write_file_atomic(out_ + "/train/offsets.bin", "");
  auto m = meta_;
  m["splits"]["train"]["examples"] = UINT64_MAX;
  m["splits"]["train"]["files"]["offsets.bin"]["bytes"] = 0;
  expect_refused(m, "do not fit in a file", /*verify=*/false);
  m = meta_;
  m["splits"]["train"]["tokens"] = uint64_t{1} << 62;  // 4 bytes each wraps to 0
  expect_refused(m, "do not fit in a file", false);
}

}  // namespace
}  // namespace pt
