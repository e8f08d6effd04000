#include "train/evaluate.h"

#include "data/packing/packer.h"

#include <algorithm>

namespace pt {

EvalResult evaluate(DecoderModel& model, const Tensor& params, const DatasetSplit& split, int64_t max_batches,
                    const PackingOptions& masking) {
  model.load_weights(params);  // once: a bf16 model casts them, and they do not change during evaluation
  return evaluate(model, split, max_batches, 0, masking);
}

EvalResult evaluate(DecoderModel& model, const DatasetSplit& split, int64_t max_batches,
                    int32_t concat_row_len, const PackingOptions& masking) {
  PackingOptions options;
  options.shuffle = false;
  if (concat_row_len > 0) {
    options.strategy = Strategy::kConcat;
    options.row_len = concat_row_len;
    options.tokens_per_batch =
        std::max<int64_t>(concat_row_len, model.max_tokens() / concat_row_len * concat_row_len);
  } else {
    options.strategy = Strategy::kFlatten;
    options.tokens_per_batch = model.max_tokens();
  }
  options.objective = masking.objective;
  options.mlm = masking.mlm;
  options.mlm_vocab = masking.mlm_vocab;
  options.seed = masking.seed;
  auto packer = make_packer(split, options, 0);
  double loss = 0;
  int64_t tokens = 0, batches = 0;
  while (auto batch = packer->next()) {
    auto r = model.forward(*batch);
    loss += r.loss_sum;
    tokens += r.tokens;
    if (max_batches > 0 && ++batches >= max_batches) break;
  }
  return {tokens ? loss / static_cast<double>(tokens) : 0.0, tokens};
}

}  // namespace pt
