#include "data/tokenizer/bpe.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

// Bytes a, b, c and the merged tokens listed; ids in that order.
BpeModel model(const std::vector<std::string>& merged_tokens,
               const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options = {}) {
  StringMap<int32_t> vocab{{"a", 0}, {"b", 1}, {"c", 2}};
  for (const auto& t : merged_tokens) vocab.emplace(t, static_cast<int32_t>(vocab.size()));
  std::vector<BpeMerge> m;
  for (const auto& [l, r] : merges) m.push_back({vocab.at(l), vocab.at(r), vocab.at(l + r)});
  return BpeModel(std::move(vocab), m, options);
}

BpeOptions options(bool ignore_merges, std::optional<int32_t> unk_id = {}, bool fuse_unk = false) {
  BpeOptions o;
  o.ignore_merges = ignore_merges;
  o.unk_id = unk_id;
  o.fuse_unk = fuse_unk;
  return o;
}

std::vector<int32_t> encode(const BpeModel& bpe, std::string_view word) {
  std::vector<int32_t> out;
  bpe.encode_word(word, out);
  return out;
}

TEST(Bpe, LowerRankMergesFirst) {
  // ids: ab=3, bc=4, abc=5
  auto ab_first = model({"ab", "bc", "abc"}, {{"a", "b"}, {"b", "c"}, {"ab", "c"}});
  EXPECT_EQ(encode(ab_first, "abc"), (std::vector<int32_t>{5}));
  auto bc_first = model({"ab", "bc", "abc"}, {{"b", "c"}, {"a", "b"}, {"ab", "c"}});
  EXPECT_EQ(encode(bc_first, "abc"), (std::vector<int32_t>{0, 4}));  // no merge joins a and bc
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  auto bpe = model({"aa"}, {{"a", "a"}});
  EXPECT_EQ(encode(bpe, "aaa"), (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(encode(bpe, "aaaa"), (std::vector<int32_t>{3, 3}));
}

TEST(Bpe, MergesChainThroughNewTokens) {
  auto bpe = model({"ab", "abab"}, {{"a", "b"}, {"ab", "ab"}});
  EXPECT_EQ(encode(bpe, "ababab"), (std::vector<int32_t>{4, 3}));
  EXPECT_EQ(encode(bpe, "ababab"), (std::vector<int32_t>{4, 3}));  // now from the word cache
}

TEST(Bpe, IgnoreMergesEmitsVocabularyWordsDirectly) {
  EXPECT_EQ(encode(model({"abc"}, {}), "abc"), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(encode(model({"abc"}, {}, options(true)), "abc"), (std::vector<int32_t>{3}));
}

TEST(Bpe, BytesMissingFromTheVocabularyUseUnkOrAreDropped) {
  EXPECT_EQ(encode(model({}, {}), "axxb"), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(encode(model({}, {}, options(false, 2)), "axxb"), (std::vector<int32_t>{0, 2, 2, 1}));
  EXPECT_EQ(encode(model({}, {}, options(false, 2, true)), "axxb"), (std::vector<int32_t>{0, 2, 1}));
}

}  // namespace
}  // namespace pt
