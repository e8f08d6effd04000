#include "data/packing/packer.h"

#include "core/error.h"
#include "data/packing/batch_sizing.h"
#include "data/packing/masked_lm.h"
#include "data/packing/shuffle.h"
#include "data/packing/strategies.h"

#include <limits>
#include <numeric>

namespace pt {
namespace {

constexpr uint64_t kExampleOrderStream = 1;

// cu_seqlens are int32 in flattened coordinates, so a batch must stay under 2^31 tokens.
constexpr int64_t kMaxBatchTokens = std::numeric_limits<int32_t>::max();

bool fixed_rows(Strategy s) {
  return s == Strategy::kConcat || s == Strategy::kConcatPosId || s == Strategy::kBfd;
}

void validate(const DatasetSplit& split, const PackingOptions& o) {
  if ((o.examples_per_batch > 0) == (o.tokens_per_batch > 0))
    fail(
        "packing: give a batch size as examples per batch or as tokens per batch (exactly one, > 0); got {} "
        "examples and {} tokens",
        o.examples_per_batch, o.tokens_per_batch);
  if (o.row_len <= 0) fail("packing: row length must be positive, got {}", o.row_len);
  if (o.tokens_per_batch > kMaxBatchTokens)
    fail("packing: a batch of {} tokens is over the limit of {}; lower the token budget", o.tokens_per_batch,
         kMaxBatchTokens);
  int64_t longest = longest_example(split);
  auto name = strategy_name(o.strategy);
  if (o.strategy == Strategy::kBfd && longest > o.row_len)
    fail(
        "packing: bfd never splits examples, but the longest example has {} tokens and rows hold {}; prepare "
        "the data with --max-len <= {} or raise the row length",
        longest, o.row_len, o.row_len);
  if (fixed_rows(o.strategy)) {
    if (o.tokens_per_batch > 0 && o.tokens_per_batch < o.row_len)
      fail(
          "packing: {} batches are whole rows of {} tokens, but the budget is {} tokens; raise it to at "
          "least "
          "{} or lower the row length",
          name, o.row_len, o.tokens_per_batch, o.row_len);
    if (int64_t{fixed_rows_per_batch(split, o)} * o.row_len > kMaxBatchTokens)
      fail("packing: {} batches would be over {} tokens; lower the batch size", name, kMaxBatchTokens);
  } else {
    if (o.tokens_per_batch > 0 && o.tokens_per_batch < longest)
      fail(
          "packing: the longest example has {} tokens, more than the {} batch budget of {} tokens; raise the "
          "budget or prepare the data with a lower --max-len",
          longest, name, o.tokens_per_batch);
    if (o.examples_per_batch > 0 && int64_t{o.examples_per_batch} * longest > kMaxBatchTokens)
      fail("packing: {} examples of up to {} tokens could exceed {} tokens per batch; lower the batch size",
           o.examples_per_batch, longest, kMaxBatchTokens);
  }
  if (o.objective == Objective::kMaskedLm) {
    if (!o.mlm_vocab) fail("packing: the masked-LM objective needs the tokenizer's vocabulary roles");
    o.mlm.validate(*o.mlm_vocab);
  }
}

std::unique_ptr<Packer> make_strategy_packer(const DatasetSplit& split, const PackingOptions& options,
                                             int64_t epoch) {
  switch (options.strategy) {
    case Strategy::kPadding:
      return make_padding_packer(split, options, epoch);
    case Strategy::kConcat:
      return make_concat_packer(split, options, epoch, false);
    case Strategy::kConcatPosId:
      return make_concat_packer(split, options, epoch, true);
    case Strategy::kFlatten:
      return make_flatten_packer(split, options, epoch);
    case Strategy::kBfd:
      return make_bfd_packer(split, options, epoch);
  }
  fail("packing: unknown strategy");
}

}  // namespace

std::string_view strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kPadding:
      return "padding";
    case Strategy::kConcat:
      return "concat";
    case Strategy::kConcatPosId:
      return "concat-posid";
    case Strategy::kFlatten:
      return "flatten";
    case Strategy::kBfd:
      return "bfd";
  }
  return "?";
}

Strategy parse_strategy(std::string_view name) {
  for (Strategy s : kAllStrategies)
    if (strategy_name(s) == name) return s;
  fail("unknown packing strategy '{}'; expected one of: padding, concat, concat-posid, flatten, bfd", name);
}

std::vector<int64_t> epoch_order(int64_t num_examples, uint64_t seed, int64_t epoch, bool shuffle) {
  std::vector<int64_t> order(static_cast<size_t>(num_examples));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (shuffle) {
    SplitMix64 rng = seeded_stream(seed, epoch, kExampleOrderStream);
    shuffle_in_place(std::span<int64_t>(order), rng);
  }
  return order;
}

std::unique_ptr<Packer> make_packer(const DatasetSplit& split, const PackingOptions& options, int64_t epoch) {
  validate(split, options);
  auto packer = make_strategy_packer(split, options, epoch);
  if (options.objective == Objective::kMaskedLm)
    return masked_lm_packer(std::move(packer), split, options, epoch);
  return packer;
}

}  // namespace pt
