// Every kind of bad input: reported with its location, counted in metadata.json, never silently
// dropped; --strict turns the first one into an error and writes nothing.
#include "prepare_test_util.h"

#include "core/error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace pt {
namespace {

using test::to_vector;

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string metadata_path() const { return (dir_ / "out" / "metadata.json").string(); }
  std::string error_of(const PrepareOptions& o) {
    try {
      prepare_dataset(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
  Tokenizer tok_ = Tokenizer::from_file(test::fixture_tokenizer());
};

struct BadLine {
  std::string line, kind;
};

// One good record, then the bad one on line 2.
TEST_F(BadInputTest, EachBadJsonRecordIsSkippedCountedAndLocated) {
  const std::vector<BadLine> cases = {
      {R"({"text": "unterminated)", "malformed-json"},
      {R"([1, 2])", "malformed-json"},
      {R"({"title": "no known field"})", "missing-field"},
      {R"({"prompt": "no completion"})", "missing-field"},
      {R"({"completion": "no prompt"})", "missing-field"},
      {R"({"text": 5})", "mistyped-field"},
      {R"({"prompt": "p", "completion": ["c"]})", "mistyped-field"},
      {R"({"messages": "hello"})", "mistyped-field"},
      {R"({"messages": ["hello"]})", "mistyped-field"},
      {R"({"messages": [{"content": "no role"}]})", "missing-field"},
      {R"({"messages": [{"role": "assistant"}]})", "missing-field"},
      {R"({"messages": [{"role": 1, "content": "x"}]})", "mistyped-field"},
      {R"({"messages": [{"role": "bot", "content": "x"}]})", "unknown-role"},
      {R"({"text": "both", "messages": []})", "ambiguous-record"},
      {R"({"text": "both", "prompt": "p", "completion": "c"})", "ambiguous-record"},
      {R"({"text": ""})", "empty-example"},
      {R"({"prompt": "p", "completion": ""})", "empty-example"},
      {R"({"messages": []})", "empty-example"},
      {R"({"messages": [{"role": "user", "content": "no reply"}]})", "empty-example"},
      {"{\"text\": \"bad \xff byte\"}", "invalid-utf8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.line);
    auto input = test::write_input(dir_, "in.jsonl", "{\"text\": \"good\"}\n" + c.line + "\n");
    auto o = test::quiet_options(dir_, {input});
    auto m = prepare_dataset(o).metadata;
    EXPECT_EQ(m["records"]["read"], 2);
    EXPECT_EQ(m["records"]["kept"], 1);
    EXPECT_EQ(m["bad_records"]["total"], 1);
    EXPECT_EQ(m["bad_records"]["by_kind"][c.kind], 1);

    o.strict = true;
    std::filesystem::remove_all(o.output_dir);
    auto message = error_of(o);
    EXPECT_NE(message.find(input + ":2"), std::string::npos) << message;
    EXPECT_NE(message.find("[" + c.kind + "]"), std::string::npos) << message;
    EXPECT_FALSE(std::filesystem::exists(metadata_path()));
    EXPECT_FALSE(std::filesystem::exists(o.output_dir + "/train/tokens.bin"));
  }
}

TEST_F(BadInputTest, UnknownFieldsBlankLinesAndAByteOrderMarkAreNotProblems) {
  auto input =
      test::write_input(dir_, "in.jsonl",
                        "\xEF\xBB\xBF"
                        R"({"text": "a", "id": 7, "meta": {"source": "web"}})"
                        "\n\n  \n"
                        R"({"messages": [{"role": "assistant", "content": "x", "name": "bob"}], "tags": []})"
                        "\n");
  auto o = test::quiet_options(dir_, {input});
  o.strict = true;
  auto m = prepare_dataset(o).metadata;
  EXPECT_EQ(m["records"]["read"], 2);
  EXPECT_EQ(m["records"]["kept"], 2);
  EXPECT_EQ(m["bad_records"]["total"], 0);
}

TEST_F(BadInputTest, InvalidUtf8InTextFilesIsRepairedAndLocatedByByteOffset) {
  auto input = test::write_input(dir_, "in.txt", "fine document\n\nbroken \xC3\x28 here\n");
  auto o = test::quiet_options(dir_, {input});
  auto m = prepare_dataset(o).metadata;
  EXPECT_EQ(m["bad_records"]["by_kind"]["invalid-utf8"], 1);
  auto ds = PreparedDataset::open(o.output_dir);
  ASSERT_EQ(ds.train().size(), 2);
  auto expected = test::ids(tok_.encode("broken \xEF\xBF\xBD( here"));
  expected.push_back(static_cast<uint32_t>(*tok_.eos_id()));
  EXPECT_EQ(to_vector(ds.train().example(1).tokens), expected);

  o.strict = true;
  auto message = error_of(o);
  EXPECT_NE(message.find(input + "@byte 15"), std::string::npos) << message;
  EXPECT_NE(message.find("[invalid-utf8]"), std::string::npos) << message;
}

class LongExampleTest : public BadInputTest {
 protected:
  // Prepares `line` with --max-len 8 and the policy; returns the examples of both splits in order.
  std::vector<Example> run(const std::string& line, LongPolicy policy) {
    auto o =
        test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl", line + "\n{\"text\": \"ok\"}\n")});
    o.max_len = 8;
    o.long_policy = policy;
    metadata_ = prepare_dataset(o).metadata;
    dataset_ = PreparedDataset::open(o.output_dir);
    std::vector<Example> out;
    for (int64_t i = 0; i < dataset_.train().size(); ++i) out.push_back(dataset_.train().example(i));
    return out;
  }
  std::vector<uint32_t> full(const std::string& text) {
    auto ids = test::ids(tok_.encode(text));
    ids.push_back(static_cast<uint32_t>(*tok_.eos_id()));
    return ids;
  }

  nlohmann::ordered_json metadata_;
  PreparedDataset dataset_;
};

const std::string kLongText = "this example is much longer than eight tokens, whatever the tokenizer";

TEST_F(LongExampleTest, TruncateKeepsTheFirstMaxLenTokens) {
  auto examples = run(nlohmann::json{{"text", kLongText}}.dump(), LongPolicy::kTruncate);
  ASSERT_EQ(examples.size(), 2u);
  auto expected = full(kLongText);
  expected.resize(8);
  EXPECT_EQ(to_vector(examples[0].tokens), expected);
  EXPECT_EQ(metadata_["bad_records"]["by_kind"]["too-long"], 1);
  EXPECT_EQ(metadata_["lengths"]["max"], 8);
}

TEST_F(LongExampleTest, SplitCutsIntoPiecesThatConcatenateToTheWhole) {
  auto examples = run(nlohmann::json{{"text", kLongText}}.dump(), LongPolicy::kSplit);
  auto expected = full(kLongText);
  ASSERT_GT(expected.size(), 16u);
  size_t pieces = (expected.size() + 7) / 8;
  ASSERT_EQ(examples.size(), pieces + 1);
  std::vector<uint32_t> joined;
  for (size_t i = 0; i < pieces; ++i) {
    EXPECT_LE(examples[i].tokens.size(), 8u);
    joined.insert(joined.end(), examples[i].tokens.begin(), examples[i].tokens.end());
  }
  EXPECT_EQ(joined, expected);
  EXPECT_EQ(metadata_["bad_records"]["by_kind"]["too-long"], 1);
  EXPECT_EQ(metadata_["records"]["kept"], 2);
}

TEST_F(LongExampleTest, SplitDropsPiecesWithoutLossTargets) {
  auto line = nlohmann::json{{"prompt", kLongText}, {"completion", "ok"}}.dump();
  auto examples = run(line, LongPolicy::kSplit);
  auto prompt = tok_.encode(kLongText).size(), total = prompt + tok_.encode("ok").size() + 1;
  size_t kept_pieces = (total + 7) / 8 - prompt / 8;  // pieces wholly inside the prompt are dropped
  ASSERT_EQ(examples.size(), kept_pieces + 1);
  for (size_t i = 0; i < kept_pieces; ++i)
    EXPECT_TRUE(
        std::any_of(examples[i].loss_mask.begin(), examples[i].loss_mask.end(), [](uint8_t b) { return b; }));
}

TEST_F(LongExampleTest, DropSkipsTheExample) {
  auto examples = run(nlohmann::json{{"text", kLongText}}.dump(), LongPolicy::kDrop);
  ASSERT_EQ(examples.size(), 1u);
  EXPECT_EQ(to_vector(examples[0].tokens), full("ok"));
  EXPECT_EQ(metadata_["bad_records"]["by_kind"]["too-long"], 1);
  EXPECT_EQ(metadata_["records"]["kept"], 1);
}

TEST_F(LongExampleTest, TruncationLeavingNoLossTargetSkips) {
  auto examples =
      run(nlohmann::json{{"prompt", kLongText}, {"completion", "ok"}}.dump(), LongPolicy::kTruncate);
  ASSERT_EQ(examples.size(), 1u);
  EXPECT_EQ(to_vector(examples[0].tokens), full("ok"));
  EXPECT_EQ(metadata_["bad_records"]["by_kind"]["too-long"], 1);
}

TEST_F(BadInputTest, AllRecordsBadOrNoneIsAnErrorAndWritesNothing) {
  auto o = test::quiet_options(dir_, {test::write_input(dir_, "bad.jsonl", "{oops\n{\"text\": 3}\n")});
  auto message = error_of(o);
  EXPECT_NE(message.find("every record was bad"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(metadata_path()));

  o.inputs = {test::write_input(dir_, "empty.jsonl", "\n\n")};
  message = error_of(o);
  EXPECT_NE(message.find("the inputs are empty"), std::string::npos) << message;
  EXPECT_FALSE(std::filesystem::exists(metadata_path()));
}

TEST_F(BadInputTest, UnusableOptionsAreErrors) {
  auto input = test::write_input(dir_, "in.jsonl", "{\"text\": \"a\"}\n");
  auto o = test::quiet_options(dir_, {input});
  o.val_fraction = 1;
  EXPECT_NE(error_of(o).find("--val-fraction"), std::string::npos);
  o = test::quiet_options(dir_, {input});
  o.max_len = 0;
  EXPECT_NE(error_of(o).find("--max-len"), std::string::npos);
  o = test::quiet_options(dir_, {(dir_ / "missing.jsonl").string()});
  EXPECT_NE(error_of(o).find("missing.jsonl"), std::string::npos);
  o = test::quiet_options(dir_, {input});
  o.add_bos = true;  // the fixture tokenizer has no BOS
  EXPECT_NE(error_of(o).find("--add-bos"), std::string::npos);
  EXPECT_EQ(parse_long_policy("split"), LongPolicy::kSplit);
  EXPECT_THROW(parse_long_policy("squash"), Error);
  EXPECT_THROW(parse_input_format("csv"), Error);
}

}  // namespace
}  // namespace pt
