// End-to-end: inputs written to a temp dir, prepared, reopened with PreparedDataset::open and checked
// against the tokenizer's own encode() (never against hard-coded ids, so any byte-level BPE passes).
#include "prepare_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace pt {
namespace {

using test::ids;
using test::to_vector;

struct Expected {
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> mask;

  void add(const std::vector<int32_t>& t, bool loss) {
    for (int32_t id : t) {
      tokens.push_back(static_cast<uint32_t>(id));
      mask.push_back(loss ? 1 : 0);
    }
  }
  void add(std::optional<int32_t> id, bool loss) { add(std::vector<int32_t>{id.value()}, loss); }
};

// Checks that train and val together hold `expected` in input order (each split keeps input order).
void expect_examples_in_order(const PreparedDataset& ds, const std::vector<Expected>& expected) {
  int64_t t = 0, v = 0;
  auto matches = [](const DatasetSplit& s, int64_t i, const Expected& e) {
    return i < s.size() && to_vector(s.example(i).tokens) == e.tokens &&
           to_vector(s.example(i).loss_mask) == e.mask;
  };
  for (size_t i = 0; i < expected.size(); ++i) {
    if (matches(ds.train(), t, expected[i])) {
      ++t;
    } else if (matches(ds.val(), v, expected[i])) {
      ++v;
    } else {
      FAIL() << "example " << i << " is not next in train (" << t << ") or val (" << v << ")";
    }
  }
  EXPECT_EQ(t, ds.train().size());
  EXPECT_EQ(v, ds.val().size());
}

std::string jsonl_texts(const std::vector<std::string>& texts) {
  std::string out;
  for (const auto& t : texts) out += nlohmann::json{{"text", t}}.dump() + "\n";
  return out;
}

class PrepareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  Tokenizer tok_ = Tokenizer::from_file(test::fixture_tokenizer());
};

TEST_F(PrepareTest, TextRecordsAreTheirEncodingPlusEosInInputOrderAcrossSplits) {
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i)
    texts.push_back(fmt::format("record {} says héllo {}", i, std::string(size_t(i % 7), 'x')));
  texts.push_back("special <|im_end|> inside text");
  auto o = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl", jsonl_texts(texts))});
  o.val_fraction = 0.3;
  auto report = prepare_dataset(o);
  auto ds = PreparedDataset::open(o.output_dir);

  std::vector<Expected> expected(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    expected[i].add(tok_.encode(texts[i]), true);
    expected[i].add(tok_.eos_id(), true);
  }
  expect_examples_in_order(ds, expected);
  EXPECT_GT(ds.val().size(), 0);
  EXPECT_GT(ds.train().size(), ds.val().size());
  EXPECT_EQ(report.metadata["records"]["read"], 41);
  EXPECT_EQ(report.metadata["bad_records"]["total"], 0);
  EXPECT_TRUE(report.issues_summary.empty());
}

TEST_F(PrepareTest, PromptCompletionHasLossOnCompletionAndEosOnly) {
  auto line =
      nlohmann::json{{"prompt", "Q: what is 2+2?\n"}, {"completion", "A: 4"}, {"source", "extra field"}};
  auto o = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl", line.dump() + "\n")});
  prepare_dataset(o);
  Expected e;
  e.add(tok_.encode("Q: what is 2+2?\n"), false);
  e.add(tok_.encode("A: 4"), true);
  e.add(tok_.eos_id(), true);
  expect_examples_in_order(PreparedDataset::open(o.output_dir), {e});
}

nlohmann::json chat(std::vector<std::pair<std::string, std::string>> turns) {
  auto messages = nlohmann::json::array();
  for (auto& [role, content] : turns) messages.push_back({{"role", role}, {"content", content}});
  return {{"messages", messages}};
}

TEST_F(PrepareTest, ChatUsesChatMLWithLossOnAssistantContentAndEndMarker) {
  std::vector<std::pair<std::string, std::string>> turns = {{"system", "Be brief."},
                                                            {"user", "Hi <|im_start|>"},
                                                            {"assistant", "Hello."},
                                                            {"user", "Bye"},
                                                            {"assistant", "Bye!"}};
  auto ends_with_user = turns;
  ends_with_user.push_back({"user", "one more"});
  auto o = test::quiet_options(
      dir_,
      {test::write_input(dir_, "in.jsonl", chat(turns).dump() + "\n" + chat(ends_with_user).dump() + "\n")});
  auto report = prepare_dataset(o);
  EXPECT_EQ(report.metadata["tokenizer"]["chat_template"],
            nlohmann::ordered_json({{"layout", "chatml"}, {"chosen_by", "auto"}}));

  auto start = tok_.token_to_id("<|im_start|>"), end = tok_.token_to_id("<|im_end|>");
  auto layout = [&](const std::vector<std::pair<std::string, std::string>>& ts) {
    Expected e;
    for (const auto& [role, content] : ts) {
      bool loss = role == "assistant";
      e.add(start, false);
      e.add(tok_.encode(role + "\n"), false);
      e.add(tok_.encode(content), loss);
      e.add(end, loss);
      e.add(tok_.encode("\n"), false);
    }
    e.add(tok_.eos_id(), ts.back().first == "assistant");
    return e;
  };
  expect_examples_in_order(PreparedDataset::open(o.output_dir), {layout(turns), layout(ends_with_user)});
}

TEST_F(PrepareTest, ChatFallsBackToPlainTemplateWithoutImTokens) {
  auto o = test::quiet_options(
      dir_,
      {test::write_input(dir_, "in.jsonl", chat({{"user", "Hi"}, {"assistant", "Hello."}}).dump() + "\n")});
  o.tokenizer_path = test::tokenizer_variant(dir_, {"<|im_start|>", "<|im_end|>"}, {});
  auto report = prepare_dataset(o);
  EXPECT_EQ(report.metadata["tokenizer"]["chat_template"],
            nlohmann::ordered_json({{"layout", "plain"}, {"chosen_by", "auto"}}));
  auto tok = Tokenizer::from_file(o.tokenizer_path);
  Expected e;
  e.add(tok.encode("User: "), false);
  e.add(tok.encode("Hi"), false);
  e.add(tok.encode("\n\n"), false);
  e.add(tok.encode("Assistant: "), false);
  e.add(tok.encode("Hello."), true);
  e.add(tok.encode("\n\n"), true);
  e.add(tok.eos_id(), true);
  expect_examples_in_order(PreparedDataset::open(o.output_dir), {e});
}

TEST_F(PrepareTest, TextFilesSplitIntoDocumentsAtBlankLines) {
  auto path = test::write_input(dir_, "in.txt",
                                "first doc\r\nsecond line\r\n\r\n  \n\nsecond doc\n\n\nthird\n  indented");
  auto o = test::quiet_options(dir_, {path});
  prepare_dataset(o);
  std::vector<Expected> expected(3);
  for (auto [i, text] :
       {std::pair{0, "first doc\nsecond line"}, {1, "second doc"}, {2, "third\n  indented"}}) {
    expected[size_t(i)].add(tok_.encode(text), true);
    expected[size_t(i)].add(tok_.eos_id(), true);
  }
  expect_examples_in_order(PreparedDataset::open(o.output_dir), expected);
}

TEST_F(PrepareTest, AddBosAndNoEos) {
  auto input = test::write_input(dir_, "in.jsonl",
                                 R"({"text": "abc"})"
                                 "\n");
  auto o = test::quiet_options(dir_, {input});
  o.tokenizer_path = test::tokenizer_variant(dir_, {}, {"<s>"});
  o.add_bos = true;
  o.add_eos = false;
  prepare_dataset(o);
  auto tok = Tokenizer::from_file(o.tokenizer_path);
  ASSERT_TRUE(tok.bos_id());
  Expected e;
  e.add(tok.bos_id(), false);
  e.add(tok.encode("abc"), true);
  expect_examples_in_order(PreparedDataset::open(o.output_dir), {e});
}

TEST_F(PrepareTest, SplitIsDeterministicForASeedAndChangesWithIt) {
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back(fmt::format("record number {}", i));
  auto o = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl", jsonl_texts(texts))});
  o.val_fraction = 0.2;
  auto first = prepare_dataset(o).metadata["splits"];
  auto again = prepare_dataset(o).metadata["splits"];
  EXPECT_EQ(first, again);  // same counts and the same checksums of every file
  auto val_examples = first["val"]["examples"].get<int64_t>();
  EXPECT_GT(val_examples, 20);
  EXPECT_LT(val_examples, 60);
  o.seed = 1;
  auto other = prepare_dataset(o).metadata["splits"];
  EXPECT_NE(first["val"]["files"]["tokens.bin"]["xxh64"], other["val"]["files"]["tokens.bin"]["xxh64"]);
  EXPECT_EQ(first["train"]["tokens"].get<int64_t>() + first["val"]["tokens"].get<int64_t>(),
            other["train"]["tokens"].get<int64_t>() + other["val"]["tokens"].get<int64_t>());
}

TEST_F(PrepareTest, ValIsNeverEmptyWithTwoRecordsAndAFraction) {
  auto input = test::write_input(dir_, "in.jsonl", jsonl_texts({"one", "two"}));
  for (uint64_t seed = 0; seed < 8; ++seed) {
    auto o = test::quiet_options(dir_, {input});
    o.val_fraction = 0.01;
    o.seed = seed;
    auto splits = prepare_dataset(o).metadata["splits"];
    EXPECT_EQ(splits["train"]["examples"], 1) << "seed " << seed;
    EXPECT_EQ(splits["val"]["examples"], 1) << "seed " << seed;
  }
}

TEST_F(PrepareTest, ChunkSizeAndThreadCountDoNotChangeTheOutput) {
  std::string jsonl, text;
  for (int i = 0; i < 60; ++i) {
    jsonl += nlohmann::json{{"prompt", fmt::format("p{}", i)}, {"completion", fmt::format("c{}", i)}}.dump() +
             "\n";
    if (i % 9 == 0) jsonl += "{broken\n";
    text += fmt::format("document {}\nline two\n\n", i);
  }
  auto o = test::quiet_options(
      dir_, {test::write_input(dir_, "a.jsonl", jsonl), test::write_input(dir_, "b.txt", text)});
  o.val_fraction = 0.25;
  o.threads = 1;
  auto one_chunk = prepare_dataset(o).metadata;
  o.chunk_bytes = 7;  // a few records per chunk
  o.threads = 3;
  auto tiny_chunks = prepare_dataset(o).metadata;
  EXPECT_EQ(one_chunk["splits"], tiny_chunks["splits"]);
  EXPECT_EQ(one_chunk["bad_records"], tiny_chunks["bad_records"]);
  EXPECT_EQ(tiny_chunks["records"]["read"], 60 + 7 + 60);
}

TEST_F(PrepareTest, MetadataRecordsCountsFilesAndLengths) {
  std::string jsonl;
  for (int i = 1; i <= 10; ++i)
    jsonl += nlohmann::json{{"text", std::string(size_t(i * 10), 'a')}}.dump() + "\n";
  jsonl += R"({"prompt": "abc", "completion": "de"})"
           "\n"
           R"({"text": 1})"
           "\n";
  auto input = test::write_input(dir_, "in.jsonl", jsonl);
  auto o = test::quiet_options(dir_, {input});
  o.val_fraction = 0.2;
  auto m = prepare_dataset(o).metadata;
  auto ds = PreparedDataset::open(o.output_dir);
  auto on_disk = nlohmann::json::parse(read_file(o.output_dir + "/metadata.json"));
  EXPECT_EQ(nlohmann::json::parse(m.dump()), on_disk);

  EXPECT_EQ(m["format_version"], kDatasetFormatVersion);
  EXPECT_EQ(m["tokenizer"]["hash"], fmt::format("{:016x}", tok_.hash()));
  EXPECT_EQ(ds.tokenizer_hash(), tok_.hash());
  EXPECT_EQ(ds.vocab_size(), tok_.vocab_size());
  EXPECT_EQ(m["inputs"][0]["bytes"], jsonl.size());
  EXPECT_EQ(m["options"]["max_len"], 2048);
  EXPECT_EQ(m["records"]["read"], 12);
  EXPECT_EQ(m["records"]["kept"], 11);
  EXPECT_EQ(m["bad_records"]["by_kind"]["mistyped-field"], 1);
  int64_t loss_tokens = 0, tokens = 0, examples = 0;
  for (const auto* split : {&ds.train(), &ds.val()})
    for (int64_t i = 0; i < split->size(); ++i) {
      ++examples;
      tokens += split->length(i);
      for (auto b : split->example(i).loss_mask) loss_tokens += b;
    }
  EXPECT_EQ(examples, 11);
  EXPECT_EQ(m["splits"]["train"]["examples"].get<int64_t>() + m["splits"]["val"]["examples"].get<int64_t>(),
            examples);
  EXPECT_EQ(m["splits"]["train"]["tokens"].get<int64_t>() + m["splits"]["val"]["tokens"].get<int64_t>(),
            tokens);
  EXPECT_EQ(
      m["splits"]["train"]["loss_tokens"].get<int64_t>() + m["splits"]["val"]["loss_tokens"].get<int64_t>(),
      loss_tokens);
  EXPECT_EQ(loss_tokens, tokens - int64_t(tok_.encode("abc").size()));
  std::vector<size_t> lengths = {tok_.encode("abc").size() + tok_.encode("de").size() + 1};
  for (int i = 1; i <= 10; ++i) lengths.push_back(tok_.encode(std::string(size_t(i * 10), 'a')).size() + 1);
  std::sort(lengths.begin(), lengths.end());
  EXPECT_EQ(m["lengths"]["max"], lengths.back());
  EXPECT_EQ(m["lengths"]["p50"], lengths[5]);  // nearest rank: the 6th of 11
  EXPECT_EQ(m["lengths"]["p90"], lengths[9]);
  int64_t histogram_total = 0;
  for (const auto& bucket : m["lengths"]["histogram_log2"]) {
    histogram_total += bucket["count"].get<int64_t>();
    EXPECT_EQ(bucket["max"].get<int64_t>() + 1, 2 * bucket["min"].get<int64_t>());
  }
  EXPECT_EQ(histogram_total, 11);
  for (const char* split : {"train", "val"})
    for (const char* file : {"tokens.bin", "loss_mask.bin", "offsets.bin"})
      EXPECT_EQ(m["splits"][split]["files"][file]["bytes"],
                std::filesystem::file_size(std::filesystem::path(o.output_dir) / split / file));
}

TEST_F(PrepareTest, PreparingAgainReplacesTheDataset) {
  auto o = test::quiet_options(dir_, {test::write_input(dir_, "a.jsonl", jsonl_texts({"old", "data"}))});
  prepare_dataset(o);
  o.inputs = {test::write_input(dir_, "b.jsonl", jsonl_texts({"new"}))};
  prepare_dataset(o);
  auto ds = PreparedDataset::open(o.output_dir);
  ASSERT_EQ(ds.train().size(), 1);
  Expected e;
  e.add(tok_.encode("new"), true);
  e.add(tok_.eos_id(), true);
  expect_examples_in_order(ds, {e});
}

}  // namespace
}  // namespace pt
