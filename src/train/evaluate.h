// Validation loss: the mean cross-entropy over every target of a split, in a fixed order, in flattened
// batches that fill the model's token capacity (no padding work), or in rows of concat_row_len tokens where
// training runs concat (the loss it trains on, and no position beyond a row).
#pragma once

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/packing/packer.h"
#include "model/decoder.h"

#include <cstdint>

namespace pt {

struct EvalResult {
  double loss = 0;  // mean over targets
  int64_t tokens = 0;
};

// max_batches <= 0: the whole split. With the flat master params (loaded into the model once), or with
// the weights the model holds already (a ZeRO-1 trainer's gathered working copy). `masking` gives a
// masked-LM model its batches' objective, settings, vocabulary and seed; the masks are those of epoch 0, so
// every validation of a run scores the same tokens.
EvalResult evaluate(DecoderModel& model, const Tensor& params, const DatasetSplit& split,
                    int64_t max_batches = 0, const PackingOptions& masking = {});
EvalResult evaluate(DecoderModel& model, const DatasetSplit& split, int64_t max_batches = 0,
                    int32_t concat_row_len = 0, const PackingOptions& masking = {});

}  // namespace pt
