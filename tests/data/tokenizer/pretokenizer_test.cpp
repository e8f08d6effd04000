#include "data/tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

std::vector<std::string> split(const PreTokenizer& p, std::string_view text) {
  Pieces pieces;
  p.split(text, pieces);
  return {pieces.list.begin(), pieces.list.end()};
}

PreTokenizer byte_level(bool add_prefix_space) {
  PreTokenizer p;
  p.add_byte_level(add_prefix_space, true);
  return p;
}

PreTokenizer split_only(const char* pattern, SplitBehavior behavior, bool invert = false) {
  PreTokenizer p;
  p.add_split(std::make_shared<const Regex>(pattern, "test"), behavior, invert);
  return p;
}

using V = std::vector<std::string>;

TEST(PreTokenizer, Gpt2PatternSplitsWordsContractionsAndWhitespace) {
  auto p = byte_level(false);
  EXPECT_EQ(split(p, "Hello world's  end"), (V{"Hello", " world", "'s", " ", " end"}));
  EXPECT_EQ(split(p, "a  \n\tb  "), (V{"a", "  \n", "\t", "b", "  "}));
  EXPECT_EQ(split(p, "x 123 !?"), (V{"x", " 123", " !?"}));
  EXPECT_EQ(split(p, "DON'T"), (V{"DON", "'", "T"}));  // GPT-2's contractions are lower case only
  EXPECT_EQ(split(p, ""), V{});
}

TEST(PreTokenizer, WhitespaceBeforeAWordLeavesItsLastSpaceToTheWord) {
  auto p = byte_level(false);
  EXPECT_EQ(split(p, "a   b"), (V{"a", "  ", " b"}));
}

TEST(PreTokenizer, AddPrefixSpaceOnlyWhenMissing) {
  auto p = byte_level(true);
  EXPECT_EQ(split(p, "hi there"), (V{" hi", " there"}));
  EXPECT_EQ(split(p, " hi"), (V{" hi"}));
}

TEST(PreTokenizer, Llama3PatternCaseInsensitiveContractionsAndDigitTriples) {
  auto p = split_only(kLlama3Pattern, SplitBehavior::Isolated);
  EXPECT_EQ(split(p, "I'M 12345 ok\r\n\r\nx"), (V{"I", "'M", " ", "123", "45", " ok", "\r\n\r\n", "x"}));
}

TEST(PreTokenizer, NelCountsAsWhitespaceAsInOniguruma) {
  // PCRE2's \s lacks U+0085; without the rewrite "!" and NEL would form one punctuation run.
  auto p = byte_level(false);
  EXPECT_EQ(split(p, "!\xC2\x85"), (V{"!", "\xC2\x85"}));
}

TEST(PreTokenizer, InvalidUtf8BytesFallBetweenMatches) {
  auto p = byte_level(false);
  EXPECT_EQ(split(p,
                  "ab\xFF"
                  "cd"),
            (V{"ab", "\xFF", "cd"}));
  EXPECT_EQ(split(p, "\xE6\x97"), (V{"\xE6\x97"}));  // a truncated character survives as one gap
}

TEST(PreTokenizer, SplitBehavioursMatchHuggingFace) {
  // Expected values from HF tokenizers' pre_tokenize_str on "a1b22c3" with the pattern \d.
  const char* text = "a1b22c3";
  EXPECT_EQ(split(split_only(R"(\d)", SplitBehavior::Isolated), text),
            (V{"a", "1", "b", "2", "2", "c", "3"}));
  EXPECT_EQ(split(split_only(R"(\d)", SplitBehavior::Removed), text), (V{"a", "b", "c"}));
  EXPECT_EQ(split(split_only(R"(\d)", SplitBehavior::MergedWithNext), text), (V{"a", "1b", "2", "2c", "3"}));
  EXPECT_EQ(split(split_only(R"(\d)", SplitBehavior::MergedWithPrevious), text), (V{"a1", "b2", "2", "c3"}));
  EXPECT_EQ(split(split_only(R"(\d)", SplitBehavior::Contiguous), text), (V{"a", "1", "b", "22", "c", "3"}));
  EXPECT_EQ(split(split_only(R"(\d)", SplitBehavior::MergedWithPrevious, true), text),
            (V{"a", "1b", "2", "2c", "3"}));
}

TEST(PreTokenizer, LiteralSplitPatternsAreEscaped) {
  auto p = split_only(Regex::escape_literal("a.b").c_str(), SplitBehavior::Isolated);
  EXPECT_EQ(split(p, "xa.by axb"), (V{"x", "a.b", "y axb"}));
}

}  // namespace
}  // namespace pt
