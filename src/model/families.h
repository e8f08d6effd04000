// The Hugging Face model families packtrain trains, as a table: each entry is a model_type, its
// architecture class, how its config.json spells ModelConfig's choices, and its tensor names. Anything a
// config asks for that packtrain does not implement (another model_type, a rope type, MoE, multimodal
// parts, soft-capping...) is an error naming the field and its value, never a warning.
#pragma once

#include "model/config.h"

#include <string>

namespace pt {

// HF tensor names of a family's parameters; "{}" stands for the layer index. A name that is null is a
// tensor the family does not have.
struct TensorNames {
  const char* embed;       // token embeddings [V, C]
  const char* positions;   // learned absolute positions [P, C]
  const char* attn_norm;   // per layer, before attention
  const char* q, *k, *v;   // separate projections ...
  const char* qkv;         // ... or one fused [C, 3C] (GPT-2's c_attn)
  const char* o;
  const char* q_norm, *k_norm;  // per-head RMSNorm weights [D]
  const char* ffn_norm;    // per layer, before the MLP
  const char* gate, *up;   // SwiGLU's two input projections (stored together as one [2F, C] matrix) ...
  const char* fc;          // ... or GELU's one
  const char* down;        // the MLP's output projection
  const char* final_norm;
  const char* lm_head;
  bool conv1d;  // linear weights stored [in, out] (GPT-2's Conv1D) rather than [out, in]
  const char* token_types = nullptr;   // token-type embeddings [type_vocab_size, C]
  const char* embed_norm = nullptr;    // the norm over the summed embeddings
  const char* head_dense = nullptr;    // the head transform's dense [C, C]
  const char* lm_head_bias = nullptr;  // the logits' bias [V]
};

const TensorNames& tensor_names(const std::string& family);
// "llama, mistral, qwen2, qwen3, gpt2, bert", for messages.
std::string supported_families();

// Reads an HF config.json. Errors name the file, the field and its value.
ModelConfig load_config(const std::string& path);
// The same from JSON text already read; `origin` names it in errors.
ModelConfig parse_config(const std::string& json_text, const std::string& origin);
// HF config.json text: the source config's fields (if any) with the model's own written over them, and
// torch_dtype naming the dtype of the weights saved beside it (f32 or bf16).
std::string config_to_json(const ModelConfig& c, DType weights = DType::f32);

}  // namespace pt
