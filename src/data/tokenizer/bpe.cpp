#include "data/tokenizer/bpe.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <algorithm>
#include <functional>

namespace pt {

namespace {

// Length of the UTF-8 character at `pos`, or 1 for a byte that does not start a valid one.
size_t char_length(std::string_view s, size_t pos) {
  if (static_cast<uint8_t>(s[pos]) < 0x80) return 1;
  utf8proc_int32_t cp;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + pos),
                            static_cast<utf8proc_ssize_t>(std::min<size_t>(s.size() - pos, 4)), &cp);
  return n > 0 ? static_cast<size_t>(n) : 1;
}

}  // namespace

BpeModel::BpeModel(StringMap<int32_t> vocab, const std::vector<BpeMerge>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(options) {
  byte_id_.fill(-1);
  fallback_id_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(std::string_view(std::string(1, static_cast<char>(b))));
    if (it != vocab_.end()) byte_id_[static_cast<size_t>(b)] = it->second;
    if (!options_.byte_fallback) continue;
    it = vocab_.find(std::string_view(fmt::format("<0x{:02X}>", b)));
    if (it != vocab_.end()) fallback_id_[static_cast<size_t>(b)] = it->second;
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeMerge& m = merges[rank];
    // A repeated pair keeps its first (lowest) rank.
    merges_.try_emplace(key(m.left, m.right), static_cast<int32_t>(rank), m.merged);
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1 && byte_id_[static_cast<uint8_t>(word[0])] >= 0) {
    out.push_back(byte_id_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (options_.ignore_merges) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (cache_->lookup(word, out)) return;
  size_t start = out.size();
  merge_word(word, out);
  cache_->insert(word, std::span<const int32_t>(out).subspan(start));
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // neighbours in the linked list, -1 at the ends
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;  // min-heap on (rank, pos)
  symbols.clear();
  heap.clear();
  auto add = [&](int32_t id) {
    auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  // An unknown symbol's unk token waits for the next known symbol (so fuse_unk can extend it); byte
  // fallback tokens do not flush it, as in HF.
  bool unk_pending = false;
  for (size_t pos = 0; pos < word.size();) {
    size_t n = options_.utf8_symbols ? char_length(word, pos) : 1;
    std::string_view symbol = word.substr(pos, n);
    pos += n;
    int32_t id = byte_id_[static_cast<uint8_t>(symbol[0])];
    if (n > 1) {
      auto it = vocab_.find(symbol);
      id = it == vocab_.end() ? -1 : it->second;
    }
    if (id >= 0) {
      if (unk_pending) add(*options_.unk_id);
      unk_pending = false;
      add(id);
      continue;
    }
    if (options_.byte_fallback && std::all_of(symbol.begin(), symbol.end(), [&](char c) {
          return fallback_id_[static_cast<uint8_t>(c)] >= 0;
        })) {
      for (char c : symbol) add(fallback_id_[static_cast<uint8_t>(c)]);
      continue;
    }
    if (!options_.unk_id) continue;
    if (unk_pending && !options_.fuse_unk) add(*options_.unk_id);
    unk_pending = true;
  }
  if (unk_pending) add(*options_.unk_id);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  auto consider = [&](int32_t pos) {
    int32_t next = symbols[static_cast<size_t>(pos)].next;
    if (next < 0) return;
    auto it = merges_.find(key(symbols[static_cast<size_t>(pos)].id, symbols[static_cast<size_t>(next)].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.first, pos, it->second.second});
    std::push_heap(heap.begin(), heap.end(), std::greater<>{});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    // Entries go stale when a neighbour merged first; the pair must still make the same token.
    auto it = merges_.find(key(left.id, right.id));
    if (it == merges_.end() || it->second.second != top.merged) continue;
    left.id = top.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    out.push_back(symbols[static_cast<size_t>(i)].id);
}

}  // namespace pt
