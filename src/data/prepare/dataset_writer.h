// Appends prepared examples to a dataset directory's train/ and val/ data files (see docs/formats.md).
// Nothing is visible until commit(): files are written through temporaries and renamed at the end;
// metadata.json, the commit marker, is the caller's to write after that.
#pragma once

#include "data/prepare/checksummed_file.h"
#include "data/prepare/encoder.h"
#include "data/prepare/length_stats.h"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pt {

struct SplitSummary {
  int64_t examples = 0, tokens = 0, loss_tokens = 0;
  std::map<std::string, FileDigest> files;  // "tokens.bin", "loss_mask.bin", "offsets.bin"
};

struct WrittenDataset {
  SplitSummary train, val;
  LengthStats lengths;  // over both splits
};

class DatasetWriter {
 public:
  DatasetWriter(const std::string& dir, uint64_t seed, double val_fraction);
  ~DatasetWriter();

  // One record's kept pieces: example holds them back to back, piece_lengths says how long each is.
  void add(uint64_t record_index, EncodedExample&& example, std::vector<uint32_t>&& piece_lengths);
  int64_t records_added() const { return records_added_; }
  WrittenDataset commit();

 private:
  class SplitWriter;
  struct HeldRecord {
    EncodedExample example;
    std::vector<uint32_t> piece_lengths;
    bool val = false;
  };
  void write(const HeldRecord& record, bool val);

  uint64_t seed_;
  double val_fraction_;
  std::unique_ptr<SplitWriter> train_, val_;
  // The latest record waits here, so that commit() can move it to an empty split (see commit()).
  std::optional<HeldRecord> held_;
  int64_t records_added_ = 0;
  LengthStats lengths_;
};

}  // namespace pt
