// Validation loss: the mean cross-entropy over every target of a split, in flattened batches that fill the
// model's token capacity (no padding work), in a fixed order.
#pragma once

#include "core/tensor.h"
#include "data/dataset.h"
#include "model/llama.h"

#include <cstdint>

namespace pt {

struct EvalResult {
  double loss = 0;  // mean over targets
  int64_t tokens = 0;
};

// max_batches <= 0: the whole split.
EvalResult evaluate(LlamaModel& model, const Tensor& params, const DatasetSplit& split,
                    int64_t max_batches = 0);

}  // namespace pt
