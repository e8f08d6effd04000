// A transformer described by its choices, one field per choice: the norm and where it sits, the positions,
// the attention's direction, biases, per-head q/k norms and sliding windows, the MLP, the head. Each
// supported Hugging Face family
// (model/families.h) is a set of these choices plus its tensor names; the model (model/decoder.h) reads
// only the choices, never the family's name.
#pragma once

#include "data/packing/batch.h"
#include "model/rope_scaling.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pt {

enum class Norm { rms, layer };           // RMSNorm (weight); LayerNorm (weight and bias)
enum class Positions { rope, learned };   // rotary on q and k; an absolute table added to the embeddings
// down(silu(gate x) * up x); proj(gelu_tanh(fc x)) (GPT-2); proj(gelu_erf(fc x)) (BERT)
enum class Mlp { swiglu, gelu, gelu_erf };

struct ModelConfig {
  std::string family = "llama";  // the HF model_type (model/families.h lists them)
  int32_t vocab_size = 0;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_hidden_layers = 0;
  int32_t num_attention_heads = 0;
  int32_t num_key_value_heads = 0;
  int32_t head_dim = 0;  // hidden_size / num_attention_heads unless set
  int32_t max_position_embeddings = 2048;

  Norm norm = Norm::rms;
  float norm_eps = 1e-5f;
  // Where the norms sit: before each block, with a final norm after the last layer (pre-norm decoders); or
  // after each residual add, x = norm(x + attn(x)), x = norm(x + mlp(x)) (BERT), with no final norm of the
  // stack (the head transform's norm then comes before the LM head).
  bool post_norm = false;
  bool embedding_norm = false;  // a norm over the summed embeddings, before the first layer (BERT)
  // Token-type (segment) embeddings: a [type_vocab_size, C] table whose row 0 is added to every token, as
  // every token is of type 0 here (BERT); 0: none.
  int32_t type_vocab_size = 0;
  // Causal attention, trained on causal-LM batches (decoders); or bidirectional within each example,
  // trained on masked-LM batches (encoders).
  bool causal = true;
  Positions positions = Positions::rope;
  RopeScaling rope;      // positions == rope
  bool qkv_bias = false;  // biases on q, k and v
  bool o_bias = false;    // bias on the attention's output projection
  bool qk_norm = false;   // RMSNorm over each head of q and k before the rotary (Qwen3)
  // Sliding-window attention: layer l attends at most `sliding_window` keys (itself included) where
  // windowed_layers[l]; sliding_window 0 or no windowed layer: every earlier key of its example.
  int32_t sliding_window = 0;
  std::vector<bool> windowed_layers;
  Mlp mlp = Mlp::swiglu;
  bool mlp_bias = false;  // biases on the MLP's linears
  // BERT's MLM head transform before the LM head: dense [C, C] with bias, the MLP's activation, then the
  // final norm.
  bool head_transform = false;
  bool lm_head_bias = false;  // a bias on the logits
  bool tie_word_embeddings = false;
  int32_t bos_token_id = -1;  // -1: none
  int32_t eos_token_id = -1;
  // The config.json this came from, if any: saving writes its fields back with packtrain's own set over
  // them, so what packtrain does not read (initializer_range, pad_token_id, ...) survives a round trip.
  std::string source_json;

  // The window of layer l's attention in tokens, 0 for none (ops::AttentionParams::window).
  int32_t window(int layer) const;
  // The batches the model trains on: causal LM, or masked LM for bidirectional attention.
  Objective objective() const { return causal ? Objective::kCausalLm : Objective::kMaskedLm; }
  // Rows of the MLP's first linear: gate and up stacked for SwiGLU, the fc for GELU.
  int64_t mlp_up_rows() const { return mlp == Mlp::swiglu ? 2 * int64_t{intermediate_size} : intermediate_size; }
  int64_t num_parameters() const;
  // Checks divisibility and ranges; throws pt::Error naming the field and `origin`.
  void validate(const std::string& origin) const;
};

}  // namespace pt
