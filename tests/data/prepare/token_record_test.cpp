// Pre-tokenized records ({"input_ids", "labels", masks} as TRL writes them): taken as they are, checked
// against the tokenizer's vocab, every bad one reported with its location and kind.
#include "prepare_test_util.h"

#include "core/error.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

using test::to_vector;

class TokenRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Prepares the lines; returns the train examples (tokens, mask) in order.
  std::vector<std::pair<std::vector<uint32_t>, std::vector<uint8_t>>> run(const std::string& lines) {
    auto o = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl", lines)});
    metadata_ = prepare_dataset(o).metadata;
    auto ds = PreparedDataset::open(o.output_dir);
    std::vector<std::pair<std::vector<uint32_t>, std::vector<uint8_t>>> out;
    for (int64_t i = 0; i < ds.train().size(); ++i)
      out.emplace_back(to_vector(ds.train().example(i).tokens), to_vector(ds.train().example(i).loss_mask));
    return out;
  }

  std::filesystem::path dir_;
  nlohmann::ordered_json metadata_;
};

using Tokens = std::vector<uint32_t>;
using Mask = std::vector<uint8_t>;

TEST_F(TokenRecordTest, LabelsAndMasksGiveTheLossAndNothingIsAdded) {
  auto examples = run(
      // labels: -100 is no loss, HF's unshifted labels otherwise
      R"({"input_ids": [1, 2, 3, 259], "labels": [-100, 2, 3, 259]})"
      "\n"
      // no mask at all: every token
      R"({"input_ids": [10, 11]})"
      "\n"
      // padding at both ends dropped; completion_mask marks the loss
      R"({"input_ids": [259, 5, 6, 7, 259], "attention_mask": [0, 1, 1, 1, 0], "completion_mask": [0, 0, 1, 1, 0]})"
      "\n"
      // booleans in masks; every field given must agree for a token to carry loss
      R"({"input_ids": [1, 2, 3, 4], "assistant_masks": [false, true, true, true], "labels": [1, 2, -100, 4]})"
      "\n"
      // input_ids wins over the record's source fields, as in TRL (a processed dataset keeps its columns)
      R"({"messages": [{"role": "user", "content": "hi"}], "input_ids": [7, 8, 9], "assistant_masks": [0, 1, 1]})"
      "\n"
      R"({"text": "ignored", "prompt": "p", "input_ids": [7], "labels": [7]})"
      "\n");
  ASSERT_EQ(examples.size(), 6u);
  EXPECT_EQ(examples[0], std::pair(Tokens{1, 2, 3, 259}, Mask{0, 1, 1, 1}));  // no EOS appended
  EXPECT_EQ(examples[1], std::pair(Tokens{10, 11}, Mask{1, 1}));
  EXPECT_EQ(examples[2], std::pair(Tokens{5, 6, 7}, Mask{0, 1, 1}));
  EXPECT_EQ(examples[3], std::pair(Tokens{1, 2, 3, 4}, Mask{0, 1, 0, 1}));
  EXPECT_EQ(examples[4], std::pair(Tokens{7, 8, 9}, Mask{0, 1, 1}));
  EXPECT_EQ(examples[5], std::pair(Tokens{7}, Mask{1}));
  EXPECT_EQ(metadata_["bad_records"]["total"], 0);
}

TEST_F(TokenRecordTest, LongPreTokenizedRecordsFollowTheLengthPolicy) {
  auto o = test::quiet_options(
      dir_, {test::write_input(dir_, "in.jsonl",
                               R"({"input_ids": [1, 2, 3, 4, 5], "labels": [-100, -100, 3, 4, 5]})"
                               "\n")});
  o.max_len = 2;
  o.long_policy = LongPolicy::kSplit;
  auto m = prepare_dataset(o).metadata;
  auto ds = PreparedDataset::open(o.output_dir);
  ASSERT_EQ(ds.train().size(), 2);  // [1, 2] has no loss target and is dropped
  EXPECT_EQ(to_vector(ds.train().example(0).tokens), (Tokens{3, 4}));
  EXPECT_EQ(to_vector(ds.train().example(1).tokens), (Tokens{5}));
  EXPECT_EQ(m["bad_records"]["by_kind"]["too-long"], 1);
}

struct BadTokens {
  std::string line, kind, says;
};

// One good record, then the bad one on line 2 (the fixture tokenizer has ids 0..259).
TEST_F(TokenRecordTest, EachBadRecordIsSkippedCountedAndLocated) {
  const std::vector<BadTokens> cases = {
      {R"({"input_ids": "1 2"})", "mistyped-field",
       "\"input_ids\" is a string, expected an array of integers"},
      {R"({"input_ids": [1, "2"]})", "mistyped-field", "\"input_ids\"[1] is a string, expected an integer"},
      {R"({"input_ids": [1, 2.0]})", "mistyped-field", "\"input_ids\"[1] is a number, expected an integer"},
      {R"({"input_ids": [1, true]})", "mistyped-field", "\"input_ids\"[1] is a boolean"},
      {R"({"input_ids": [1, null]})", "mistyped-field", "\"input_ids\"[1] is null"},
      {R"({"input_ids": []})", "empty-example", "\"input_ids\" is empty"},
      {R"({"input_ids": [1, 260]})", "token-out-of-range",
       "input_ids[1] is 260, outside the tokenizer's ids 0..259"},
      {R"({"input_ids": [-1]})", "token-out-of-range", "input_ids[0] is -1"},
      {R"({"input_ids": [1, 18446744073709551615]})", "token-out-of-range", "input_ids[1] is"},
      {R"({"input_ids": [1, 2], "labels": [1]})", "length-mismatch",
       "\"labels\" has 1 values but \"input_ids\" has 2"},
      {R"({"input_ids": [1, 2], "attention_mask": [1, 1, 1]})", "length-mismatch",
       "\"attention_mask\" has 3"},
      {R"({"input_ids": [1, 2], "completion_mask": [0, 2]})", "bad-mask-value",
       "\"completion_mask\"[1] is 2, expected 0 or 1"},
      {R"({"input_ids": [1, 2], "assistant_masks": "yes"})", "mistyped-field",
       "\"assistant_masks\" is a string, expected an array of 0/1 values"},
      {R"({"input_ids": [1, 2], "assistant_masks": [1, 0.5]})", "mistyped-field", "expected 0 or 1"},
      {R"({"input_ids": [1, 2], "labels": [-100, 3]})", "bad-label", "labels[1] is 3, neither -100"},
      {R"({"input_ids": [1, 2], "labels": [-1, 2]})", "bad-label", "labels[0] is -1"},
      {R"({"input_ids": [1, 2], "labels": [-100, true]})", "mistyped-field", "\"labels\"[1] is a boolean"},
      {R"({"input_ids": [1, 2, 3], "attention_mask": [1, 0, 1]})", "padding-inside",
       "attention_mask[1] is 0 between real tokens"},
      {R"({"input_ids": [1, 2], "attention_mask": [0, 0]})", "empty-example", "only padding"},
      {R"({"input_ids": [1, 2], "labels": [-100, -100]})", "empty-example", "no token is a loss target"},
      {R"({"input_ids": [1, 2], "completion_mask": [0, 0]})", "empty-example", "no token is a loss target"},
      {R"({"input_ids": [1, 2], "attention_mask": [1, 0], "labels": [-100, 2]})", "empty-example",
       "no token is a loss target"},  // the only loss target is padding
      {R"({"input_ids": [1, 2], "seq_lengths": [1, 1]})", "packed-record", "packs several examples"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.line);
    auto input = test::write_input(dir_, "in.jsonl", "{\"input_ids\": [1]}\n" + c.line + "\n");
    auto o = test::quiet_options(dir_, {input});
    auto m = prepare_dataset(o).metadata;
    EXPECT_EQ(m["records"]["read"], 2);
    EXPECT_EQ(m["records"]["kept"], 1);
    EXPECT_EQ(m["bad_records"]["by_kind"][c.kind], 1);

    o.strict = true;
    std::string message;
    try {
      prepare_dataset(o);
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find(input + ":2"), std::string::npos) << message;
    EXPECT_NE(message.find("[" + c.kind + "]"), std::string::npos) << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
  }
}

TEST_F(TokenRecordTest, BadRecordsAreSummarisedByKind) {
  auto o = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl",
                                                        "{\"input_ids\": [1]}\n"
                                                        "{\"input_ids\": [999]}\n"
                                                        "{\"input_ids\": [998]}\n"
                                                        "{\"input_ids\": [1], \"labels\": [5]}\n")});
  auto report = prepare_dataset(o);
  EXPECT_EQ(report.metadata["bad_records"]["total"], 3);
  EXPECT_EQ(report.metadata["bad_records"]["by_kind"]["token-out-of-range"], 2);
  EXPECT_EQ(report.metadata["bad_records"]["by_kind"]["bad-label"], 1);
  EXPECT_NE(report.issues_summary.find("token-out-of-range"), std::string::npos) << report.issues_summary;
  EXPECT_NE(report.issues_summary.find("bad-label"), std::string::npos) << report.issues_summary;
}

}  // namespace
}  // namespace pt
