#include "train/evaluate.h"

#include "data/packing/packer.h"

namespace pt {

EvalResult evaluate(DecoderModel& model, const Tensor& params, const DatasetSplit& split, int64_t max_batches,
                    const PackingOptions& masking) {
  model.load_weights(params);  // once: a bf16 model casts them, and they do not change during evaluation
  return evaluate(model, split, max_batches, masking);
}

EvalResult evaluate(DecoderModel& model, const DatasetSplit& split, int64_t max_batches,
                    const PackingOptions& masking) {
  PackingOptions options;
  options.strategy = Strategy::kFlatten;
  options.tokens_per_batch = model.max_tokens();
  options.shuffle = false;
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
