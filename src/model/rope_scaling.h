// Hugging Face's rotary embedding types, read from and written to config.json, and the frequencies each
// gives (transformers' modeling_rope_utils, reimplemented in double): default, linear (positions divided
// by the factor), dynamic (NTK-aware base growth past the trained length), yarn (a ramp between interpolated
// and extrapolated frequencies, plus an attention scale on cos and sin) and llama3 (Llama 3.1's smoothed
// band between scaled low and kept high frequencies).
#pragma once

#include "ops/rope.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace pt {

struct RopeScaling {  // HF rope_parameters (transformers 5) / rope_scaling + rope_theta (transformers 4)
  std::string type = "default";  // default, linear, dynamic, yarn, llama3
  double theta = 10000;
  double factor = 1;  // every type but default
  // llama3 and yarn (0: the config's max_position_embeddings). Dynamic NTK scales from the model's
  // max_position_embeddings, as transformers does (it ignores this field there).
  int64_t original_max_position_embeddings = 0;
  double low_freq_factor = 1, high_freq_factor = 4;  // llama3
  double beta_fast = 32, beta_slow = 1;              // yarn; 0 means the default, as in HF
  std::optional<double> attention_factor{}, mscale{}, mscale_all_dim{};  // yarn
  bool truncate = true;                                                  // yarn

  bool operator==(const RopeScaling&) const = default;
};

// Reads the rope fields of an HF config.json object: rope_scaling (transformers 4, which 5 also reads and
// prefers) or rope_parameters, plus rope_theta; `default_theta` when none is given. Refuses by name
// (pt::fail, naming `origin`, the field, its value and what is supported) any rope type other than the
// five, any key inside rope_parameters/rope_scaling that the type does not use, partial_rotary_factor != 1,
// and fields that transformers 4 and 5 would read differently (two different thetas or original lengths).
RopeScaling parse_rope_scaling(const nlohmann::json& config, const std::string& origin, double default_theta);

// Writes rope_theta, rope_parameters (transformers 5) and, for a scaled type, rope_scaling (transformers 4;
// 5 reads it first) into `config`, replacing any there, so that both read back this rotary. An
// original_max_position_embeddings of 0 is written as the config's max_position_embeddings when it holds
// one (set that first), since transformers 4's llama3 requires the field.
void write_rope_scaling(const RopeScaling& r, nlohmann::json& config);

// The frequencies of a model's rotary for a batch whose largest position id is max_position (dynamic NTK
// depends on it: HF recomputes them from max(position_ids) + 1 past max_position_embeddings, as a fresh
// model does for that batch; a model that has seen a longer batch keeps its longer-batch frequencies in HF).
ops::RopeFrequencies rope_frequencies(const RopeScaling& r, int64_t head_dim, int64_t max_position_embeddings,
                                      int64_t max_position);

}  // namespace pt
