// Unsupported or malformed tokenizer.json files fail with the file, the JSON path and what to do.
#include "core/error.h"
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
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    auto json = test::tiny_tokenizer({}, {});
    json["model"]["type"] = type;
    expect_mentions(error_of(json), {"tok.json", "/model/type", type, "BPE"});
  }
}

TEST(TokenizerErrors, UnsupportedBpeOptions) {
  auto json = test::tiny_tokenizer({}, {});
  json["model"]["byte_fallback"] = true;
  expect_mentions(error_of(json), {"tok.json", "/model/byte_fallback", "only false"});
  json = test::tiny_tokenizer({}, {});
  json["model"]["dropout"] = 0.1;
  expect_mentions(error_of(json), {"/model/dropout", "null"});
  json = test::tiny_tokenizer({}, {});
  json["model"]["continuing_subword_prefix"] = "##";
  expect_mentions(error_of(json), {"/model/continuing_subword_prefix"});
  json = test::tiny_tokenizer({}, {});
  json["model"]["end_of_word_suffix"] = "</w>";
  expect_mentions(error_of(json), {"/model/end_of_word_suffix"});
}

TEST(TokenizerErrors, UnsupportedPipelineSteps) {
  auto json = test::tiny_tokenizer({}, {});
  json["normalizer"] = {{"type", "Lowercase"}};
  expect_mentions(error_of(json), {"/normalizer/type", "Lowercase", "NFC"});
  json = test::tiny_tokenizer({}, {});
  json["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_mentions(error_of(json), {"/pre_tokenizer/type", "Metaspace", "ByteLevel"});
  json = test::tiny_tokenizer({}, {});
  json["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\s"}}}, {"behavior", "Isolated"}};
  expect_mentions(error_of(json), {"/pre_tokenizer", "ByteLevel"});
  json = test::tiny_tokenizer({}, {});
  json["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}},
                             {{"type", "ByteLevel"}}}}};
  expect_mentions(error_of(json), {"/pre_tokenizer/pretokenizers/0/pattern", "cannot compile regex"});
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
