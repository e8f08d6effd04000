#include "epoch_checker.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace pt::testing {

EpochChecker::EpochChecker(const DatasetSplit& split, Strategy strategy, int32_t pad_id)
    : split_(split), strategy_(strategy), pad_id_(pad_id) {
  starts_.push_back(0);
  for (int64_t i = 0; i < split.size(); ++i) {
    starts_.push_back(starts_.back() + split.length(i));
    auto mask = split.example(i).loss_mask;
    mask_.insert(mask_.end(), mask.begin(), mask.end());
  }
  seen_.assign(static_cast<size_t>(split.num_tokens()), 0);
}

int64_t EpochChecker::example_of(int64_t token) const {
  // Last example starting at or before the token (empty examples share its start and come earlier).
  auto it = std::upper_bound(starts_.begin(), starts_.end(), token);
  return (it - starts_.begin()) - 1;
}

void EpochChecker::check(const Batch& b) {
  ++batches_;
  ASSERT_GT(b.rows, 0);
  ASSERT_GT(b.row_len, 0);
  const auto n = static_cast<size_t>(b.num_tokens());
  ASSERT_EQ(b.input_ids.size(), n);
  ASSERT_EQ(b.labels.size(), n);
  ASSERT_EQ(b.position_ids.size(), n);
  ASSERT_EQ(b.row_real_len.size(), static_cast<size_t>(b.rows));
  EXPECT_EQ(b.processed_tokens, b.num_tokens());

  // cu_seqlens: from 0 to all tokens, strictly increasing, no segment across rows, max_seqlen right.
  ASSERT_GE(b.cu_seqlens.size(), 2u);
  EXPECT_EQ(b.cu_seqlens.front(), 0);
  ASSERT_EQ(b.cu_seqlens.back(), static_cast<int32_t>(n));
  std::vector<uint8_t> segment_start(n, 0);
  int32_t longest = 0;
  for (size_t i = 0; i + 1 < b.cu_seqlens.size(); ++i) {
    int32_t begin = b.cu_seqlens[i], end = b.cu_seqlens[i + 1];
    ASSERT_LT(begin, end) << "segment " << i;
    ASSERT_EQ(begin / b.row_len, (end - 1) / b.row_len) << "segment " << i << " crosses a row";
    segment_start[static_cast<size_t>(begin)] = 1;
    longest = std::max(longest, end - begin);
    for (int32_t t = begin; t < end; ++t)
      ASSERT_EQ(b.position_ids[static_cast<size_t>(t)], t - begin) << "position ids restart per segment";
  }
  EXPECT_EQ(b.max_seqlen, longest);

  int64_t real = 0, loss = 0, started = 0, split_here = 0;
  for (int32_t r = 0; r < b.rows; ++r) {
    int32_t real_len = b.row_real_len[static_cast<size_t>(r)];
    ASSERT_GE(real_len, 1);
    ASSERT_LE(real_len, b.row_len);
    real += real_len;
    for (int32_t c = 0; c < b.row_len; ++c) {
      size_t t = static_cast<size_t>(r) * static_cast<size_t>(b.row_len) + static_cast<size_t>(c);
      if (c >= real_len) {
        ASSERT_EQ(b.input_ids[t], pad_id_) << "pad at row " << r << " column " << c;
        ASSERT_EQ(b.labels[t], kIgnoreLabel);
        continue;
      }
      int64_t g = int64_t{b.input_ids[t]} - 1;
      ASSERT_TRUE(g >= 0 && g < split_.num_tokens())
          << "token " << b.input_ids[t] << " is not from the split";
      ASSERT_FALSE(seen_[static_cast<size_t>(g)]) << "token " << g << " appears twice in the epoch";
      seen_[static_cast<size_t>(g)] = 1;
      stream_.push_back(g);
      int64_t e = example_of(g);
      bool example_start = g == start(e);
      bool expect_loss = mask_[static_cast<size_t>(g)] && !example_start && !segment_start[t];
      ASSERT_EQ(b.labels[t], expect_loss ? b.input_ids[t] : kIgnoreLabel) << "label of token " << g;
      loss += expect_loss;
      if (example_start) {
        ++started;
        if (c + (end(e) - start(e)) > b.row_len) ++split_here;
      }
      if (segment_start[t]) {
        // Where a segment may start inside an example, and that it then holds nothing but that example.
        bool dense = strategy_ == Strategy::kConcat;
        bool piece = strategy_ == Strategy::kConcatPosId && c == 0;
        if (!dense && !piece) {
          ASSERT_TRUE(example_start) << "segment starts inside example " << e;
        }
        if (!dense && strategy_ != Strategy::kConcatPosId) {
          auto seg = std::upper_bound(b.cu_seqlens.begin(), b.cu_seqlens.end(), static_cast<int32_t>(t));
          int32_t seg_real_end = std::min(*seg, r * b.row_len + real_len);
          EXPECT_EQ(seg_real_end - static_cast<int32_t>(t), end(e) - start(e))
              << "example " << e << " is not whole";
        }
      } else if (c > 0 && strategy_ != Strategy::kConcat) {
        // No example's position ids continue from another's: inside a segment, tokens run on in one example.
        ASSERT_EQ(g, int64_t{b.input_ids[t - 1]}) << "token " << g << " does not follow its predecessor";
      }
    }
  }
  EXPECT_EQ(b.real_tokens, real);
  EXPECT_EQ(b.loss_tokens, loss);
  EXPECT_EQ(b.examples, started);
  bool splits = strategy_ == Strategy::kConcat || strategy_ == Strategy::kConcatPosId;
  EXPECT_EQ(b.examples_split, splits ? split_here : 0);
  examples_ += b.examples;
  examples_split_ += b.examples_split;
}

void EpochChecker::check_epoch_complete() const {
  EXPECT_EQ(std::count(seen_.begin(), seen_.end(), 0), 0) << "tokens missing from the epoch";
  int64_t nonempty = 0;
  for (size_t e = 0; e + 1 < starts_.size(); ++e) nonempty += starts_[e + 1] > starts_[e];
  EXPECT_EQ(examples_, nonempty);
  // The stream is whole examples end to end: each token follows its predecessor in the same example, or
  // the predecessor ended its example and this one starts the next.
  for (size_t i = 0; i < stream_.size(); ++i) {
    int64_t g = stream_[i], e = example_of(g);
    if (g != start(e)) {
      ASSERT_TRUE(i > 0 && stream_[i - 1] == g - 1)
          << "token " << g << " of example " << e << " out of place";
    } else if (i > 0) {
      int64_t prev = stream_[i - 1];
      ASSERT_EQ(prev + 1, end(example_of(prev))) << "example " << example_of(prev) << " cut short";
    }
  }
  if (!stream_.empty()) {
    EXPECT_EQ(stream_.back() + 1, end(example_of(stream_.back())));
  }
}

}  // namespace pt::testing
