#include "data/prepare/dataset_writer.h"

#include "data/prepare/split_assignment.h"

#include <filesystem>

namespace pt {

class DatasetWriter::SplitWriter {
 public:
  explicit SplitWriter(const std::filesystem::path& dir)
      : tokens_((dir / "tokens.bin").string()),
        mask_((dir / "loss_mask.bin").string()),
        offsets_((dir / "offsets.bin").string()) {
    append_offset();
  }

  void add(const EncodedExample& example, size_t begin, size_t end) {
    tokens_.append(example.tokens, begin, end);
    mask_.append(example.loss_mask, begin, end);
    summary_.examples += 1;
    summary_.tokens += static_cast<int64_t>(end - begin);
    for (size_t i = begin; i < end; ++i) summary_.loss_tokens += example.loss_mask[i];
    append_offset();
  }

  int64_t examples() const { return summary_.examples; }

  SplitSummary commit() {
    summary_.files["tokens.bin"] = tokens_.commit();
    summary_.files["loss_mask.bin"] = mask_.commit();
    summary_.files["offsets.bin"] = offsets_.commit();
    return summary_;
  }

 private:
  void append_offset() {
    auto end = static_cast<uint64_t>(summary_.tokens);
    offsets_.append_bytes(&end, sizeof end);
  }

  ChecksummedFile tokens_, mask_, offsets_;
  SplitSummary summary_;
};

DatasetWriter::DatasetWriter(const std::string& dir, uint64_t seed, double val_fraction)
    : seed_(seed), val_fraction_(val_fraction) {
  // The directories come first: ChecksummedFile opens its temporary at construction.
  std::filesystem::create_directories(std::filesystem::path(dir) / "train");
  std::filesystem::create_directories(std::filesystem::path(dir) / "val");
  train_ = std::make_unique<SplitWriter>(std::filesystem::path(dir) / "train");
  val_ = std::make_unique<SplitWriter>(std::filesystem::path(dir) / "val");
}

DatasetWriter::~DatasetWriter() = default;

void DatasetWriter::add(uint64_t record_index, EncodedExample&& example,
                        std::vector<uint32_t>&& piece_lengths) {
  if (piece_lengths.empty()) return;
  if (held_) write(*held_, held_->val);
  held_ = HeldRecord{std::move(example), std::move(piece_lengths),
                     assigned_to_val(seed_, record_index, val_fraction_)};
  ++records_added_;
}

void DatasetWriter::write(const HeldRecord& record, bool val) {
  auto& split = val ? *val_ : *train_;
  size_t begin = 0;
  for (uint32_t length : record.piece_lengths) {
    split.add(record.example, begin, begin + length);
    lengths_.add(length);
    begin += length;
  }
}

WrittenDataset DatasetWriter::commit() {
  // With val_fraction > 0 and two or more records, neither split may end up empty: the held-back last
  // record goes to whichever split would otherwise be empty (only it can be, as all others went elsewhere).
  if (held_) {
    bool val = held_->val;
    if (val_fraction_ > 0 && records_added_ >= 2) {
      if (val_->examples() == 0) val = true;
      if (train_->examples() == 0) val = false;
    }
    write(*held_, val);
    held_.reset();
  }
  return {train_->commit(), val_->commit(), lengths_};
}

}  // namespace pt
