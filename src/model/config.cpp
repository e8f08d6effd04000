#include "model/config.h"

#include "core/error.h"
#include "model/parameters.h"

#include <algorithm>

namespace pt {

int32_t ModelConfig::window(int layer) const {
  const auto l = static_cast<size_t>(layer);
  return sliding_window > 0 && l < windowed_layers.size() && windowed_layers[l] ? sliding_window : 0;
}

int64_t ModelConfig::num_parameters() const { return ParameterLayout(*this).total(); }

void ModelConfig::validate(const std::string& origin) const {
  auto positive = [&](const char* name, int64_t v) {
    if (v <= 0) fail("{}: \"{}\" must be positive (got {})", origin, name, v);
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("intermediate_size", intermediate_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("head_dim", head_dim);
  positive("max_position_embeddings", max_position_embeddings);
  // An upper bound of the parameter count in double, so that no product or sum of the parameter layout
  // (int64) can overflow: a config whose sizes come near it is refused here, by name, not at allocation.
  const double C = hidden_size, q = static_cast<double>(num_attention_heads) * head_dim,
               qkv = q + 2.0 * num_key_value_heads * head_dim, F = intermediate_size;
  const double per_layer = C * (qkv + q) + 3 * C * F + qkv + 3 * F + 8 * C + 2.0 * head_dim;
  const double bound = (2.0 * vocab_size + max_position_embeddings + std::max(type_vocab_size, 0) + 5) * C +
                       C * C + vocab_size + num_hidden_layers * per_layer;
  if (bound > 0x1p62)
    fail(
        "{}: these sizes give about {:.3g} parameters, beyond what packtrain counts (2^62); check "
        "vocab_size, hidden_size, intermediate_size, num_hidden_layers, the head counts and head_dim",
        origin, bound);
  if (num_attention_heads % num_key_value_heads != 0)
    fail("{}: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})", origin,
         num_attention_heads, num_key_value_heads);
  if (positions == Positions::rope && head_dim % 2 != 0)
    fail("{}: head_dim ({}) must be even for rotary embeddings", origin, head_dim);
  if (!(norm_eps > 0)) fail("{}: the norm epsilon must be positive", origin);
  if (positions == Positions::rope && !(rope.theta > 0)) fail("{}: rope_theta must be positive", origin);
  if (sliding_window < 0) fail("{}: sliding_window must be >= 0 (got {})", origin, sliding_window);
  if (!causal && sliding_window > 0)
    fail("{}: a sliding window limits causal attention; bidirectional attention has none", origin);
  if (type_vocab_size < 0) fail("{}: type_vocab_size must be >= 0 (got {})", origin, type_vocab_size);
  if (head_transform && mlp == Mlp::swiglu)
    fail("{}: the head transform applies the MLP's activation to [C] vectors, which SwiGLU halves", origin);
  if (!windowed_layers.empty() && windowed_layers.size() != static_cast<size_t>(num_hidden_layers))
    fail("{}: {} layers have a window setting, the model has {}", origin, windowed_layers.size(),
         num_hidden_layers);
  if (mlp == Mlp::gelu && hidden_size != num_attention_heads * head_dim)
    fail("{}: GPT-2's fused c_attn needs n_embd ({}) = n_head ({}) x head_dim ({})", origin, hidden_size,
         num_attention_heads, head_dim);
}

}  // namespace pt
