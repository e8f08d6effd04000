// Builds a Batch row by row from example pieces; every strategy uses it, so the label, position-id and
// cu_seqlens rules live in one place. Vectors are reserved up front and filled with span copies: the
// per-token work is a plain loop with no allocation.
#pragma once

#include "data/dataset.h"
#include "data/packing/batch.h"

#include <cstdint>

namespace pt {

// What the pad tail of a row is to attention.
enum class PadTail {
  kContinueSegment,  // dense rows (padding, concat): pads trail the row's one segment, positions go on
  kOwnSegment,       // varlen rows (concat-posid, bfd): pads form a segment of their own, positions from 0
};

class BatchBuilder {
 public:
  // expected_tokens: rows * row_len of the batch, for reserving.
  BatchBuilder(int32_t pad_id, int64_t expected_tokens);

  // Appends tokens [begin, end) of `example` to the open row. Attention restarts here when new_segment
  // (position ids from 0). The piece's first token gets no label when it starts the example or a segment.
  void append(const Example& example, int64_t begin, int64_t end, bool new_segment);
  // Closes the open row, padding it to row_len (the same for every row of the batch).
  void end_row(int32_t row_len, PadTail tail);
  void count_split() { ++batch_.examples_split; }

  int32_t rows() const { return batch_.rows; }
  Batch finish();

 private:
  void pad(int64_t count, PadTail tail);

  Batch batch_;
  int32_t pad_id_;
  int64_t row_start_ = 0;       // flattened offset of the open row
  int64_t segment_start_ = -1;  // flattened offset of the open segment, -1 before the row's first
  int32_t next_position_ = 0;
};

}  // namespace pt
