#include "model/parameters.h"

#include "core/error.h"
#include "model/families.h"

#include <fmt/format.h>

namespace pt {

std::vector<int64_t> ParamInfo::flat_shape() const {
  return transposed ? std::vector<int64_t>{shape[1], shape[0]} : shape;
}

ParameterLayout::ParameterLayout(const ModelConfig& c) {
  const TensorNames& n = tensor_names(c.family);
  const int64_t C = c.hidden_size, F = c.intermediate_size, D = c.head_dim;
  const int64_t qd = c.num_attention_heads * D, kvd = c.num_key_value_heads * D;
  // A linear [out, in]: HF writes it so, or transposed where the family stores Conv1D weights.
  auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    return n.conv1d ? add(name + ".weight", {in, out}, ParamRole::matrix, true)
                    : add(name + ".weight", {out, in}, ParamRole::matrix);
  };
  // A tensor of a choice the family's table may not name (a config built in code can ask for anything).
  auto named = [&](const char* name, const char* what) {
    if (!name) fail("model config: the {} family has no {}", c.family, what);
    return std::string(name);
  };
  auto norm = [&](const std::string& name, int64_t& weight, int64_t& bias) {
    weight = add(name + ".weight", {C}, ParamRole::norm);
    if (c.norm == Norm::layer) bias = add(name + ".bias", {C}, ParamRole::bias);
  };
  // Everything the embedding step uses comes first: the backward reports the layers' gradients final
  // before it (DecoderModel::set_backward_progress).
  embedding_ = add(n.embed, {c.vocab_size, C}, ParamRole::embedding);
  if (c.positions == Positions::learned)
    positions_ = add(n.positions, {c.max_position_embeddings, C}, ParamRole::embedding);
  if (c.type_vocab_size > 0)
    token_types_ =
        add(named(n.token_types, "token-type embeddings"), {c.type_vocab_size, C}, ParamRole::embedding);
  if (c.embedding_norm) norm(named(n.embed_norm, "embedding norm"), embedding_norm_, embedding_norm_bias_);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    auto name = [&](const char* pattern) { return fmt::format(fmt::runtime(pattern), i); };
    LayerParams l;
    norm(name(n.attn_norm), l.attn_norm, l.attn_norm_bias);
    if (n.qkv) {  // fused: one [C, 3C] Conv1D, i.e. q, k, v stacked once transposed
      l.wq = linear(name(n.qkv), qd + 2 * kvd, C);
      if (c.qkv_bias) l.bqkv = add(name(n.qkv) + ".bias", {qd + 2 * kvd}, ParamRole::bias);
    } else {
      l.wq = linear(name(n.q), qd, C);
      linear(name(n.k), kvd, C);
      linear(name(n.v), kvd, C);
      if (c.qkv_bias) {
        l.bqkv = add(name(n.q) + ".bias", {qd}, ParamRole::bias);
        add(name(n.k) + ".bias", {kvd}, ParamRole::bias);
        add(name(n.v) + ".bias", {kvd}, ParamRole::bias);
      }
    }
    l.wk = l.wq + qd * C;
    l.wv = l.wk + kvd * C;
    l.wo = linear(name(n.o), C, qd);
    if (c.o_bias) l.bo = add(name(n.o) + ".bias", {C}, ParamRole::bias);
    if (c.qk_norm) {
      l.q_norm = add(name(n.q_norm) + ".weight", {D}, ParamRole::norm);
      l.k_norm = add(name(n.k_norm) + ".weight", {D}, ParamRole::norm);
    }
    norm(name(n.ffn_norm), l.ffn_norm, l.ffn_norm_bias);
    if (c.mlp == Mlp::swiglu) {  // gate then up: together one [2F, C] matrix
      l.w_up = linear(name(n.gate), F, C);
      linear(name(n.up), F, C);
      if (c.mlp_bias) {
        l.b_up = add(name(n.gate) + ".bias", {F}, ParamRole::bias);
        add(name(n.up) + ".bias", {F}, ParamRole::bias);
      }
    } else {
      l.w_up = linear(name(n.fc), F, C);
      if (c.mlp_bias) l.b_up = add(name(n.fc) + ".bias", {F}, ParamRole::bias);
    }
    l.w_down = linear(name(n.down), C, F);
    if (c.mlp_bias) l.b_down = add(name(n.down) + ".bias", {C}, ParamRole::bias);
    layers_.push_back(l);
  }
  head_begin_ = total_;
  if (c.head_transform) {
    const std::string dense = named(n.head_dense, "head transform");
    head_dense_ = linear(dense, C, C);
    head_dense_bias_ = add(dense + ".bias", {C}, ParamRole::bias);
  }
  norm(n.final_norm, final_norm_, final_norm_bias_);
  lm_head_ = c.tie_word_embeddings ? embedding_ : add(n.lm_head, {c.vocab_size, C}, ParamRole::matrix);
  if (c.lm_head_bias)
    lm_head_bias_ = add(named(n.lm_head_bias, "LM head bias"), {c.vocab_size}, ParamRole::bias);
}

std::vector<ParameterLayout::Block> ParameterLayout::blocks() const {
  std::vector<Block> out = {{head_begin_, total_}};
  for (int i = static_cast<int>(layers_.size()); i-- > 0;)
    out.push_back({layer_begin(i), layer_begin(i + 1)});
  out.push_back({0, layer_begin(0)});
  return out;
}

int64_t ParameterLayout::add(std::string name, std::vector<int64_t> shape, ParamRole role, bool transposed) {
  int64_t numel = 1;
  for (auto s : shape) numel *= s;
  params_.push_back({std::move(name), std::move(shape), total_, numel, role, transposed});
  total_ += numel;
  return params_.back().offset;
}

const ParamInfo& ParameterLayout::find(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name) return p;
  fail("model has no parameter \"{}\"", name);
}

}  // namespace pt
