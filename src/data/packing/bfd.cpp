// bfd: best-fit bin packing of whole examples into rows of row_len (multipack-style). Packing a window of
// many shuffled examples at once keeps rows nearly full while the data stays random; the window's rows are
// shuffled before they are cut into batches, so batch order is random too.
#include "data/packing/batch_builder.h"
#include "data/packing/batch_sizing.h"
#include "data/packing/shuffle.h"
#include "data/packing/strategies.h"

#include <algorithm>
#include <set>
#include <utility>

namespace pt {
namespace {

// Batches' worth of tokens packed together: enough small examples to fill the gaps big ones leave.
constexpr int64_t kWindowBatches = 256;
constexpr uint64_t kRowOrderStream = 2;

struct Row {
  std::vector<int64_t> examples;  // dataset indices
  int32_t fill = 0;
};

// Best fit: each example into the row it fills most (least room left that fits), else into a new row.
// Examples over half a row go first, longest first: no two of them share a row, and the others fill the
// room they leave. The others go in their shuffled order, not longest first, which would build rows of
// one kind (a long example and its fillers, or only short examples): a batch of a few such rows is far
// from a random sample of the data, and trained worse than random minibatches (issue #4).
std::vector<Row> best_fit(const DatasetSplit& split, std::span<const int64_t> examples, int32_t row_len) {
  std::vector<std::pair<int64_t, size_t>> placing;  // (-length or 0, position): a total order, deterministic
  placing.reserve(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    int64_t length = split.length(examples[i]);
    placing.emplace_back(2 * length > row_len ? -length : 0, i);
  }
  std::sort(placing.begin(), placing.end());

  std::vector<Row> rows;
  std::set<std::pair<int32_t, size_t>> open;  // (room left, row)
  for (const auto& entry : placing) {
    int64_t example = examples[entry.second];
    auto length = static_cast<int32_t>(split.length(example));
    auto fit = open.lower_bound({length, 0});
    size_t row;
    if (fit == open.end()) {
      row = rows.size();
      rows.emplace_back();
    } else {
      row = fit->second;
      open.erase(fit);
    }
    rows[row].examples.push_back(example);
    rows[row].fill += length;
    if (rows[row].fill < row_len) open.emplace(row_len - rows[row].fill, row);
  }
  return rows;
}

class BfdPacker final : public Packer {
 public:
  BfdPacker(const DatasetSplit& split, const PackingOptions& options, int64_t epoch)
      : split_(split),
        options_(options),
        order_(packing_order(split, options, epoch)),
        rows_per_batch_(fixed_rows_per_batch(split, options)),
        window_tokens_(kWindowBatches * rows_per_batch_ * options.row_len),
        rng_(seeded_stream(options.seed, epoch, kRowOrderStream)) {}

  std::optional<Batch> next() override {
    while (next_row_ == rows_.size() && (next_ < std::ssize(order_) || !carried_.empty())) pack_window();
    if (next_row_ == rows_.size()) return std::nullopt;
    size_t end = std::min(rows_.size(), next_row_ + static_cast<size_t>(rows_per_batch_));
    BatchBuilder builder(options_.pad_id, static_cast<int64_t>(end - next_row_) * options_.row_len);
    for (; next_row_ < end; ++next_row_) {
      for (int64_t index : rows_[next_row_].examples) {
        Example example = split_.example(index);
        builder.append(example, 0, std::ssize(example.tokens), true);
      }
      builder.end_row(options_.row_len, PadTail::kOwnSegment);
    }
    Batch batch = builder.finish();
    emitted_ += batch.examples;
    return batch;
  }

  double progress() const override {
    return order_.empty() ? 1.0 : static_cast<double>(emitted_) / static_cast<double>(order_.size());
  }

 private:
  // Packs the examples carried over plus the next window's into rows_. Before the epoch's end only whole
  // batches are kept: the emptiest rows go back into the pool, where the next window can still fill them.
  void pack_window() {
    std::vector<int64_t> pool = std::move(carried_);
    carried_.clear();
    int64_t tokens = 0;
    for (int64_t index : pool) tokens += split_.length(index);
    for (; next_ < std::ssize(order_) && tokens < window_tokens_; ++next_) {
      pool.push_back(order_[next_]);
      tokens += split_.length(order_[next_]);
    }
    rows_ = best_fit(split_, pool, options_.row_len);
    next_row_ = 0;
    if (next_ < std::ssize(order_)) {
      std::stable_sort(rows_.begin(), rows_.end(),
                       [](const Row& a, const Row& b) { return a.fill > b.fill; });
      size_t keep =
          rows_.size() / static_cast<size_t>(rows_per_batch_) * static_cast<size_t>(rows_per_batch_);
      for (size_t r = keep; r < rows_.size(); ++r)
        carried_.insert(carried_.end(), rows_[r].examples.begin(), rows_[r].examples.end());
      rows_.resize(keep);
    }
    if (options_.shuffle) shuffle_in_place(std::span<Row>(rows_), rng_);
  }

  DatasetSplit split_;
  PackingOptions options_;
  std::vector<int64_t> order_;
  int32_t rows_per_batch_;
  int64_t window_tokens_;
  SplitMix64 rng_;
  int64_t next_ = 0;              // position in order_ of the next example to pack
  std::vector<int64_t> carried_;  // examples of rows left over from the last window
  std::vector<Row> rows_;         // the packed window
  size_t next_row_ = 0;
  int64_t emitted_ = 0;
};

}  // namespace

std::unique_ptr<Packer> make_bfd_packer(const DatasetSplit& split, const PackingOptions& options,
                                        int64_t epoch) {
  return std::make_unique<BfdPacker>(split, options, epoch);
}

}  // namespace pt
