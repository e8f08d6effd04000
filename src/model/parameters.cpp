#include "model/parameters.h"

#include "core/error.h"

namespace pt {

ParameterLayout::ParameterLayout(const LlamaConfig& c) {
  const int64_t C = c.hidden_size, F = c.intermediate_size, D = c.head_dim;
  embedding_ = add("model.embed_tokens.weight", {c.vocab_size, C}, false);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerParams l{};
    l.attn_norm = add(p + "input_layernorm.weight", {C}, false);
    l.wq = add(p + "self_attn.q_proj.weight", {c.num_attention_heads * D, C}, true);
    l.wk = add(p + "self_attn.k_proj.weight", {c.num_key_value_heads * D, C}, true);
    l.wv = add(p + "self_attn.v_proj.weight", {c.num_key_value_heads * D, C}, true);
    l.wo = add(p + "self_attn.o_proj.weight", {C, c.num_attention_heads * D}, true);
    l.ffn_norm = add(p + "post_attention_layernorm.weight", {C}, false);
    l.w_gate_up = add(p + "mlp.gate_proj.weight", {F, C}, true);
    add(p + "mlp.up_proj.weight", {F, C}, true);  // directly after gate: together one [2F, C] matrix
    l.w_down = add(p + "mlp.down_proj.weight", {C, F}, true);
    layers_.push_back(l);
  }
  final_norm_ = add("model.norm.weight", {C}, false);
  lm_head_ = c.tie_word_embeddings ? embedding_ : add("lm_head.weight", {c.vocab_size, C}, true);
}

int64_t ParameterLayout::add(std::string name, std::vector<int64_t> shape, bool decay) {
  int64_t numel = 1;
  for (auto s : shape) numel *= s;
  params_.push_back({std::move(name), std::move(shape), total_, numel, decay});
  total_ += numel;
  return params_.back().offset;
}

const ParamInfo& ParameterLayout::find(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name) return p;
  fail("model has no parameter \"{}\"", name);
}

}  // namespace pt
