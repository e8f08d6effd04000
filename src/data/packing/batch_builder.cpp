#include "data/packing/batch_builder.h"

#include "core/error.h"

#include <algorithm>

namespace pt {

BatchBuilder::BatchBuilder(int32_t pad_id, int64_t expected_tokens) : pad_id_(pad_id) {
  auto n = static_cast<size_t>(expected_tokens);
  batch_.input_ids.reserve(n);
  batch_.labels.reserve(n);
  batch_.position_ids.reserve(n);
}

void BatchBuilder::append(const Example& example, int64_t begin, int64_t end, bool new_segment) {
  PT_ASSERT(0 <= begin && begin < end && end <= static_cast<int64_t>(example.tokens.size()));
  size_t at = batch_.input_ids.size(), n = static_cast<size_t>(end - begin);
  if (new_segment || segment_start_ < 0) {
    segment_start_ = static_cast<int64_t>(at);
    batch_.cu_seqlens.push_back(static_cast<int32_t>(at));
    next_position_ = 0;
  }
  batch_.input_ids.resize(at + n);
  batch_.labels.resize(at + n);
  batch_.position_ids.resize(at + n);
  const uint32_t* tokens = example.tokens.data() + begin;
  const uint8_t* mask = example.loss_mask.data() + begin;
  int32_t* ids = batch_.input_ids.data() + at;
  int32_t* labels = batch_.labels.data() + at;
  int32_t* positions = batch_.position_ids.data() + at;
  int64_t loss = 0;
  for (size_t i = 0; i < n; ++i) {
    auto token = static_cast<int32_t>(tokens[i]);
    ids[i] = token;
    labels[i] = mask[i] ? token : kIgnoreLabel;
    loss += mask[i] ? 1 : 0;
    positions[i] = next_position_ + static_cast<int32_t>(i);
  }
  // Nothing before this token in its attention segment (or its example) can predict it.
  if ((begin == 0 || static_cast<int64_t>(at) == segment_start_) && labels[0] != kIgnoreLabel) {
    labels[0] = kIgnoreLabel;
    --loss;
  }
  batch_.pieces.push_back({example.index, static_cast<int32_t>(begin), static_cast<int32_t>(at),
                           static_cast<int32_t>(n)});
  next_position_ += static_cast<int32_t>(n);
  batch_.real_tokens += static_cast<int64_t>(n);
  batch_.loss_tokens += loss;
  if (begin == 0) ++batch_.examples;
}

void BatchBuilder::pad(int64_t count, PadTail tail) {
  if (count <= 0) return;
  size_t at = batch_.input_ids.size(), n = static_cast<size_t>(count);
  if (tail == PadTail::kOwnSegment || segment_start_ < 0) {
    batch_.cu_seqlens.push_back(static_cast<int32_t>(at));
    next_position_ = 0;
  }
  batch_.input_ids.resize(at + n, pad_id_);
  batch_.labels.resize(at + n, kIgnoreLabel);
  batch_.position_ids.resize(at + n);
  int32_t* positions = batch_.position_ids.data() + at;
  for (size_t i = 0; i < n; ++i) positions[i] = next_position_ + static_cast<int32_t>(i);
}

void BatchBuilder::end_row(int32_t row_len, PadTail tail) {
  PT_ASSERT(batch_.rows == 0 || batch_.row_len == row_len);
  int64_t fill = static_cast<int64_t>(batch_.input_ids.size()) - row_start_;
  PT_ASSERT(fill <= row_len);
  batch_.row_real_len.push_back(static_cast<int32_t>(fill));
  pad(row_len - fill, tail);
  batch_.row_len = row_len;
  ++batch_.rows;
  row_start_ += row_len;
  segment_start_ = -1;
}

Batch BatchBuilder::finish() {
  PT_ASSERT(static_cast<int64_t>(batch_.input_ids.size()) == row_start_);
  batch_.cu_seqlens.push_back(static_cast<int32_t>(row_start_));
  for (size_t i = 1; i < batch_.cu_seqlens.size(); ++i)
    batch_.max_seqlen = std::max(batch_.max_seqlen, batch_.cu_seqlens[i] - batch_.cu_seqlens[i - 1]);
  batch_.processed_tokens = batch_.num_tokens();
  return std::move(batch_);
}

}  // namespace pt
