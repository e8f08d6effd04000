// concat and concat-posid (fixed-length packing): the epoch's examples form one token stream cut into
// rows of row_len; an example that reaches a row's end continues in the next row. One implementation
// with a switch, like a varlen flag: without boundaries each row is one causal segment (attention
// crosses examples, position ids 0..row_len-1); with them attention and position ids restart at every
// example piece.
#include "data/packing/batch_builder.h"
#include "data/packing/batch_sizing.h"
#include "data/packing/ordered_packer.h"
#include "data/packing/strategies.h"

#include <algorithm>

namespace pt {
namespace {

class ConcatPacker final : public OrderedPacker {
 public:
  ConcatPacker(const DatasetSplit& split, const PackingOptions& options, int64_t epoch, bool keep_boundaries)
      : OrderedPacker(split, options, epoch),
        rows_per_batch_(fixed_rows_per_batch(split, options)),
        keep_boundaries_(keep_boundaries) {}

  std::optional<Batch> next() override {
    if (done()) return std::nullopt;
    const int32_t row_len = options_.row_len;
    BatchBuilder builder(options_.pad_id, int64_t{rows_per_batch_} * row_len);
    while (builder.rows() < rows_per_batch_ && next_ < std::ssize(order_)) {
      for (int64_t fill = 0; fill < row_len && next_ < std::ssize(order_);) {
        Example example = split_.example(order_[next_]);
        auto length = std::ssize(example.tokens);
        int64_t take = std::min(length - offset_, row_len - fill);
        if (offset_ == 0 && take < length) builder.count_split();
        builder.append(example, offset_, offset_ + take, keep_boundaries_ || fill == 0);
        fill += take;
        offset_ += take;
        if (offset_ == length) {
          ++next_;
          offset_ = 0;
        }
      }
      // Only the epoch's last row can be short.
      builder.end_row(row_len, keep_boundaries_ ? PadTail::kOwnSegment : PadTail::kContinueSegment);
    }
    return builder.finish();
  }

 private:
  int32_t rows_per_batch_;
  bool keep_boundaries_;
  int64_t offset_ = 0;  // tokens of the example at next_ already in earlier rows
};

}  // namespace

std::unique_ptr<Packer> make_concat_packer(const DatasetSplit& split, const PackingOptions& options,
                                           int64_t epoch, bool keep_boundaries) {
  return std::make_unique<ConcatPacker>(split, options, epoch, keep_boundaries);
}

}  // namespace pt
