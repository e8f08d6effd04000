// How many examples or rows make a batch, shared by the strategies: minibatch strategies (padding,
// flatten) take N examples or fill a token budget; fixed-row strategies (concat, concat-posid, bfd) take a
// number of rows chosen so a batch holds about as many examples as the minibatch ones.
#pragma once

#include "data/dataset.h"
#include "data/packing/packer.h"

#include <cstdint>
#include <span>
#include <vector>

namespace pt {

// The epoch's example order without empty examples, which carry no tokens to train on.
std::vector<int64_t> packing_order(const DatasetSplit& split, const PackingOptions& options, int64_t epoch);

// How a minibatch spends its token budget: padded rows cost rows * longest, a flattened row its length.
enum class BudgetCost { kPaddedRows, kRealTokens };

// End (exclusive) of the minibatch starting at order[begin]: N examples, or as many as fit the token
// budget (at least one).
int64_t minibatch_end(const DatasetSplit& split, std::span<const int64_t> order, int64_t begin,
                      const PackingOptions& options, BudgetCost cost);

// Rows per batch of the fixed-row strategies: budget / row_len in token mode; in example mode
// max(1, round(N * mean_length / row_len)) so a batch holds about N examples.
int32_t fixed_rows_per_batch(const DatasetSplit& split, const PackingOptions& options);

int64_t longest_example(const DatasetSplit& split);

}  // namespace pt
