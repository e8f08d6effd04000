#include "model/flops.h"

#include <algorithm>

namespace pt {

double training_flops(const ModelConfig& c, const Batch& batch) {
  const double C = c.hidden_size, F = c.intermediate_size, D = c.head_dim;
  const double H = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const double layer_params =
      c.num_hidden_layers * (C * D * (2 * H + 2 * Hkv) + (c.mlp == Mlp::swiglu ? 3 : 2) * C * F);
  const double head_params = C * c.vocab_size + (c.head_transform ? C * C : 0);
  // The head's work: at every real token for causal LM, as MFU counts a model's FLOPs per token (PaLM),
  // whether or not a pass skips the tokens without a target (model/batch_inputs.h); at the labelled tokens
  // alone for masked LM, the only ones its objective predicts.
  const double head_tokens =
      static_cast<double>(batch.objective == Objective::kMaskedLm ? batch.loss_tokens : batch.real_tokens);
  // Query-key pairs of full layers (causal: query i of a segment sees i+1 keys; bidirectional: all L), and
  // of windowed ones: query i sees min(i+1, W) keys.
  const double W = c.sliding_window;
  double pairs = 0, window_pairs = 0;
  // Real tokens of each segment: a segment's pads trail it (padding) or fill a segment of their own (bfd).
  for (size_t s = 0; s + 1 < batch.cu_seqlens.size(); ++s) {
    const int32_t begin = batch.cu_seqlens[s], end = batch.cu_seqlens[s + 1];
    const int32_t row = begin / batch.row_len;
    const int32_t row_real_end = row * batch.row_len + batch.row_real_len[static_cast<size_t>(row)];
    const double L = std::max(0, std::min(end, row_real_end) - begin);
    pairs += c.causal ? L * (L + 1) / 2 : L * L;
    const double within = std::min(L, W);  // queries that see all earlier keys, then W each
    window_pairs += within * (within + 1) / 2 + (L - within) * W;
  }
  double layer_pairs = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) layer_pairs += c.window(l) > 0 ? window_pairs : pairs;
  return 6.0 * (layer_params * static_cast<double>(batch.real_tokens) + head_params * head_tokens) +
         12.0 * H * D * layer_pairs;
}

}  // namespace pt
