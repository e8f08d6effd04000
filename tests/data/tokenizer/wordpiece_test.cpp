// The pieces of WordPiece tokenizers against HF `tokenizers` 0.23: BertNormalizer's and
// BertPreTokenizer's character classes for every code point (bert_chars.json, made by
// scripts/make_wordpiece_fixtures.py), the WordPiece model, the WordPiece decoder, post-processors and
// the options refused by name. Whole tokenizers are in golden_test.cpp.
#include "data/tokenizer/wordpiece.h"
#include "core/error.h"
#include "core/file.h"
#include "data/tokenizer/bert_chars.h"
#include "data/tokenizer/bert_normalizer.h"
#include "data/tokenizer/decoder.h"
#include "data/tokenizer/normalizer.h"
#include "data/tokenizer/pretokenizer.h"
#include "data/tokenizer/tokenizer.h"
#include "fixtures.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <map>

namespace pt {
namespace {

using V = std::vector<std::string>;
using Ids = std::vector<int32_t>;

std::string utf8(char32_t c) {
  utf8proc_uint8_t buffer[4];
  auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buffer);
  return {reinterpret_cast<const char*>(buffer), static_cast<size_t>(n)};
}

// Membership per code point of a list of [first, last] ranges.
std::vector<bool> code_point_set(const nlohmann::json& ranges) {
  std::vector<bool> set(0x110000);
  for (const auto& r : ranges)
    for (auto c = r[0].get<uint32_t>(); c <= r[1].get<uint32_t>(); ++c) set[c] = true;
  return set;
}

TEST(BertChars, EveryCodePointAsHuggingFace) {
  auto hf = nlohmann::json::parse(read_file(test::tokenizer_fixture("bert_chars.json")));
  auto removed = code_point_set(hf["removed"]), space = code_point_set(hf["space"]),
       cjk = code_point_set(hf["cjk"]), punctuation = code_point_set(hf["punctuation"]),
       whitespace = code_point_set(hf["whitespace"]), accent = code_point_set(hf["accent"]);
  std::map<char32_t, std::string> lowercase;
  for (const auto& entry : hf["lowercase"]) lowercase[entry[0].get<char32_t>()] = entry[1].get<std::string>();
  int mismatches = 0;
  auto check = [&](bool ok, const char* what, char32_t c) {
    if (!ok && ++mismatches <= 10) ADD_FAILURE() << fmt::format("{} differs at U+{:04X}", what, uint32_t(c));
  };
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    check(bert_removed(c) == removed[c], "clean_text deletion", c);
    check(bert_space(c) == space[c], "clean_text space", c);
    check(cjk_ideograph(c) == cjk[c], "CJK ideograph", c);
    check(bert_punctuation(c) == punctuation[c], "punctuation", c);
    check(bert_whitespace(c) == whitespace[c], "whitespace", c);
    // Accents only matter for characters NFD leaves as they are (the others are decomposed first).
    std::string alone = utf8(c);
    if (normalize_unicode(alone, NormalForm::NFD) == alone) check(bert_accent(c) == accent[c], "accent", c);
    std::string lower;
    append_bert_lowercase(c, lower);
    auto it = lowercase.find(c);
    check(lower == (it == lowercase.end() ? alone : it->second), "lowercase", c);
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(BertNormalizer, StepsInHfOrder) {
  BertNormalizerOptions uncased;
  // Accents go before lowercasing, so the dot that lowercasing İ adds stays.
  EXPECT_EQ(bert_normalize("Café İ\xC4\xB1", uncased), "cafe i\xC4\xB1");
  EXPECT_EQ(bert_normalize("a\tb\xC2\xA0"
                           "c\x01"
                           "d\xE2\x80\x8B"
                           "e",
                           uncased),
            "a b cde");
  EXPECT_EQ(bert_normalize("中文x", uncased), " 中  文 x");
  BertNormalizerOptions cased{
      .clean_text = true, .handle_chinese_chars = true, .strip_accents = false, .lowercase = false};
  EXPECT_EQ(bert_normalize("Café", cased), "Café");
  EXPECT_EQ(bert_normalize("ok\xFF\xFE", uncased), "ok\xFF\xFE");  // invalid bytes pass through
}

V pre_tokens(std::string_view text) {
  PreTokenizer p;
  p.add_bert();
  Pieces pieces;
  p.split(text, pieces);
  return {pieces.list.begin(), pieces.list.end()};
}

TEST(BertPreTokenizer, WhitespaceSplitsAndEachPunctuationCharacterIsAPiece) {
  EXPECT_EQ(pre_tokens("Hello, world!"), (V{"Hello", ",", "world", "!"}));
  EXPECT_EQ(pre_tokens("$5+3=<x>^`|~"), (V{"$", "5", "+", "3", "=", "<", "x", ">", "^", "`", "|", "~"}));
  EXPECT_EQ(pre_tokens("...!!"), (V{".", ".", ".", "!", "!"}));
  EXPECT_EQ(pre_tokens("a\xC2\xA0"
                       "b\xE3\x80\x80"
                       "c\td"),
            (V{"a", "b", "c", "d"}));
  EXPECT_EQ(pre_tokens("don't"), (V{"don", "'", "t"}));
  EXPECT_EQ(pre_tokens("\xC2\xBF"
                       "Qu\xC3\xA9?"),
            (V{"\xC2\xBF", "Qu\xC3\xA9", "?"}));
  EXPECT_EQ(pre_tokens("  "), V{});
}

// [UNK]=0 un=1 ##aff=2 ##able=3 ##a=4 a=5 é=6 ##é=7
WordPieceModel model(size_t max_chars = 100, std::string prefix = "##") {
  StringMap<int32_t> vocab{{"[UNK]", 0},      {"un", 1}, {prefix + "aff", 2}, {prefix + "able", 3},
                           {prefix + "a", 4}, {"a", 5},  {"\xC3\xA9", 6},     {prefix + "\xC3\xA9", 7}};
  return WordPieceModel(
      std::move(vocab),
      {.unk_id = 0, .continuing_subword_prefix = prefix, .max_input_chars_per_word = max_chars});
}

Ids encode(const WordPieceModel& m, std::string_view word) {
  Ids out{99};  // ids are appended
  m.encode_word(word, out);
  return {out.begin() + 1, out.end()};
}

TEST(WordPieceModel, GreedyLongestMatchFirstWithTheContinuingPrefix) {
  auto m = model();
  EXPECT_EQ(encode(m, "unaffable"), (Ids{1, 2, 3}));
  EXPECT_EQ(encode(m, "aaa"), (Ids{5, 4, 4}));
  EXPECT_EQ(encode(m, "unaffablex"), (Ids{0}));  // one part unknown: the whole word is [UNK]
  EXPECT_EQ(encode(m, "affable"), (Ids{0}));     // "aff" only exists as a continuation
  auto at = model(100, "@@");
  EXPECT_EQ(encode(at, "unaffable"), (Ids{1, 2, 3}));
}

TEST(WordPieceModel, WordsLongerThanTheLimitInCharactersAreUnknown) {
  auto m = model(3);
  EXPECT_EQ(encode(m, "\xC3\xA9\xC3\xA9\xC3\xA9"), (Ids{6, 7, 7}));  // 3 characters, 6 bytes
  EXPECT_EQ(encode(m, "aaaa"), (Ids{0}));
  EXPECT_EQ(encode(m, "aaa"), (Ids{5, 4, 4}));
}

std::string decode(const Decoder& d, V tokens) { return d.decode(std::move(tokens)); }

TEST(WordPieceDecoder, JoinsSubwordsSpacesWordsAndCleansUpAsHf) {
  Decoder d;
  d.add_wordpiece("##", true);
  EXPECT_EQ(decode(d, {"un", "##aff", "##able", "!"}), "unaffable!");
  EXPECT_EQ(decode(d, {"##a", "b"}), "##a b");  // the first token keeps its prefix
  EXPECT_EQ(decode(d, {"hello", ",", "world", "."}), "hello, world.");
  EXPECT_EQ(decode(d, {"don", "'", "t"}), "don ' t");  // cleanup sees one token at a time
  EXPECT_EQ(decode(d, {"a", "##b##c"}), "ab##c");
  Decoder raw;
  raw.add_wordpiece("##", false);
  EXPECT_EQ(decode(raw, {"hello", ",", "world"}), "hello , world");
}

nlohmann::json bert_tokenizer() {
  nlohmann::json vocab = {{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}, {"hi", 4}, {"##s", 5}};
  nlohmann::json added = nlohmann::json::array();
  for (int id = 0; id < 4; ++id) {
    std::string content = id == 0 ? "[PAD]" : id == 1 ? "[UNK]" : id == 2 ? "[CLS]" : "[SEP]";
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "BertNormalizer"},
            {"clean_text", true},
            {"handle_chinese_chars", true},
            {"strip_accents", nullptr},
            {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}}},
          {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
          {"model",
           {{"type", "WordPiece"},
            {"unk_token", "[UNK]"},
            {"continuing_subword_prefix", "##"},
            {"max_input_chars_per_word", 100},
            {"vocab", vocab}}}};
}

Tokenizer load(const nlohmann::json& json) { return Tokenizer::from_json(json.dump(), "tok.json"); }

TEST(WordPieceTokenizer, PostProcessorsWrapOneSequence) {
  auto json = bert_tokenizer();
  auto bert = load(json);
  EXPECT_EQ(bert.encode("His"), (Ids{4, 5}));
  EXPECT_EQ(bert.encode_with_special_tokens("His"), (Ids{2, 4, 5, 3}));
  EXPECT_EQ(bert.bos_id(), 2);  // no BOS or EOS by name: the post-processor's [CLS] and [SEP]
  EXPECT_EQ(bert.eos_id(), 3);
  json["post_processor"] = {{"type", "Sequence"},
                            {"processors",
                             {{{"type", "ByteLevel"}, {"trim_offsets", true}},
                              {{"type", "TemplateProcessing"},
                               {"single",
                                {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                 {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}},
                                 {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
                               {"pair", nlohmann::json::array()},
                               {"special_tokens",
                                {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
                                 {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}},
                              {{"type", "ByteLevel"}, {"trim_offsets", true}}}}};
  auto templated = load(json);
  EXPECT_EQ(templated.encode_with_special_tokens("hi"), (Ids{2, 4, 3, 3}));
  EXPECT_EQ(templated.bos_id(), 2);
  EXPECT_EQ(templated.eos_id(), std::nullopt);  // two tokens after the sequence: neither is the EOS
  // HF would wrap each piece of the template's output again ([UNK] [CLS] [PAD] [PAD] hi [PAD] ...).
  json["post_processor"]["processors"][2] = {
      {"type", "RobertaProcessing"}, {"sep", {"[PAD]", 0}}, {"cls", {"[UNK]", 1}}};
  EXPECT_THROW(load(json), Error);
}

std::string error_of(const nlohmann::json& json) {
  try {
    load(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_mentions(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    EXPECT_NE(message.find(p), std::string::npos) << "missing \"" << p << "\" in: " << message;
}

TEST(WordPieceTokenizer, UnsupportedOrBrokenPartsAreRefusedByName) {
  EXPECT_EQ(error_of(bert_tokenizer()), "(no error)");
  auto json = bert_tokenizer();
  json["model"]["unk_token"] = "<unk>";
  expect_mentions(error_of(json), {"tok.json", "/model/unk_token", "<unk>", "not in /model/vocab"});
  json = bert_tokenizer();
  json["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  expect_mentions(error_of(json), {"/pre_tokenizer", "ByteLevel", "WordPiece"});
  json = bert_tokenizer();
  json["model"]["max_input_chars_per_word"] = -1;
  expect_mentions(error_of(json), {"/model/max_input_chars_per_word", "non-negative integer"});
  json = bert_tokenizer();
  json["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
  expect_mentions(error_of(json), {"/pre_tokenizer/type", "WhitespaceSplit", "BertPreTokenizer"});
  json = bert_tokenizer();
  json["normalizer"]["lowercase"] = "yes";
  expect_mentions(error_of(json), {"/normalizer/lowercase", "true or false"});

  auto template_json = [](nlohmann::json single) {
    auto with_template = bert_tokenizer();
    with_template["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", std::move(single)},
        {"pair", nlohmann::json::array()},
        {"special_tokens", {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}}}}};
    return with_template;
  };
  expect_mentions(error_of(template_json({{{"Sequence", {{"id", "B"}, {"type_id", 0}}}}})),
                  {"/post_processor/single/0/Sequence/id", "\"B\"", "only $A"});
  expect_mentions(error_of(template_json({{{"Sequence", {{"id", "A"}, {"type_id", 1}}}}})),
                  {"/post_processor/single/0/Sequence/type_id", "is 1", "only 0"});
  expect_mentions(error_of(template_json({{{"SpecialToken", {{"id", "[X]"}, {"type_id", 0}}}},
                                          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})),
                  {"/post_processor/special_tokens/[X]", "missing"});
  expect_mentions(error_of(template_json({{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}}})),
                  {"/post_processor/single", "no $A"});
  json = bert_tokenizer();
  json["post_processor"]["cls"] = {"[CLS]", 77};
  expect_mentions(error_of(json), {"/post_processor", "77", "no token"});
  json = bert_tokenizer();
  json["post_processor"] = {{"type", "Sequence"},
                            {"processors", {json["post_processor"], json["post_processor"]}}};
  expect_mentions(error_of(json),
                  {"/post_processor/processors/1", "BertProcessing after another", "one such step"});
  json = bert_tokenizer();
  json["post_processor"] = {{"type", "Custom"}};
  expect_mentions(error_of(json), {"/post_processor/type", "Custom", "BertProcessing", "TemplateProcessing"});
}

}  // namespace
}  // namespace pt
