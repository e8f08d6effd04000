// A bounded, thread-safe cache from pre-token bytes to its BPE ids. Sharded by hash so threads encoding
// in parallel rarely contend; a full shard is simply cleared (natural text re-fills it with its common
// words within a few kilobytes).
#pragma once

#include "data/tokenizer/string_map.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

namespace pt {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 256;  // longer words are rare and not worth keeping

  // Appends the cached ids of `word` to `out` and returns true, or returns false.
  bool lookup(std::string_view word, std::vector<int32_t>& out) const {
    Shard& s = shard(word);
    std::lock_guard lock(s.mutex);
    auto it = s.map.find(word);
    if (it == s.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }

  void insert(std::string_view word, std::span<const int32_t> ids) const {
    if (word.size() > kMaxWordBytes) return;
    Shard& s = shard(word);
    std::lock_guard lock(s.mutex);
    if (s.map.size() >= kEntriesPerShard) s.map.clear();
    s.map.try_emplace(std::string(word), ids.begin(), ids.end());
  }

 private:
  static constexpr size_t kShards = 64, kEntriesPerShard = 4096;
  struct Shard {
    std::mutex mutex;
    StringMap<std::vector<int32_t>> map;
  };
  Shard& shard(std::string_view word) const { return shards_[StringHash{}(word) % kShards]; }

  mutable std::array<Shard, kShards> shards_;
};

}  // namespace pt
