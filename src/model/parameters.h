// Where every parameter of a model lives: one flat float32 buffer (so gradients, AdamW moments and the
// master weights share one layout, and the optimizer walks them in one pass), each tensor named as in the
// family's Hugging Face checkpoints (model/families.h). Linears are stored [out, in] whatever the family
// writes, and tensors that one GEMM reads together are adjacent: q, k and v form one [(H + 2 Hkv) D, C]
// matrix (GPT-2's c_attn is exactly that, transposed), and SwiGLU's gate and up one [2F, C] matrix whose
// rows hold both halves the fused activation reads.
#pragma once

#include "model/config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pt {

enum class ParamRole { matrix, embedding, norm, bias };

struct ParamInfo {
  std::string name;            // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // HF shape
  int64_t offset = 0;          // into the flat buffer, in elements
  int64_t numel = 0;
  ParamRole role = ParamRole::matrix;
  bool transposed = false;  // HF stores it [in, out] (GPT-2's Conv1D); the flat buffer holds [out, in]
  // Weight decay applies to matrices only: not to norms, biases or embeddings.
  bool weight_decay() const { return role == ParamRole::matrix; }
  // Its shape as the flat buffer holds it.
  std::vector<int64_t> flat_shape() const;
};

// Offsets of one decoder layer's tensors; -1 for a tensor the model does not have.
struct LayerParams {
  int64_t attn_norm = -1, attn_norm_bias = -1;
  int64_t wq = -1, wk = -1, wv = -1;  // adjacent: one [(H + 2 Hkv) D, C] matrix from wq
  int64_t bqkv = -1;                  // q, k and v biases, adjacent [(H + 2 Hkv) D]
  int64_t wo = -1, bo = -1;
  int64_t q_norm = -1, k_norm = -1;  // [D] each
  int64_t ffn_norm = -1, ffn_norm_bias = -1;
  int64_t w_up = -1, b_up = -1;  // gate|up [2F, C] (SwiGLU) or fc [F, C] (GELU), and its bias
  int64_t w_down = -1, b_down = -1;
};

class ParameterLayout {
 public:
  explicit ParameterLayout(const ModelConfig& config);

  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t total() const { return total_; }
  const ParamInfo& find(const std::string& name) const;  // throws naming the tensor
  const LayerParams& layer(int i) const { return layers_[static_cast<size_t>(i)]; }
  int64_t embedding() const { return embedding_; }
  int64_t positions() const { return positions_; }            // learned positions, -1 for rotary models
  int64_t token_types() const { return token_types_; }        // -1 without token-type embeddings
  int64_t embedding_norm() const { return embedding_norm_; }  // -1 without an embedding norm
  int64_t embedding_norm_bias() const { return embedding_norm_bias_; }
  // The first parameter after the layers: the head transform's dense where there is one, else the final norm.
  int64_t head_begin() const { return head_begin_; }
  // Layer i's first parameter; layer_begin(num_hidden_layers) is head_begin(). A backward pass finishes the
  // layout's blocks in turn: the head [head_begin(), total()), each layer [layer_begin(i),
  // layer_begin(i + 1)) from the last, then the embeddings [0, layer_begin(0)).
  int64_t layer_begin(int i) const {
    return i < std::ssize(layers_) ? layers_[static_cast<size_t>(i)].attn_norm : head_begin_;
  }
  // The blocks as flat ranges [begin, end), in the order a backward pass finishes them.
  struct Block {
    int64_t begin, end;
    bool operator==(const Block&) const = default;
  };
  std::vector<Block> blocks() const;
  int64_t head_dense() const { return head_dense_; }  // -1 without a head transform
  int64_t head_dense_bias() const { return head_dense_bias_; }
  int64_t final_norm() const { return final_norm_; }
  int64_t final_norm_bias() const { return final_norm_bias_; }
  int64_t lm_head() const { return lm_head_; }            // == embedding() when tied
  int64_t lm_head_bias() const { return lm_head_bias_; }  // -1 without a bias on the logits

 private:
  int64_t add(std::string name, std::vector<int64_t> shape, ParamRole role, bool transposed = false);

  std::vector<ParamInfo> params_;
  std::vector<LayerParams> layers_;
  int64_t total_ = 0, embedding_ = 0, positions_ = -1, final_norm_ = 0, final_norm_bias_ = -1, lm_head_ = 0;
  int64_t token_types_ = -1, embedding_norm_ = -1, embedding_norm_bias_ = -1, head_begin_ = 0,
          head_dense_ = -1, head_dense_bias_ = -1, lm_head_bias_ = -1;
};

}  // namespace pt
