// The masked-LM objective on packed batches: a packer packs as for causal LM, then each example piece's
// ids and labels are replaced by its example's masking (data/mlm/masking.h). Masks are computed per whole
// example and sliced, so an example cut across rows (concat) is masked as if it were whole.
#pragma once

#include "data/dataset.h"
#include "data/mlm/masking.h"
#include "data/packing/packer.h"

#include <functional>
#include <memory>

namespace pt {

// Rewrites `batch`, packed from `split`, in place: masked input ids, unshifted targets as labels, and
// objective kMaskedLm. key_of gives the key of an example from its index in `split` (batch.pieces).
void mask_batch(Batch& batch, const DatasetSplit& split, const MlmVocab& vocab, const MlmSettings& settings,
                const std::function<MaskKey(int64_t example)>& key_of);

// A packer whose batches are masked with the keys (options.seed, epoch, index in split).
std::unique_ptr<Packer> masked_lm_packer(std::unique_ptr<Packer> packer, const DatasetSplit& split,
                                         const PackingOptions& options, int64_t epoch);

}  // namespace pt
