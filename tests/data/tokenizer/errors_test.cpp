// Unsupported or malformed tokenizer.json files fail with the file, the JSON path and what to do.
#include "core/error.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/tokenizer.h"
#include "fixtures.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

std::string error_of(const std::string& json) {
  try {
    Tokenizer::from_json(json, "tok.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string error_of(const nlohmann::json& json) { return error_of(json.dump()); }

void expect_mentions(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    EXPECT_NE(message.find(p), std::string::npos) << "missing \"" << p << "\" in: " << message;
}

TEST(TokenizerErrors, TheTinyTokenizerIsValid) {
  auto t = Tokenizer::from_json(test::tiny_tokenizer({"ab"}, {{"a", "b"}}).dump(), "tok.json");
  EXPECT_EQ(t.encode("abc"), (std::vector<int32_t>{256, 'c'}));
}

TEST(TokenizerErrors, OtherModelTypes) {
  for (const char* type : {"Unigram", "WordLevel"}) {
    auto json = test::tiny_tokenizer({}, {});
    json["model"]["type"] = type;
    expect_mentions(error_of(json), {"tok.json", "/model/type", type, "BPE", "WordPiece"});
  }
}

TEST(TokenizerErrors, UnsupportedBpeOptions) {
  auto json = test::tiny_tokenizer({}, {});
  json["model"]["dropout"] = 0.1;
  expect_mentions(error_of(json), {"tok.json", "/model/dropout", "null or 0"});
  json["model"]["dropout"] = 0;
  EXPECT_EQ(error_of(json), "(no error)");
  json = test::tiny_tokenizer({}, {});
  json["model"]["continuing_subword_prefix"] = "##";
  expect_mentions(error_of(json), {"/model/continuing_subword_prefix"});
  json = test::tiny_tokenizer({}, {});
  json["model"]["end_of_word_suffix"] = "</w>";
  expect_mentions(error_of(json), {"/model/end_of_word_suffix"});
}

TEST(TokenizerErrors, ByteFallbackWithByteLevelOnlyWhenItCannotTrigger) {
  auto json = test::tiny_tokenizer({}, {});
  json["model"]["byte_fallback"] = true;  // every byte has its token: byte fallback never happens
  EXPECT_EQ(error_of(json), "(no error)");
  json["model"]["vocab"].erase(byte_level_chars()['a']);
  expect_mentions(error_of(json), {"tok.json", "/model/byte_fallback", "ByteLevel"});
}

TEST(TokenizerErrors, UnsupportedPipelineSteps) {
  auto json = test::tiny_tokenizer({}, {});
  json["normalizer"] = {{"type", "Lowercase"}};
  expect_mentions(error_of(json), {"/normalizer/type", "Lowercase", "NFC", "Prepend", "Replace"});
  json["normalizer"] = {{"type", "Sequence"},
                        {"normalizers", {{{"type", "NFKC"}}, {{"type", "Precompiled"}}}}};
  expect_mentions(error_of(json), {"/normalizer/normalizers/1/type", "Precompiled"});
  json = test::tiny_tokenizer({}, {});
  json["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
  expect_mentions(error_of(json), {"/pre_tokenizer/type", "WhitespaceSplit", "ByteLevel", "Metaspace"});
  json = test::tiny_tokenizer({}, {});
  json["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}},
                             {{"type", "ByteLevel"}}}}};
  expect_mentions(error_of(json), {"/pre_tokenizer/pretokenizers/0/pattern", "cannot compile regex"});
  // HF would split the byte-level spelling; packtrain's pieces are raw bytes.
  json["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "ByteLevel"}},
                             {{"type", "Split"}, {"pattern", {{"String", "a"}}}, {"behavior", "Isolated"}}}}};
  expect_mentions(error_of(json), {"/pre_tokenizer/pretokenizers/1", "Split after a ByteLevel"});
  json = test::tiny_tokenizer({}, {});
  json["decoder"] = {{"type", "CTC"}, {"pad_token", "<pad>"}};
  expect_mentions(error_of(json), {"/decoder/type", "CTC", "ByteFallback", "Metaspace", "WordPiece"});
}

TEST(TokenizerErrors, SentencePieceStepsRefusedByName) {
  auto with_pre = [](nlohmann::json pre) {
    auto json = test::sp_tokenizer({"a"}, {});
    json["pre_tokenizer"] = std::move(pre);
    return error_of(json);
  };
  EXPECT_EQ(with_pre({{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", true}}),
            "(no error)");
  expect_mentions(with_pre({{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "sometimes"}}),
                  {"/pre_tokenizer/prepend_scheme", "sometimes", "always, first or never"});
  expect_mentions(with_pre({{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", false}}),
                  {"/pre_tokenizer/add_prefix_space", "never"});
  expect_mentions(with_pre({{"type", "Metaspace"}, {"replacement", "__"}}),
                  {"/pre_tokenizer/replacement", "single character"});
  expect_mentions(with_pre({{"type", "Metaspace"}}), {"/pre_tokenizer/replacement is missing"});

  auto json = test::sp_tokenizer({"a"}, {});
  json["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "(a)"}}}, {"content", "$1$1"}};
  expect_mentions(error_of(json), {"/normalizer/content", "regex groups"});
  json["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", ""}}}, {"content", "x"}};
  expect_mentions(error_of(json), {"/normalizer/pattern/String", "empty"});
  json["normalizer"] = {{"type", "Replace"}, {"pattern", "a"}, {"content", "x"}};
  expect_mentions(error_of(json), {"/normalizer/pattern", "String", "Regex"});
  json["normalizer"] = {{"type", "Prepend"}};
  expect_mentions(error_of(json), {"/normalizer/prepend is missing"});

  json = test::sp_tokenizer({"a"}, {});
  json["decoder"] = {{"type", "Strip"}, {"content", " "}, {"start", -1}, {"stop", 0}};
  expect_mentions(error_of(json), {"/decoder/start", "non-negative integer"});
  json["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "CTC"}}}}};
  expect_mentions(error_of(json), {"/decoder/decoders/1/type", "CTC"});

  json = test::sp_tokenizer({"a"}, {});
  json["model"]["unk_token"] = "<unk>";
  expect_mentions(error_of(json), {"/model/unk_token", "\"<unk>\" is not in /model/vocab"});
}

TEST(TokenizerErrors, MalformedJsonGivesThePosition) {
  expect_mentions(error_of(std::string("{\n  \"model\": {\n    \"type\": BPE\n}")),
                  {"tok.json", "malformed JSON", "line 3"});
}

TEST(TokenizerErrors, MissingVocab) {
  auto json = test::tiny_tokenizer({}, {});
  json["model"].erase("vocab");
  expect_mentions(error_of(json), {"tok.json", "/model/vocab is missing"});
}

TEST(TokenizerErrors, MergeNamingAnUnknownToken) {
  auto json = test::tiny_tokenizer({"ab"}, {{"a", "b"}});
  json["model"]["merges"].push_back({"ab", "zz"});
  expect_mentions(error_of(json),
                  {"tok.json", "/model/merges/1", "merge #2", "\"zz\" is not in /model/vocab"});
  json = test::tiny_tokenizer({}, {});
  json["model"]["merges"] = {"a b"};
  expect_mentions(error_of(json), {"/model/merges/0", "merged token \"ab\""});
  json["model"]["merges"] = {"a b c"};
  expect_mentions(error_of(json), {"/model/merges/0", "two tokens"});
}

TEST(TokenizerErrors, MissingFileAndUnknownIds) {
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), Error);
  auto t = Tokenizer::from_json(test::tiny_tokenizer({}, {}).dump(), "tok.json");
  std::vector<int32_t> bad = {1, 9999};
  EXPECT_THROW(t.decode(bad), Error);
  EXPECT_THROW(t.id_to_token(-1), Error);
}

}  // namespace
}  // namespace pt
