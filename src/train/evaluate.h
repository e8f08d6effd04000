// Validation loss: the mean cross-entropy over every target of a split, in a fixed order, in flattened
// batches that fill the model's token capacity (no padding work), or in rows of concat_row_len tokens where
// training runs concat (the loss it trains on, and no position beyond a row).
#pragma once

#include "core/tensor.h"
#include "data/dataset.h"
#include "model/decoder.h"

#include <cstdint>

namespace pt {

struct EvalResult {
  double loss = 0;  // mean over targets
  int64_t tokens = 0;
};

// max_batches <= 0: the whole split. With the flat master params (loaded into the model once), or with
// the weights the model holds already (a ZeRO-1 trainer's gathered working copy).
EvalResult evaluate(DecoderModel& model, const Tensor& params, const DatasetSplit& split,
                    int64_t max_batches = 0);
EvalResult evaluate(DecoderModel& model, const DatasetSplit& split, int64_t max_batches = 0,
                    int32_t concat_row_len = 0);

}  // namespace pt
