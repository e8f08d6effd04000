// Where every parameter of a Llama model lives: one flat float32 buffer (so gradients, AdamW moments and
// the master weights share one layout, and the optimizer walks them in one pass), each tensor named as
// in Hugging Face checkpoints. The gate and up projections of a layer are adjacent, forming one [2F, C]
// matrix: one GEMM yields both halves of every row, as the fused SwiGLU reads them.
#pragma once

#include "model/config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pt {

struct ParamInfo {
  std::string name;            // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // HF shape ([out, in] for linears)
  int64_t offset = 0;          // into the flat buffer, in elements
  int64_t numel = 0;
  bool weight_decay = true;  // off for norms and embeddings by default
};

struct LayerParams {  // offsets of one decoder layer's tensors
  int64_t attn_norm, wq, wk, wv, wo, ffn_norm, w_gate_up, w_down;
};

class ParameterLayout {
 public:
  explicit ParameterLayout(const LlamaConfig& config);

  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t total() const { return total_; }
  const ParamInfo& find(const std::string& name) const;  // throws naming the tensor
  const LayerParams& layer(int i) const { return layers_[static_cast<size_t>(i)]; }
  int64_t embedding() const { return embedding_; }
  int64_t final_norm() const { return final_norm_; }
  int64_t lm_head() const { return lm_head_; }  // == embedding() when tied

 private:
  int64_t add(std::string name, std::vector<int64_t> shape, bool decay);

  std::vector<ParamInfo> params_;
  std::vector<LayerParams> layers_;
  int64_t total_ = 0, embedding_ = 0, final_norm_ = 0, lm_head_ = 0;
};

}  // namespace pt
