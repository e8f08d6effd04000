#include "model/rope_scaling.h"

#include "core/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <span>

namespace pt {

using nlohmann::json;

namespace {

constexpr const char* kSupported = "default, linear, dynamic, yarn and llama3";

// The keys each type reads inside rope_scaling / rope_parameters, besides rope_type (or its old name
// type), rope_theta and partial_rotary_factor (transformers 5's lists; dynamic's optional
// original_max_position_embeddings of transformers 4 is left out because neither version uses it).
std::span<const char* const> keys_of(const std::string& type) {
  static constexpr const char* kScaled[] = {"factor"};
  static constexpr const char* kLlama3[] = {"factor", "original_max_position_embeddings", "low_freq_factor",
                                            "high_freq_factor"};
  static constexpr const char* kYarn[] = {"factor",           "original_max_position_embeddings",
                                          "attention_factor", "beta_fast",
                                          "beta_slow",        "mscale",
                                          "mscale_all_dim",   "truncate"};
  if (type == "linear" || type == "dynamic") return kScaled;
  if (type == "llama3") return kLlama3;
  if (type == "yarn") return kYarn;
  return {};
}

bool known_type(const std::string& type) {
  return type == "default" || type == "linear" || type == "dynamic" || type == "yarn" || type == "llama3";
}

// Ranges the formulas need, whatever built the struct; fields are named as in config.json.
void validate(const RopeScaling& r, const std::string& origin) {
  if (!known_type(r.type))
    fail("{}: rope type \"{}\" is not supported; packtrain supports {}", origin, r.type, kSupported);
  auto positive = [&](const char* name, double v) {
    if (!(v > 0) || !std::isfinite(v))
      fail("{}: rope {} is {}; it must be positive and finite", origin, name, v);
  };
  positive("rope_theta", r.theta);
  if (r.type == "default") return;
  positive("factor", r.factor);
  if (r.original_max_position_embeddings < 0)
    fail(
        "{}: rope original_max_position_embeddings is {}; it must be positive (or 0: "
        "max_position_embeddings)",
        origin, r.original_max_position_embeddings);
  if (r.type == "llama3") {
    positive("low_freq_factor", r.low_freq_factor);
    if (!(r.high_freq_factor > r.low_freq_factor) || !std::isfinite(r.high_freq_factor))
      fail("{}: rope high_freq_factor is {}; it must be finite and above low_freq_factor ({})", origin,
           r.high_freq_factor, r.low_freq_factor);
  }
  if (r.type == "yarn") {
    if (r.attention_factor) positive("attention_factor", *r.attention_factor);
    for (auto [name, v] : {std::pair{"beta_fast", r.beta_fast}, std::pair{"beta_slow", r.beta_slow},
                           std::pair{"mscale", r.mscale.value_or(0)},
                           std::pair{"mscale_all_dim", r.mscale_all_dim.value_or(0)}})
      if (!std::isfinite(v)) fail("{}: rope {} is {}; it must be finite", origin, name, v);
    // Rotation counts: a negative one has no correction dimension (the log of a negative number).
    for (auto [name, v] : {std::pair{"beta_fast", r.beta_fast}, std::pair{"beta_slow", r.beta_slow}})
      if (v < 0) fail("{}: rope {} is {}; it must be positive (or 0: the default)", origin, name, v);
    if (r.theta == 1) fail("{}: rope_theta is 1; yarn's correction range divides by its log", origin);
  }
}

// The rope fields of one config.json, read with errors naming the origin, the field and its value.
class Reader {
 public:
  Reader(const json& config, const std::string& origin) : config_(config), origin_(origin) {
    if (!config.is_object()) fail("{}: expected a JSON object with the model's config fields", origin);
  }

  // transformers 5 reads rope_scaling first (transformers 4 reads only it), then rope_parameters.
  void pick_dict() {
    for (const char* name : {"rope_scaling", "rope_parameters"}) {
      const json* d = top(name);
      if (!d) continue;
      if (!d->is_object())
        fail("{}: \"{}\" is {}; expected an object of rope parameters or null", origin_, name, d->dump());
      if (d->empty()) continue;
      dict_ = d, where_ = name;
      return;
    }
  }

  std::string type() const {
    const json *rope_type = in_dict("rope_type"), *old = in_dict("type");
    if (rope_type && old && *rope_type != *old)
      fail("{}: {} is {} but {} is {}; give one rope type", origin_, field("rope_type"), rope_type->dump(),
           field("type"), old->dump());
    if (!rope_type && !old) return "default";
    const std::string name = field(rope_type ? "rope_type" : "type");
    const json& t = rope_type ? *rope_type : *old;
    if (!t.is_string() || !known_type(t.get<std::string>()))
      fail("{}: {} is {}; packtrain supports the rope types {}", origin_, name, t.dump(), kSupported);
    return t.get<std::string>();
  }

  void refuse_stray_keys(const std::string& type) const {
    if (!dict_) return;
    const auto keys = keys_of(type);
    for (const auto& [key, value] : dict_->items()) {
      if (key == "rope_type" || key == "type" || key == "rope_theta" || key == "partial_rotary_factor")
        continue;
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      std::string known;
      for (const char* k : keys) known += std::string(known.empty() ? "" : ", ") + k;
      fail("{}: {} is {}, which rope type \"{}\" does not use (it reads {})", origin_, field(key),
           value.dump(), type, known.empty() ? "only rope_theta" : known);
    }
  }

  void refuse_partial_rotary() const {
    for (const auto& [v, name] :
         {std::pair{top("partial_rotary_factor"), std::string("\"partial_rotary_factor\"")},
          std::pair{in_dict("partial_rotary_factor"), field("partial_rotary_factor")}})
      if (v && *v != 1)
        fail("{}: {} is {}; packtrain rotates whole heads (partial_rotary_factor 1)", origin_, name,
             v->dump());
  }

  // A value given in the dict and at the top level: transformers 5 takes one, 4 the other, so they must
  // agree.
  double theta(double default_theta) const {
    const json *inner = in_dict("rope_theta"), *outer = top("rope_theta");
    const double t = inner   ? number(inner, field("rope_theta"))
                     : outer ? number(outer, "\"rope_theta\"")
                             : default_theta;
    if (inner && outer && number(outer, "\"rope_theta\"") != t)
      fail("{}: \"rope_theta\" is {} but {} is {}; transformers 4 and 5 would read different thetas", origin_,
           outer->dump(), field("rope_theta"), inner->dump());
    return t;
  }

  // llama3 and yarn: the dict's value; else the top-level field (transformers 5 prefers it, 4 ignores it, so
  // both must agree when both are given); else max_position_embeddings, as transformers 5 fills it in.
  int64_t original_max_position_embeddings() const {
    const json *inner = in_dict("original_max_position_embeddings"),
               *outer = top("original_max_position_embeddings");
    const std::string inner_name = field("original_max_position_embeddings");
    if (inner && outer &&
        integer(inner, inner_name) != integer(outer, "\"original_max_position_embeddings\""))
      fail(
          "{}: \"original_max_position_embeddings\" is {} but {} is {}; transformers 4 and 5 would read "
          "different lengths",
          origin_, outer->dump(), inner_name, inner->dump());
    if (inner) return integer(inner, inner_name);
    if (outer) return integer(outer, "\"original_max_position_embeddings\"");
    if (const json* mpe = top("max_position_embeddings")) return integer(mpe, "\"max_position_embeddings\"");
    return 0;
  }

  // A key inside the dict: null counts as absent, as in HF's dict.get.
  const json* in_dict(const std::string& key) const {
    if (!dict_ || !dict_->contains(key) || (*dict_)[key].is_null()) return nullptr;
    return &(*dict_)[key];
  }
  double required(const char* key, const std::string& type) const {
    const json* v = in_dict(key);
    if (!v) fail("{}: {} is missing; rope type \"{}\" needs it", origin_, field(key), type);
    return number(v, field(key));
  }
  void optional(const char* key, double& out) const {
    if (const json* v = in_dict(key)) out = number(v, field(key));
  }
  void optional(const char* key, std::optional<double>& out) const {
    if (const json* v = in_dict(key)) out = number(v, field(key));
  }
  // Unlike the numbers, a null here is refused: HF would read it as false, not as the default true.
  void optional(const char* key, bool& out) const {
    if (!dict_ || !dict_->contains(key)) return;
    const json& v = (*dict_)[key];
    if (!v.is_boolean()) fail("{}: {} is {}; expected true or false", origin_, field(key), v.dump());
    out = v.get<bool>();
  }

 private:
  const json* top(const char* key) const {
    if (!config_.contains(key) || config_[key].is_null()) return nullptr;
    return &config_[key];
  }
  std::string field(const std::string& key) const { return fmt::format("\"{}.{}\"", where_, key); }
  double number(const json* v, const std::string& name) const {
    if (!v->is_number()) fail("{}: {} is {}; expected a number", origin_, name, v->dump());
    return v->get<double>();
  }
  int64_t integer(const json* v, const std::string& name) const {
    const double d = number(v, name);
    if (!(d >= 1) || d != std::floor(d) || d > 1e15)
      fail("{}: {} is {}; expected a positive integer", origin_, name, v->dump());
    return static_cast<int64_t>(d);
  }

  const json& config_;
  const std::string& origin_;
  const json* dict_ = nullptr;
  std::string where_ = "rope_parameters";
};

// YaRN's attention scale for an interpolation factor (the paper's 0.1 ln(s) + 1, times mscale).
double yarn_mscale(double factor, double mscale) {
  return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

}  // namespace

RopeScaling parse_rope_scaling(const json& config, const std::string& origin, double default_theta) {
  Reader in(config, origin);
  in.pick_dict();
  RopeScaling r;
  r.type = in.type();
  in.refuse_stray_keys(r.type);
  in.refuse_partial_rotary();
  r.theta = in.theta(default_theta);
  if (r.type != "default") r.factor = in.required("factor", r.type);
  if (r.type == "llama3") {
    r.low_freq_factor = in.required("low_freq_factor", r.type);
    r.high_freq_factor = in.required("high_freq_factor", r.type);
  }
  if (r.type == "yarn") {
    in.optional("attention_factor", r.attention_factor);
    in.optional("beta_fast", r.beta_fast);
    in.optional("beta_slow", r.beta_slow);
    in.optional("mscale", r.mscale);
    in.optional("mscale_all_dim", r.mscale_all_dim);
    in.optional("truncate", r.truncate);
  }
  if (r.type == "llama3" || r.type == "yarn")
    r.original_max_position_embeddings = in.original_max_position_embeddings();
  validate(r, origin);
  return r;
}

void write_rope_scaling(const RopeScaling& r, json& config) {
  validate(r, "write_rope_scaling");
  json params = {{"rope_type", r.type}};
  if (r.type != "default") params["factor"] = r.factor;
  if (r.type == "llama3" || r.type == "yarn") {
    int64_t original = r.original_max_position_embeddings;
    if (original == 0 && config.contains("max_position_embeddings") &&
        config["max_position_embeddings"].is_number_integer())
      original = config["max_position_embeddings"].get<int64_t>();
    if (original > 0) params["original_max_position_embeddings"] = original;
  }
  if (r.type == "llama3") {
    params["low_freq_factor"] = r.low_freq_factor;
    params["high_freq_factor"] = r.high_freq_factor;
  }
  if (r.type == "yarn") {
    params["beta_fast"] = r.beta_fast;
    params["beta_slow"] = r.beta_slow;
    if (r.attention_factor) params["attention_factor"] = *r.attention_factor;
    if (r.mscale) params["mscale"] = *r.mscale;
    if (r.mscale_all_dim) params["mscale_all_dim"] = *r.mscale_all_dim;
    if (!r.truncate) params["truncate"] = false;  // written only when off: older 4.x releases lack the key
  }
  // transformers 4 reads rope_theta at the top and the rest from rope_scaling (a rope_theta inside draws a
  // warning there); 5 prefers rope_scaling and fills its theta from the top-level field.
  if (r.type == "default")
    config.erase("rope_scaling");
  else
    config["rope_scaling"] = params;
  params["rope_theta"] = r.theta;
  config["rope_parameters"] = params;
  config["rope_theta"] = r.theta;
}

ops::RopeFrequencies rope_frequencies(const RopeScaling& r, int64_t head_dim, int64_t max_position_embeddings,
                                      int64_t max_position) {
  validate(r, "rope_frequencies");
  if (head_dim <= 0 || head_dim % 2 != 0)
    fail("rope_frequencies: head dim must be positive and even, got {}", head_dim);
  if (max_position_embeddings <= 0)
    fail("rope_frequencies: max_position_embeddings must be positive, got {}", max_position_embeddings);
  const double D = double(head_dim), two_pi = 2 * std::numbers::pi;
  const double original = double(r.original_max_position_embeddings > 0 ? r.original_max_position_embeddings
                                                                        : max_position_embeddings);
  ops::RopeFrequencies f;
  f.inv_freq.resize(static_cast<size_t>(head_dim / 2));
  auto plain = [&](double base, size_t i) { return 1.0 / std::pow(base, double(2 * i) / D); };

  if (r.type == "dynamic") {
    // The base grows with the batch's length past the trained one: seq_len = max(max_position + 1, L).
    if (head_dim == 2) fail("rope_frequencies: dynamic NTK needs head dim > 2 (its exponent is D / (D - 2))");
    const double L = double(max_position_embeddings);
    const double seq_len = std::max(double(max_position) + 1, L);
    const double base = r.theta * std::pow(r.factor * seq_len / L - (r.factor - 1), D / (D - 2));
    for (size_t i = 0; i < f.inv_freq.size(); ++i) f.inv_freq[i] = plain(base, i);
    return f;
  }
  for (size_t i = 0; i < f.inv_freq.size(); ++i) f.inv_freq[i] = plain(r.theta, i);
  if (r.type == "linear") {
    for (double& v : f.inv_freq) v /= r.factor;
  } else if (r.type == "llama3") {
    // Wavelengths under L / high_freq_factor keep their frequency, those over L / low_freq_factor are
    // divided by the factor, and the band between blends the two, linearly in L / wavelength.
    const double low_wavelen = original / r.low_freq_factor, high_wavelen = original / r.high_freq_factor;
    for (double& v : f.inv_freq) {
      const double wavelen = two_pi / v;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        v /= r.factor;
      } else {
        const double smooth =
            (original / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
        v = (1 - smooth) * v / r.factor + smooth * v;
      }
    }
  } else if (r.type == "yarn") {
    // Dimensions that turn more than beta_fast times over the original length extrapolate (keep their
    // frequency), those under beta_slow interpolate (divided by the factor), with a linear ramp between.
    const double beta_fast = r.beta_fast != 0 ? r.beta_fast : 32,
                 beta_slow = r.beta_slow != 0 ? r.beta_slow : 1;
    auto correction_dim = [&](double rotations) {
      return D * std::log(original / (rotations * two_pi)) / (2 * std::log(r.theta));
    };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (r.truncate) low = std::floor(low), high = std::ceil(high);
    // As HF; a beta so small that its correction dimension overflows puts it past every dimension.
    low = std::min(std::max(low, 0.0), std::numeric_limits<double>::max()), high = std::min(high, D - 1);
    if (low == high) high += 0.001;  // as HF, against a zero-width ramp
    for (size_t i = 0; i < f.inv_freq.size(); ++i) {
      const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1 - ramp, pos_freq = std::pow(r.theta, double(2 * i) / D);
      f.inv_freq[i] = 1 / (r.factor * pos_freq) * (1 - extrapolation) + 1 / pos_freq * extrapolation;
    }
    if (r.attention_factor)
      f.attention_scale = *r.attention_factor;
    else if (r.mscale.value_or(0) != 0 && r.mscale_all_dim.value_or(0) != 0)
      f.attention_scale = yarn_mscale(r.factor, *r.mscale) / yarn_mscale(r.factor, *r.mscale_all_dim);
    else
      f.attention_scale = yarn_mscale(r.factor, 1);
  }
  return f;
}

}  // namespace pt
