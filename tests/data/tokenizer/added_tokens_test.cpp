#include "data/tokenizer/added_tokens.h"

#include "data/tokenizer/tokenizer.h"
#include "fixtures.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

std::vector<std::pair<std::string, int32_t>> split(const AddedTokenMatcher& m, std::string_view text) {
  std::vector<TextSegment> segments;
  m.split(text, segments);
  std::vector<std::pair<std::string, int32_t>> out;
  for (const auto& s : segments) out.emplace_back(std::string(s.text), s.id);
  return out;
}

AddedTokenMatcher matcher(std::vector<AddedToken> tokens) {
  std::vector<std::string> patterns;
  for (const auto& t : tokens) patterns.push_back(t.content);
  return AddedTokenMatcher(std::move(tokens), patterns);
}

using S = std::vector<std::pair<std::string, int32_t>>;

TEST(AddedTokens, LeftmostLongestMatch) {
  auto m = matcher({{1, "<a>"}, {2, "<a>b"}, {3, "b<"}});
  EXPECT_EQ(split(m, "x<a>b<a>"), (S{{"x", -1}, {"<a>b", 2}, {"<a>", 1}}));
  EXPECT_EQ(split(m, "<a"), (S{{"<a", -1}}));
  EXPECT_EQ(split(m, ""), S{});
}

TEST(AddedTokens, StripAbsorbsWhitespaceButNotEarlierMatches) {
  AddedToken mask{7, "<m>"};
  mask.lstrip = mask.rstrip = true;
  auto m = matcher({mask});
  EXPECT_EQ(split(m, "a  <m>\t b"), (S{{"a", -1}, {"  <m>\t ", 7}, {"b", -1}}));
  EXPECT_EQ(split(m, "<m> <m>"), (S{{"<m> ", 7}, {"<m>", 7}}));
  EXPECT_EQ(split(m, "\xC2\xA0<m>"), (S{{"\xC2\xA0<m>", 7}}));  // NBSP is whitespace
}

TEST(AddedTokens, SingleWordNeedsNonWordNeighbours) {
  AddedToken ab{5, "ab"};
  ab.single_word = true;
  auto m = matcher({ab});
  EXPECT_EQ(split(m, "ab"), (S{{"ab", 5}}));
  EXPECT_EQ(split(m, " ab."), (S{{" ", -1}, {"ab", 5}, {".", -1}}));
  EXPECT_EQ(split(m, "xab"), (S{{"xab", -1}}));
  EXPECT_EQ(split(m, "_ab"), (S{{"_ab", -1}}));
  EXPECT_EQ(split(m,
                  "e\xCC\x81"
                  "ab"),
            (S{{"e\xCC\x81"
                "ab",
                -1}}));  // a combining mark is a word character
}

TEST(AddedTokens, SpecialTokensInsideTextGetTheirIds) {
  auto json = test::tiny_tokenizer({}, {});
  json["added_tokens"] = {{{"id", 256}, {"content", "<|eot|>"}, {"special", true}, {"normalized", false}}};
  auto t = Tokenizer::from_json(json.dump(), "test");
  EXPECT_EQ(t.encode("a<|eot|>b"), (std::vector<int32_t>{'a', 256, 'b'}));
  EXPECT_EQ(t.decode(t.encode("x<|eot|>")), "x<|eot|>");
  EXPECT_EQ(t.token_to_id("<|eot|>"), 256);
  EXPECT_EQ(t.vocab_size(), 257);
}

TEST(AddedTokens, NormalizedTokensMatchAfterNormalisation) {
  auto json = test::tiny_tokenizer({}, {});
  json["normalizer"] = {{"type", "NFC"}};
  // Written decomposed; the text's composed form still matches.
  json["added_tokens"] = {
      {{"id", 256}, {"content", "e\xCC\x81t\xC3\xA9"}, {"special", false}, {"normalized", true}}};
  auto t = Tokenizer::from_json(json.dump(), "test");
  EXPECT_EQ(t.encode("\xC3\xA9t\xC3\xA9!"), (std::vector<int32_t>{256, '!'}));
}

}  // namespace
}  // namespace pt
