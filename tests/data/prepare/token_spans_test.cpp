// Token byte ranges recovered from the tokens' bytes, and transformers' rule for which tokens a byte
// range gives loss to.
#include "prepare_test_util.h"

#include "data/prepare/token_spans.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

using Ranges = std::vector<ByteRange>;

Ranges align(std::string_view text, const std::vector<std::string>& tokens) {
  auto r = align_token_bytes(text, tokens);
  return r ? *r : Ranges{{999, 999}};
}

TEST(AlignTokenBytes, SameBytesGiveExactRanges) {
  EXPECT_EQ(align("Hello world", {"Hello", " world"}), (Ranges{{0, 5}, {5, 11}}));
  EXPECT_EQ(align("", {}), Ranges{});
  EXPECT_EQ(align("a", {"a"}), (Ranges{{0, 1}}));
}

TEST(AlignTokenBytes, BytesOnlyInTheTokensBelongWhereTheyWereAdded) {
  // SentencePiece's prefix space, on a token of its own or on the first word.
  EXPECT_EQ(align("Hello world", {" Hello", " world"}), (Ranges{{0, 5}, {5, 11}}));
  EXPECT_EQ(align("你好 x", {" ", "你好", " x"}), (Ranges{{0, 0}, {0, 6}, {6, 8}}));
  EXPECT_EQ(align("<s>[INST] hi", {"<s>", " [", "INST", "]", " hi"}),
            (Ranges{{0, 3}, {3, 4}, {4, 8}, {8, 9}, {9, 12}}));
}

TEST(AlignTokenBytes, TextNoTokenSpellsGoesToTheTokenBefore) {
  // An rstrip added token absorbs the whitespace after it, as HF's offsets say.
  EXPECT_EQ(align("a<|end|>\n\n b", {"a", "<|end|>", "b"}), (Ranges{{0, 1}, {1, 11}, {11, 12}}));
  EXPECT_EQ(align("a<|end|>\n", {"a", "<|end|>"}), (Ranges{{0, 1}, {1, 9}}));
  EXPECT_EQ(align("  a", {"a"}), (Ranges{{0, 3}}));
}

TEST(AlignTokenBytes, RewrittenStretchesAreCoveredByEveryTokenSpellingThem) {
  // NFC: "e" + U+0301 spelled as "é".
  EXPECT_EQ(align("caf"
                  "e\xCC\x81"
                  " ok",
                  {"caf", "\xC3\xA9", " ok"}),
            (Ranges{{0, 3}, {3, 6}, {6, 9}}));
  // Byte-fallback tokens of one emoji, each decoded alone to U+FFFD: all four carry the emoji.
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(align("a\xF0\x9F\x91\x8B b", {"a", fffd, fffd, fffd, fffd, " b"}),
            (Ranges{{0, 1}, {1, 5}, {1, 5}, {1, 5}, {1, 5}, {5, 7}}));
  // An unknown character spelled by the unk token.
  EXPECT_EQ(align("x\xE2\x98\x83y z", {"x", "<unk>", "y", " z"}), (Ranges{{0, 1}, {1, 4}, {4, 5}, {5, 7}}));
}

TEST(AlignTokenBytes, TokensThatDoNotSpellTheTextAreRefused) {
  // Stretches longer than 128 bytes on either side never resynchronise.
  EXPECT_FALSE(align_token_bytes(std::string(200, 'x'), {std::string(100, 'y'), std::string(100, 'y')}));
  EXPECT_FALSE(align_token_bytes(std::string(300, 'a'), {"b"}));
  EXPECT_FALSE(align_token_bytes("ok" + std::string(200, ' '), {"ok"}));
}

TEST(AlignTokenBytes, ByteLevelTokenizersAlignExactly) {
  auto tok = Tokenizer::from_file(std::string(PACKTRAIN_FIXTURES) + "/prepare/chat/tokenizer.json");
  std::string text = "<|im_start|>user\nSay héllo 👋<|im_end|>\n<|im_start|>assistant\nこんにちは<|im_end|>\n";
  auto ids = tok.encode(text);
  auto ranges = token_byte_ranges(tok, text, ids);
  ASSERT_TRUE(ranges);
  ASSERT_EQ(ranges->size(), ids.size());
  size_t at = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ((*ranges)[i].first, at);
    // A byte-level token may hold part of a character: its range is its own bytes.
    EXPECT_EQ(text.substr(at, (*ranges)[i].second - at), tok.decode(std::span(&ids[i], 1)));
    at = (*ranges)[i].second;
  }
  EXPECT_EQ(at, text.size());
}

std::vector<uint8_t> marked(const Ranges& tokens, const Ranges& spans) {
  std::vector<uint8_t> mask(tokens.size(), 0);
  mark_overlapping(tokens, spans, mask);
  return mask;
}

TEST(MarkOverlapping, TokensOverlappingASpanAsTransformersMarksThem) {
  Ranges tokens = {{0, 2}, {2, 4}, {4, 6}, {6, 8}, {8, 10}};
  using Mask = std::vector<uint8_t>;
  EXPECT_EQ(marked(tokens, {{4, 8}}), (Mask{0, 0, 1, 1, 0}));
  EXPECT_EQ(marked(tokens, {{3, 5}}), (Mask{0, 1, 1, 0, 0}));  // both tokens it cuts
  EXPECT_EQ(marked(tokens, {{0, 1}, {9, 10}}), (Mask{1, 0, 0, 0, 1}));
  EXPECT_EQ(marked(tokens, {{8, 9}, {1, 2}}), (Mask{1, 0, 0, 0, 1}));  // taken in order of their start
  EXPECT_EQ(marked(tokens, {}), (Mask{0, 0, 0, 0, 0}));
  EXPECT_EQ(marked(tokens, {{4, 4}}), (Mask{0, 0, 0, 0, 0}));  // an empty span between tokens
  EXPECT_EQ(marked(tokens, {{5, 5}}), (Mask{0, 0, 1, 0, 0}));  // ... or inside one
  // An empty token (bytes only the tokenizer added) counts when it lies strictly inside a span.
  EXPECT_EQ(marked({{0, 2}, {2, 2}, {2, 4}}, {{2, 4}}), (Mask{0, 0, 1}));
  EXPECT_EQ(marked({{0, 2}, {3, 3}, {3, 4}}, {{2, 4}}), (Mask{0, 1, 1}));
}

}  // namespace
}  // namespace pt
