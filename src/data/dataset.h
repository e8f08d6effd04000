// A prepared dataset: tokenized examples on disk, memory-mapped for reading. The format is in
// docs/formats.md: a directory with metadata.json and one folder per split (train/, val/), each
// holding tokens.bin (uint32 ids), loss_mask.bin (uint8 per token: 1 = loss is taken on this token as a
// target) and offsets.bin (uint64, examples + 1 entries). metadata.json records the format version,
// tokenizer hash, counts, a length histogram and an xxh64 checksum of every file.
#pragma once

#include "core/file.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace pt {

inline constexpr int kDatasetFormatVersion = 1;

struct Example {
  std::span<const uint32_t> tokens;
  std::span<const uint8_t> loss_mask;  // same length as tokens
  int64_t index = 0;                   // in its split: what a batch records of where a piece came from
};

// One split of a prepared dataset: read-only views over mmapped files (or, in tests and benchmarks,
// over vectors the split owns). Copies share the storage.
class DatasetSplit {
 public:
  DatasetSplit() = default;
  // offsets: examples + 1 entries, offsets[0] == 0, non-decreasing, back() == tokens.size().
  static DatasetSplit from_vectors(std::vector<uint32_t> tokens, std::vector<uint8_t> loss_mask,
                                   std::vector<uint64_t> offsets);

  int64_t size() const { return offsets_.empty() ? 0 : static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t length(int64_t i) const { return static_cast<int64_t>(offsets_[i + 1] - offsets_[i]); }
  Example example(int64_t i) const {
    auto b = offsets_[i], e = offsets_[i + 1];
    return {tokens_.subspan(b, e - b), mask_.subspan(b, e - b), i};
  }

 private:
  friend class PreparedDataset;
  std::shared_ptr<const void> storage_;  // keeps the mapped files or owned vectors alive
  std::span<const uint32_t> tokens_;
  std::span<const uint8_t> mask_;
  std::span<const uint64_t> offsets_;
};

class PreparedDataset {
 public:
  // Validates the format version, sizes and offsets, and (verify_checksums) the xxh64 of every file.
  // A truncated or tampered dataset gets a pt::Error naming the file and what is wrong.
  static PreparedDataset open(const std::string& dir, bool verify_checksums = true);

  const DatasetSplit& train() const { return train_; }
  const DatasetSplit& val() const { return val_; }
  uint64_t tokenizer_hash() const { return tokenizer_hash_; }
  int32_t vocab_size() const { return vocab_size_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  DatasetSplit train_, val_;
  uint64_t tokenizer_hash_ = 0;
  int32_t vocab_size_ = 0;
};

}  // namespace pt
