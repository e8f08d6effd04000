#include "data/tokenizer/bpe_trainer.h"

#include "data/tokenizer/byte_level.h"

#include <algorithm>
#include <array>
#include <unordered_map>

namespace pt {

namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
int32_t left_of(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

struct Word {
  std::vector<int32_t> symbols;
  int64_t count;
};

struct Candidate {
  int64_t count;
  uint64_t pair;
  // Max-heap order: higher count first, then the smaller pair.
  bool operator<(const Candidate& o) const { return count != o.count ? count < o.count : pair > o.pair; }
};

class PairStats {
 public:
  void add(uint64_t pair, int64_t delta, int32_t word) {
    counts_[pair] += delta;
    if (delta > 0) where_[pair].push_back(word);
  }
  int64_t count(uint64_t pair) const {
    auto it = counts_.find(pair);
    return it == counts_.end() ? 0 : it->second;
  }
  // The words that contained `pair` at some point (sorted, unique), and forget them.
  std::vector<int32_t> take_words(uint64_t pair) {
    auto node = where_.extract(pair);
    if (node.empty()) return {};
    auto& words = node.mapped();
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    return std::move(words);
  }
  const std::unordered_map<uint64_t, int64_t>& counts() const { return counts_; }

 private:
  std::unordered_map<uint64_t, int64_t> counts_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
};

// Merges every (a, b) in the word into c, left to right, recording the pair-count changes.
void merge_in_word(Word& word, int32_t index, int32_t a, int32_t b, int32_t c, PairStats& stats,
                   std::vector<uint64_t>& created) {
  auto& s = word.symbols;
  const int64_t f = word.count;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != a || s[i + 1] != b) continue;
    if (i > 0) {
      stats.add(pair_key(s[i - 1], a), -f, index);
      stats.add(pair_key(s[i - 1], c), f, index);
      created.push_back(pair_key(s[i - 1], c));
    }
    if (i + 2 < s.size()) {
      stats.add(pair_key(b, s[i + 2]), -f, index);
      stats.add(pair_key(c, s[i + 2]), f, index);
      created.push_back(pair_key(c, s[i + 2]));
    }
    stats.add(pair_key(a, b), -f, index);
    s[i] = c;
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }
}

}  // namespace

int32_t byte_token_id(uint8_t byte) {
  static const std::array<int32_t, 256> ids = [] {
    std::array<uint8_t, 256> order{};
    for (int b = 0; b < 256; ++b) order[static_cast<size_t>(b)] = static_cast<uint8_t>(b);
    std::sort(order.begin(), order.end(),
              [](uint8_t x, uint8_t y) { return byte_level_codepoint(x) < byte_level_codepoint(y); });
    std::array<int32_t, 256> result{};
    for (int i = 0; i < 256; ++i) result[order[static_cast<size_t>(i)]] = i;
    return result;
  }();
  return ids[byte];
}

LearnedBpe learn_bpe(const StringMap<int64_t>& word_counts, int32_t target_tokens,
                     const std::function<void(int32_t)>& on_progress) {
  LearnedBpe out;
  out.tokens.resize(256);
  for (int b = 0; b < 256; ++b)
    out.tokens[static_cast<size_t>(byte_token_id(static_cast<uint8_t>(b)))] =
        std::string(1, static_cast<char>(b));
  StringMap<int32_t> token_ids;
  for (int32_t id = 0; id < 256; ++id) token_ids.emplace(out.tokens[static_cast<size_t>(id)], id);

  // Words in byte order, so the result does not depend on hash-map iteration order.
  std::vector<std::pair<std::string_view, int64_t>> sorted(word_counts.begin(), word_counts.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<Word> words;
  words.reserve(sorted.size());
  PairStats stats;
  for (const auto& [text, count] : sorted) {
    Word w{{}, count};
    for (char ch : text) w.symbols.push_back(byte_token_id(static_cast<uint8_t>(ch)));
    auto index = static_cast<int32_t>(words.size());
    for (size_t i = 0; i + 1 < w.symbols.size(); ++i)
      stats.add(pair_key(w.symbols[i], w.symbols[i + 1]), count, index);
    words.push_back(std::move(w));
  }

  std::vector<Candidate> heap;
  for (const auto& [pair, count] : stats.counts()) heap.push_back({count, pair});
  std::make_heap(heap.begin(), heap.end());
  std::vector<uint64_t> created;
  while (static_cast<int32_t>(out.tokens.size()) < target_tokens && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    Candidate top = heap.back();
    heap.pop_back();
    int64_t current = stats.count(top.pair);
    if (current != top.count) {  // stale: counts only fall after an entry is pushed
      if (current > 0) {
        heap.push_back({current, top.pair});
        std::push_heap(heap.begin(), heap.end());
      }
      continue;
    }
    if (current <= 0) break;
    int32_t a = left_of(top.pair), b = right_of(top.pair);
    std::string merged = out.tokens[static_cast<size_t>(a)] + out.tokens[static_cast<size_t>(b)];
    // Two merge paths can spell the same token; it keeps its first id, as in HF.
    auto [it, fresh] = token_ids.try_emplace(merged, static_cast<int32_t>(out.tokens.size()));
    if (fresh) out.tokens.push_back(merged);
    int32_t c = it->second;
    out.merges.emplace_back(a, b);

    created.clear();
    for (int32_t w : stats.take_words(top.pair))
      merge_in_word(words[static_cast<size_t>(w)], w, a, b, c, stats, created);
    std::sort(created.begin(), created.end());
    created.erase(std::unique(created.begin(), created.end()), created.end());
    for (uint64_t pair : created) {
      int64_t count = stats.count(pair);
      if (count <= 0) continue;
      heap.push_back({count, pair});
      std::push_heap(heap.begin(), heap.end());
    }
    if (on_progress) on_progress(static_cast<int32_t>(out.tokens.size()));
  }
  return out;
}

}  // namespace pt
