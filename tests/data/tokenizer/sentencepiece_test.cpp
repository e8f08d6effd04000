// The pieces of SentencePiece-style tokenizers, each against what HF `tokenizers` 0.23 gives for the
// same input (checked with its Python API): Prepend/Replace normalizers and the offsets Metaspace's
// prepend_scheme "first" looks at, the Metaspace pre-tokenizer, BPE over characters with byte fallback
// and unk, and the decoders.
#include "data/tokenizer/bpe.h"
#include "data/tokenizer/decoder.h"
#include "data/tokenizer/normalizer.h"
#include "data/tokenizer/pretokenizer.h"
#include "data/tokenizer/tokenizer.h"
#include "fixtures.h"

#include <gtest/gtest.h>

#include <random>

namespace pt {
namespace {

using V = std::vector<std::string>;
using Ids = std::vector<int32_t>;

std::shared_ptr<const Regex> regex(const char* pattern) {
  return std::make_shared<const Regex>(pattern, "test");
}

// The normalized text, and whether its first character still comes from the input's offset 0.
std::pair<std::string, bool> normalize(const Normalizer& n, std::string_view text) {
  bool at_start = true;
  std::string out = n.apply(text, &at_start);
  return {out, at_start};
}

TEST(SentencePieceNormalizer, Llama2PrependsToNonEmptyTextAndReplacesSpaces) {
  Normalizer n;
  n.add_prepend("▁");
  n.add_replace(" ", "▁");
  EXPECT_EQ(n.apply(""), "");
  EXPECT_EQ(n.apply("a b"), "▁a▁b");
  EXPECT_EQ(n.apply(" "), "▁▁");
}

TEST(SentencePieceNormalizer, ReplaceByLiteralOrRegexLeftToRight) {
  Normalizer literal;
  literal.add_replace("ab", "x");
  EXPECT_EQ(literal.apply("aabab"), "axx");
  Normalizer trim;  // transformers' conversion of SentencePiece's remove_extra_whitespaces
  trim.add_replace(regex(R"(\A +| +\z)"), "");
  trim.add_replace(regex(" {2,}"), " ");
  EXPECT_EQ(trim.apply("  a   b\t  c  "), "a b\t c");
  EXPECT_EQ(trim.apply("   "), "");
}

TEST(SentencePieceNormalizer, UnicodeFormsLeaveCharactersHfDoesNotKnow) {
  Normalizer nfkc({NormalForm::NFKC});
  EXPECT_EQ(nfkc.apply("\xEF\xAC\x81\xC2\xB2"), "fi2");  // U+FB01 U+00B2
  // U+1E030 (Unicode 15) has a compatibility decomposition HF's tables predate.
  EXPECT_EQ(nfkc.apply("a\xF0\x9E\x80\xB0"), "a\xF0\x9E\x80\xB0");
  Normalizer nfd({NormalForm::NFD});
  EXPECT_EQ(nfd.apply("\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(nfd.apply("\xF0\x91\xA4\xB8"), "\xF0\x91\xA4\xB8");  // U+11938: HF keeps it whole
}

TEST(SentencePieceNormalizer, TracksWhetherTheTextStillBeginsAtTheInputStart) {
  Normalizer replace_front;  // the replacement belongs to the last character it removed ("y")
  replace_front.add_replace(regex("xy"), "Z");
  EXPECT_EQ(normalize(replace_front, "xyab"), std::make_pair(std::string("Zab"), false));
  Normalizer drop;
  drop.add_replace("x", "");
  EXPECT_EQ(normalize(drop, "xab"), std::make_pair(std::string("ab"), false));
  EXPECT_EQ(normalize(drop, "abx"), std::make_pair(std::string("ab"), true));

  Normalizer nfkc_trim;  // NFKC turns U+037A into " \u0345": both come from the first character
  nfkc_trim.add_normal_form(NormalForm::NFKC);
  nfkc_trim.add_replace(regex(R"(\A )"), "");
  EXPECT_EQ(normalize(nfkc_trim,
                      "\xCD\xBA"
                      "ab"),
            std::make_pair(std::string("\xCD\x85"
                                       "ab"),
                           true));
  // With an accent after it, NFKC reorders: the accent (from offset 2) now follows the space.
  EXPECT_EQ(normalize(nfkc_trim,
                      "\xCD\xBA\xCC\x81"
                      "ab"),
            std::make_pair(std::string("\xCC\x81\xCD\x85"
                                       "ab"),
                           false));
  Normalizer nfkc_trim2;  // U+0384 gives " \u0301", all removed: "a" comes from offset 2
  nfkc_trim2.add_normal_form(NormalForm::NFKC);
  nfkc_trim2.add_replace(regex(R"(\A .)"), "");
  EXPECT_EQ(normalize(nfkc_trim2,
                      "\xCE\x84"
                      "ab"),
            std::make_pair(std::string("ab"), false));

  Normalizer prepend_then_drop;
  prepend_then_drop.add_prepend("q");
  prepend_then_drop.add_replace(regex(R"(\Aq)"), "");
  EXPECT_EQ(normalize(prepend_then_drop, "ab"), std::make_pair(std::string("ab"), true));
  Normalizer prepend_then_drop_more;
  prepend_then_drop_more.add_prepend("q");
  prepend_then_drop_more.add_replace(regex(R"(\Aqa)"), "");
  EXPECT_EQ(normalize(prepend_then_drop_more, "ab"), std::make_pair(std::string("b"), false));

  Normalizer nfd_drop;  // NFD splits "é"; the accent left over still comes from offset 0
  nfd_drop.add_normal_form(NormalForm::NFD);
  nfd_drop.add_replace(regex(R"(\Ae)"), "");
  EXPECT_EQ(normalize(nfd_drop,
                      "\xC3\xA9"
                      "b"),
            std::make_pair(std::string("\xCC\x81"
                                       "b"),
                           true));

  bool at_start = false;  // text that does not begin the input never does after a Prepend
  Normalizer prepend;
  prepend.add_prepend("q");
  EXPECT_EQ(prepend.apply("a", &at_start), "qa");
  EXPECT_FALSE(at_start);
}

std::vector<std::string> split(const PreTokenizer& p, std::string_view text, bool at_start = true) {
  Pieces pieces;
  p.split(text, pieces, at_start);
  return {pieces.list.begin(), pieces.list.end()};
}

PreTokenizer metaspace(PrependScheme scheme, bool split_pieces) {
  PreTokenizer p;
  p.add_metaspace("▁", scheme, split_pieces);
  return p;
}

TEST(Metaspace, ReplacesSpacesPrependsAndSplitsBeforeEachReplacement) {
  auto p = metaspace(PrependScheme::Always, true);
  EXPECT_EQ(split(p, "Hey  friend!"), (V{"▁Hey", "▁", "▁friend!"}));
  EXPECT_EQ(split(p, "  a"), (V{"▁", "▁a"}));
  EXPECT_EQ(split(p, "a▁b"), (V{"▁a", "▁b"}));  // a "▁" in the input counts as one
  EXPECT_EQ(split(p, "▁x"), (V{"▁x"}));
  EXPECT_EQ(split(p, "a\tb\nc"), (V{"▁a\tb\nc"}));  // only U+0020 is a space here
  EXPECT_EQ(split(p, " "), (V{"▁"}));
  EXPECT_EQ(split(p, ""), V{});
  EXPECT_EQ(split(p, "x", false), (V{"▁x"}));  // always, wherever the text stands
}

TEST(Metaspace, PrependSchemesFirstAndNever) {
  auto first = metaspace(PrependScheme::First, false);
  EXPECT_EQ(split(first, "hi there"), (V{"▁hi▁there"}));
  EXPECT_EQ(split(first, "hi there", false), (V{"hi▁there"}));  // after a special token
  EXPECT_EQ(split(first, " hi"), (V{"▁hi"}));
  auto never = metaspace(PrependScheme::Never, true);
  EXPECT_EQ(split(never, "a b"), (V{"a", "▁b"}));
  EXPECT_EQ(split(never, " a"), (V{"▁a"}));
}

TEST(Metaspace, FirstLooksAtTheOffsetAfterEarlierSteps) {
  // HF: Sequence[Split("x", removed), Metaspace(first)] on "xab" gives "ab" at offset 1: no prefix.
  PreTokenizer p;
  p.add_split(regex("x"), SplitBehavior::Removed, false);
  p.add_metaspace("▁", PrependScheme::First, true);
  EXPECT_EQ(split(p, "xab"), (V{"ab"}));
  EXPECT_EQ(split(p, "axb"), (V{"▁a", "b"}));
  EXPECT_EQ(split(p, "xa b"), (V{"a", "▁b"}));
}

// <unk>=0, a=1, b=2, ab=3, <0xC3>=4, <0xA9>=5: "é" only by byte fallback, other characters unknown.
BpeModel char_model(bool fuse_unk, bool byte_fallback = true) {
  StringMap<int32_t> vocab{{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}, {"<0xC3>", 4}, {"<0xA9>", 5}};
  BpeOptions options;
  options.utf8_symbols = true;
  options.byte_fallback = byte_fallback;
  options.unk_id = 0;
  options.fuse_unk = fuse_unk;
  return BpeModel(std::move(vocab), {{1, 2, 3}}, options);
}

Ids encode(const BpeModel& bpe, std::string_view word) {
  Ids out;
  bpe.encode_word(word, out);
  return out;
}

TEST(BpeByteFallback, UnknownCharactersBecomeTheirByteTokensElseUnk) {
  auto bpe = char_model(false);
  EXPECT_EQ(encode(bpe, "ab"), (Ids{3}));
  EXPECT_EQ(encode(bpe, "\xC3\xA9"), (Ids{4, 5}));
  EXPECT_EQ(encode(bpe,
                   "a\xC3\xA9"
                   "b"),
            (Ids{1, 4, 5, 2}));  // no merge across the fallback
  EXPECT_EQ(encode(bpe,
                   "\xE6\x97\xA5"
                   "a"),
            (Ids{0, 1}));  // not all of its bytes have tokens
  EXPECT_EQ(encode(bpe, "a??b"), (Ids{1, 0, 0, 2}));
  EXPECT_EQ(encode(bpe, "\xFF"), (Ids{0}));  // an invalid byte is a symbol too
}

TEST(BpeByteFallback, AnUnkWaitsForTheNextKnownCharacterAsInHf) {
  // HF emits byte-fallback tokens before a pending unk, and fuse_unk fuses across them.
  EXPECT_EQ(encode(char_model(false), "?\xC3\xA9"), (Ids{4, 5, 0}));
  EXPECT_EQ(encode(char_model(false), "??\xC3\xA9?"), (Ids{0, 4, 5, 0, 0}));
  EXPECT_EQ(encode(char_model(true), "??\xC3\xA9?"), (Ids{4, 5, 0}));
  EXPECT_EQ(encode(char_model(true), "a??b"), (Ids{1, 0, 2}));
}

TEST(BpeByteFallback, SymbolsAreWholeCharacters) {
  StringMap<int32_t> vocab{{"\xC3\xA9", 0}, {"t", 1}, {"\xC3\xA9t", 2}};
  BpeOptions options;
  options.utf8_symbols = true;
  BpeModel bpe(std::move(vocab), {{0, 1, 2}}, options);
  EXPECT_EQ(encode(bpe, "\xC3\xA9t\xC3\xA9"), (Ids{2, 0}));
  EXPECT_EQ(encode(bpe, "x\xC3\xA9"), (Ids{0}));  // no unk token: unknown characters are dropped
}

TEST(SentencePieceDecoder, ByteFallbackRuns) {
  Decoder d;
  d.add_byte_fallback();
  EXPECT_EQ(d.decode({"<0xE6>", "<0x97>", "<0xA5>", "a"}),
            "\xE6\x97\xA5"
            "a");
  EXPECT_EQ(d.decode({"<0xE5>", "<0x8f>", "a", "<0x41>"}),
            "\xEF\xBF\xBD\xEF\xBF\xBD"
            "aA");  // one U+FFFD per token
  EXPECT_EQ(d.decode({"<0xED>", "<0xA0>", "<0x80>"}), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(d.decode({"<0x+A>", "<0xZZ>", "<0x414>"}), "\n<0xZZ><0x414>");  // Rust's u8 parse takes '+'
}

TEST(SentencePieceDecoder, StripCountsCharactersPerToken) {
  Decoder d;
  d.add_strip("H", 1, 0);
  EXPECT_EQ(d.decode({"Hey", " friend!", "HHH"}), "ey friend!HH");
  Decoder tail;
  tail.add_strip(" ", 2, 3);
  EXPECT_EQ(tail.decode({"  a  ", " b    "}), "ab ");
  Decoder fused;  // Llama-2: one leading space off the whole text
  fused.add_fuse();
  fused.add_strip(" ", 1, 0);
  EXPECT_EQ(fused.decode({" a", " b"}), "a b");
}

TEST(SentencePieceDecoder, MetaspaceDropsTheFirstTokensReplacementsWhenItPrepends) {
  Decoder d;
  d.add_metaspace("▁", true);
  EXPECT_EQ(d.decode({"▁▁Hey", "▁friend", "▁"}), "Hey friend ");
  Decoder never;
  never.add_metaspace("▁", false);
  EXPECT_EQ(never.decode({"▁▁Hey", "▁friend", "▁"}), "  Hey friend ");
}

TEST(SentencePieceDecoder, Llama2ChainAndTheOthers) {
  Decoder llama2;
  llama2.add_replace("▁", " ");
  llama2.add_byte_fallback();
  llama2.add_fuse();
  llama2.add_strip(" ", 1, 0);
  EXPECT_EQ(llama2.decode({"▁Hello", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "▁", "</s>"}),
            "Hello\xF0\x9F\x98\x80 </s>");
  EXPECT_EQ(llama2.decode({}), "");
  Decoder by_regex;
  by_regex.add_replace(regex("▁+"), "_");
  EXPECT_EQ(by_regex.decode({"▁▁a▁", "b"}), "_a_b");
  EXPECT_EQ(Decoder::none().decode({"▁a", "b"}), "▁a b");  // no decoder: HF joins with spaces
  Decoder byte_level;
  byte_level.add_byte_level();
  EXPECT_EQ(byte_level.decode({"\xC4\xA0hi", "<|x|>", "a b"}), " hi<|x|>a b");
}

// Llama-2's pipeline on a tiny vocabulary: <unk>=0 <s>=1 </s>=2 ▁=3 h=4 i=5 ▁h=6 ▁hi=7, bytes from 8.
nlohmann::json tiny_llama2() {
  auto json = test::sp_tokenizer({"<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi"},
                                 {{"▁", "h"}, {"▁h", "i"}}, true);
  json["model"]["unk_token"] = "<unk>";
  json["model"]["fuse_unk"] = true;
  json["normalizer"] = {{"type", "Sequence"},
                        {"normalizers",
                         {{{"type", "Prepend"}, {"prepend", "▁"}},
                          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
  json["decoder"] = {{"type", "Sequence"},
                     {"decoders",
                      {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                       {{"type", "ByteFallback"}},
                       {{"type", "Fuse"}},
                       {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  json["added_tokens"] = {{{"id", 0}, {"content", "<unk>"}, {"special", true}, {"normalized", false}},
                          {{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
                          {{"id", 2}, {"content", "</s>"}, {"special", true}, {"normalized", false}}};
  return json;
}

TEST(SentencePieceTokenizer, Llama2PipelineEndToEnd) {
  auto t = Tokenizer::from_json(tiny_llama2().dump(), "llama2");
  EXPECT_EQ(t.encode("hi hi"), (Ids{7, 7}));
  EXPECT_EQ(t.encode(" hi"), (Ids{3, 7}));
  EXPECT_EQ(t.encode("hi<s>hi"), (Ids{7, 1, 7}));  // the prefix goes on every run of text
  EXPECT_EQ(t.encode("\xC3\xA9"), (Ids{3, 8 + 0xC3, 8 + 0xA9}));
  EXPECT_EQ(t.encode(""), Ids{});
  EXPECT_EQ(t.decode(t.encode("hi \xC3\xA9 hi")), "hi \xC3\xA9 hi");
  EXPECT_EQ(t.decode(Ids{1, 7, 2}), "<s> hi</s>");
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.id_to_token(8 + 0x0A), "<0x0A>");
}

TEST(SentencePieceTokenizer, MetaspaceFirstPrefixesOnlyTheStartOfTheInput) {
  auto json = tiny_llama2();
  json["normalizer"] = nullptr;
  json["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
  auto t = Tokenizer::from_json(json.dump(), "mistral");
  EXPECT_EQ(t.encode("hi hi"), (Ids{7, 7}));
  EXPECT_EQ(t.encode("<s>hi"), (Ids{1, 4, 5}));
  EXPECT_EQ(t.encode("hi<s>hi"), (Ids{7, 1, 4, 5}));
  EXPECT_EQ(t.encode("<s> hi"), (Ids{1, 7}));
}

Ids continuation(const Tokenizer& t, std::string_view text) {
  Ids out;
  t.encode_continuation_append(text, out);
  return out;
}

TEST(SentencePieceTokenizer, ContinuationsGetNoPrefixUntilAnAddedToken) {
  auto llama2 = Tokenizer::from_json(tiny_llama2().dump(), "llama2");
  EXPECT_EQ(continuation(llama2, "hi"), (Ids{4, 5}));
  EXPECT_EQ(continuation(llama2, " hi"), (Ids{7}));
  EXPECT_EQ(continuation(llama2, "hi<s>hi"), (Ids{4, 5, 1, 7}));  // HF prefixes every run of text
  EXPECT_EQ(continuation(llama2, ""), Ids{});
  auto json = tiny_llama2();
  json["normalizer"] = nullptr;
  json["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
  auto mistral = Tokenizer::from_json(json.dump(), "mistral");
  EXPECT_EQ(continuation(mistral, "hi"), (Ids{4, 5}));
  EXPECT_EQ(continuation(mistral, " hi"), (Ids{7}));
  EXPECT_EQ(continuation(mistral, "hi<s>hi"), (Ids{4, 5, 1, 4, 5}));  // "first": not the input's start
  json["pre_tokenizer"]["prepend_scheme"] = "always";
  auto always = Tokenizer::from_json(json.dump(), "always");
  EXPECT_EQ(continuation(always, "hi<s>hi"), (Ids{4, 5, 1, 7}));
}

TEST(SentencePieceTokenizer, ContinuationsGetNoByteLevelPrefixSpaceEither) {
  // gpt2_options is gpt2 with add_prefix_space (and added tokens).
  auto gpt2 = Tokenizer::from_file(test::tokenizer_fixture("gpt2.tokenizer.json"));
  auto prefixed = Tokenizer::from_file(test::tokenizer_fixture("gpt2_options.tokenizer.json"));
  EXPECT_EQ(prefixed.encode("good day"), gpt2.encode(" good day"));
  EXPECT_EQ(continuation(prefixed, "good day"), gpt2.encode("good day"));
  EXPECT_EQ(continuation(gpt2, "hello world"), gpt2.encode("hello world"));
}

class ContinuationTest : public testing::TestWithParam<std::string> {};

// SentencePiece pieces never hold a "▁" after their start (unless all "▁"), so text split before a
// space between two words encodes as the whole does.
TEST_P(ContinuationTest, ContinuingAtASpaceEncodesAsTheWhole) {
  auto t = Tokenizer::from_file(test::tokenizer_fixture(GetParam() + ".tokenizer.json"));
  static const std::vector<std::string> words = {
      "the",         "Quick", "fox.", "jumps,", "12345", "\xE6\x97\xA5\xE6\x9C\xAC", "\xF0\x9F\x98\x80",
      "caf\xC3\xA9", "(x)",   "over", "lazy",   "dog!"};
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string a = words[rng() % words.size()], b;
    for (int n = static_cast<int>(rng() % 6); n-- > 0;) a += " " + words[rng() % words.size()];
    for (int n = 1 + static_cast<int>(rng() % 6); n-- > 0;) b += " " + words[rng() % words.size()];
    Ids split = t.encode(a);
    t.encode_continuation_append(b, split);
    EXPECT_EQ(split, t.encode(a + b)) << a << "|" << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ContinuationTest,
                         testing::Values("sp_llama2", "sp_mistral", "sp_gemma", "sp_metaspace_legacy"));

}  // namespace
}  // namespace pt
