#include "data/dataset.h"

#include "core/error.h"

namespace pt {

DatasetSplit DatasetSplit::from_vectors(std::vector<uint32_t> tokens, std::vector<uint8_t> loss_mask,
                                        std::vector<uint64_t> offsets) {
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != tokens.size() ||
      loss_mask.size() != tokens.size())
    fail("DatasetSplit::from_vectors: offsets must run from 0 to the token count ({}) and the loss mask "
         "must have one entry per token ({})", tokens.size(), loss_mask.size());
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1]) fail("DatasetSplit::from_vectors: offsets decrease at example {}", i - 1);
  struct Owned {
    std::vector<uint32_t> tokens;
    std::vector<uint8_t> mask;
    std::vector<uint64_t> offsets;
  };
  auto owned = std::make_shared<Owned>(Owned{std::move(tokens), std::move(loss_mask), std::move(offsets)});
  DatasetSplit split;
  split.tokens_ = owned->tokens;
  split.mask_ = owned->mask;
  split.offsets_ = owned->offsets;
  split.storage_ = std::move(owned);
  return split;
}

}  // namespace pt
