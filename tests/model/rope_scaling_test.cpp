// HF rope types against transformers (tests/fixtures/rope/expected.json, written by scripts/rope_oracle.py):
// the config fields parsed, the frequencies and attention scale, a round trip through write_rope_scaling,
// one rotation through the op, and every refusal naming its field.
#include "model/rope_scaling.h"

#include "core/error.h"
#include "core/file.h"
#include "ops/rope.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace pt {
namespace {

using nlohmann::json;

const json& oracle() {
  static const json j = json::parse(read_file(std::string(PACKTRAIN_FIXTURES) + "/rope/expected.json"));
  return j;
}

// The largest |got - want| / |want| over the table.
double max_relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]) / std::fabs(want[i]));
  return worst;
}

TEST(RopeScaling, FixtureCoversEveryType) {
  std::set<std::string> types;
  for (const json& c : oracle()["cases"])
    types.insert(parse_rope_scaling(c["config"], c["name"].get<std::string>(), 10000).type);
  EXPECT_EQ(types, (std::set<std::string>{"default", "linear", "dynamic", "yarn", "llama3"}));
}

// The fixture's float64 run of transformers' own functions agrees to rounding; its real (float32) run to
// float32 rounding of the frequencies (~3e-7 at most here), which is what HF's model uses.
TEST(RopeScaling, FrequenciesMatchTransformers) {
  for (const json& c : oracle()["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const RopeScaling r = parse_rope_scaling(c["config"], name, 10000);
    for (const json& f : c["frequencies"]) {
      SCOPED_TRACE(fmt::format("max position {}", f["max_position"].get<int64_t>()));
      const ops::RopeFrequencies got =
          rope_frequencies(r, c["head_dim"], c["max_position_embeddings"], f["max_position"]);
      EXPECT_LE(max_relative_error(got.inv_freq, f["inv_freq_f64"]), 1e-12);
      EXPECT_LE(max_relative_error(got.inv_freq, f["inv_freq_f32"]), 1e-6);
      EXPECT_NEAR(got.attention_scale, f["attention_scaling"].get<double>(), 1e-15);
    }
  }
}

// What write_rope_scaling writes reads back as the same rotary, into the source config (replacing its rope
// fields) or into a fresh one; scripts/rope_oracle.py's configs load in transformers 4 and 5 alike.
TEST(RopeScaling, WriteReadsBackTheSameRotary) {
  for (const json& c : oracle()["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const RopeScaling r = parse_rope_scaling(c["config"], name, 10000);
    json over_source = c["config"];
    write_rope_scaling(r, over_source);
    EXPECT_EQ(parse_rope_scaling(over_source, name, 10000), r) << over_source.dump();
    json fresh = {{"max_position_embeddings", c["max_position_embeddings"]}};
    write_rope_scaling(r, fresh);
    EXPECT_EQ(parse_rope_scaling(fresh, name, 1), r) << fresh.dump();
    EXPECT_EQ(fresh.contains("rope_scaling"), r.type != "default") << "transformers 4 reads rope_scaling";
    EXPECT_EQ(fresh["rope_theta"], r.theta);
    EXPECT_EQ(fresh["rope_parameters"]["rope_type"], r.type);
  }
}

// A default rotary written over a scaled config leaves no rope_scaling behind.
TEST(RopeScaling, WritingDefaultDropsAStaleRopeScaling) {
  json j = {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}, {"rope_theta", 1e4}};
  RopeScaling r;
  r.theta = 5e5;
  write_rope_scaling(r, j);
  EXPECT_FALSE(j.contains("rope_scaling"));
  EXPECT_EQ(parse_rope_scaling(j, "j", 1), r);
}

// HF's rotate_half with float32 cos and sin (from float32 frequencies and angles) against the op in double:
// their difference grows with the angle, |q| * position * ~1e-7.
TEST(RopeScaling, RotationMatchesTransformers) {
  const json& rot = oracle()["rotation"];
  const json* c = nullptr;
  for (const json& cs : oracle()["cases"])
    if (cs["name"] == rot["case"]) c = &cs;
  ASSERT_NE(c, nullptr);
  const RopeScaling r = parse_rope_scaling((*c)["config"], rot["case"].get<std::string>(), 10000);
  std::vector<int32_t> pos = rot["positions"];
  std::vector<double> q = rot["q"], want = rot["q_rotated"], got(q.size());
  const int64_t T = rot["shape"][0], H = rot["shape"][1], D = rot["shape"][2];
  const ops::RopeFrequencies f =
      rope_frequencies(r, D, (*c)["max_position_embeddings"], *std::max_element(pos.begin(), pos.end()));
  EXPECT_GT(f.attention_scale, 1.1) << "the case should exercise YaRN's attention scale";
  ops::rope_forward(Tensor::of(q.data(), {T, H, D}), Tensor::of(pos.data(), {T}), f,
                    Tensor::of(got.data(), {T, H, D}));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H * D; ++i) {
      const size_t k = static_cast<size_t>(t * H * D + i);
      EXPECT_NEAR(got[k], want[k], 1e-6 * (1 + pos[static_cast<size_t>(t)]))
          << "token " << t << " element " << i;
    }
}

// HF reads: rope_scaling (4 and 5) before rope_parameters; the dict's theta, the top-level one or the
// model's default; the old key "type"; yarn's and llama3's original length from max_position_embeddings or
// a top-level field when the dict lacks it.
TEST(RopeScaling, ParsesWhatTransformersReads) {
  EXPECT_EQ(parse_rope_scaling(json::object(), "c", 5e5), RopeScaling{.theta = 5e5});
  EXPECT_EQ(parse_rope_scaling(json{{"rope_theta", 1e6}, {"rope_scaling", nullptr}}, "c", 1).theta, 1e6);
  const RopeScaling linear =
      parse_rope_scaling(json::parse(R"({"rope_theta": 100, "rope_scaling": {"type": "linear", "factor": 3},
                                         "rope_parameters": {"rope_type": "default", "rope_theta": 100}})"),
                         "c", 1);
  EXPECT_EQ(linear, (RopeScaling{.type = "linear", .theta = 100, .factor = 3}));
  EXPECT_EQ(parse_rope_scaling(json::parse(R"({"rope_scaling": {}, "rope_parameters": {"rope_type": "dynamic",
                                               "factor": 2, "rope_theta": 7}})"),
                               "c", 1),
            (RopeScaling{.type = "dynamic", .theta = 7, .factor = 2}));
  const RopeScaling yarn = parse_rope_scaling(
      json::parse(R"({"max_position_embeddings": 9000, "rope_scaling": {"rope_type": "yarn", "factor": 2,
                      "attention_factor": null, "truncate": false, "partial_rotary_factor": 1.0}})"),
      "c", 1e4);
  EXPECT_EQ(yarn.original_max_position_embeddings, 9000);
  EXPECT_FALSE(yarn.truncate);
  EXPECT_FALSE(yarn.attention_factor.has_value());
  const RopeScaling llama3 = parse_rope_scaling(
      json::parse(R"({"max_position_embeddings": 9000, "original_max_position_embeddings": 4096,
                      "partial_rotary_factor": 1, "rope_parameters": {"rope_type": "llama3", "factor": 8,
                      "low_freq_factor": 1, "high_freq_factor": 4, "rope_theta": 5e5}})"),
      "c", 1e4);
  EXPECT_EQ(llama3.original_max_position_embeddings, 4096);
  EXPECT_EQ(parse_rope_scaling(json{{"original_max_position_embeddings", 4096}}, "c", 1e4)
                .original_max_position_embeddings,
            0)
      << "only llama3 and yarn read it";
}

TEST(RopeScaling, FrequenciesOfTheSimpleTypes) {
  const ops::RopeFrequencies plain = ops::RopeFrequencies::plain(8, 1e4);
  const ops::RopeFrequencies d = rope_frequencies(RopeScaling{}, 8, 2048, 5000);
  EXPECT_EQ(d.inv_freq, plain.inv_freq);
  EXPECT_EQ(d.attention_scale, 1.0);
  const ops::RopeFrequencies l = rope_frequencies(RopeScaling{.type = "linear", .factor = 4}, 8, 2048, 5000);
  for (size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(l.inv_freq[i], plain.inv_freq[i] / 4);
  // Dynamic NTK is the plain rotary up to the trained length, then a larger base.
  const RopeScaling dyn{.type = "dynamic", .factor = 2};
  const ops::RopeFrequencies short_batch = rope_frequencies(dyn, 8, 2048, 2047);
  for (size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(short_batch.inv_freq[i], plain.inv_freq[i]);
  const ops::RopeFrequencies long_batch = rope_frequencies(dyn, 8, 2048, 4095);
  const double base = 1e4 * std::pow(2.0 * 4096 / 2048 - 1, 8.0 / 6);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_DOUBLE_EQ(long_batch.inv_freq[i], std::pow(base, -2.0 * double(i) / 8));
}

void expect_error(const std::function<void()>& call, const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one naming " << parts.front();
  } catch (const Error& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

void expect_refused(const std::string& config, const std::vector<std::string>& parts) {
  SCOPED_TRACE(config);
  std::vector<std::string> all = parts;
  all.insert(all.begin(), "my/config.json: ");
  expect_error([&] { parse_rope_scaling(json::parse(config), "my/config.json", 1e4); }, all);
}

TEST(RopeScaling, RefusesWhatItCannotReproduceByName) {
  // Other rope types.
  expect_refused(R"({"rope_scaling": {"rope_type": "longrope", "long_factor": [1], "short_factor": [1]}})",
                 {"\"rope_scaling.rope_type\" is \"longrope\"", "default, linear, dynamic, yarn and llama3"});
  expect_refused(R"({"rope_parameters": {"type": "su", "factor": 2}})",
                 {"\"rope_parameters.type\" is \"su\""});
  expect_refused(R"({"rope_parameters": {"rope_type": 3}})", {"\"rope_parameters.rope_type\" is 3"});
  // Keys the type does not use.
  expect_refused(R"({"rope_parameters": {"rope_type": "default", "factor": 2.0}})",
                 {"\"rope_parameters.factor\" is 2.0", "rope type \"default\" does not use"});
  expect_refused(R"({"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                     "high_freq_factor": 4, "original_max_position_embeddings": 8192, "beta_fast": 32}})",
                 {"\"rope_scaling.beta_fast\" is 32", "\"llama3\"", "low_freq_factor"});
  expect_refused(
      R"({"rope_scaling": {"type": "dynamic", "factor": 2, "original_max_position_embeddings": 4096}})",
      {"\"rope_scaling.original_max_position_embeddings\" is 4096", "\"dynamic\""});
  expect_refused(R"({"rope_scaling": {"type": "yarn", "factor": 2, "mrope_section": [16, 24, 24]}})",
                 {"\"rope_scaling.mrope_section\""});
  // Partial rotary embeddings.
  expect_refused(R"({"partial_rotary_factor": 0.5})", {"\"partial_rotary_factor\" is 0.5", "whole heads"});
  expect_refused(R"({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25}})",
                 {"\"rope_parameters.partial_rotary_factor\" is 0.25"});
  // Missing, mistyped or out-of-range values.
  expect_refused(R"({"rope_scaling": {"type": "linear"}})", {"\"rope_scaling.factor\" is missing"});
  expect_refused(R"({"rope_scaling": {"rope_type": "llama3", "factor": 8, "high_freq_factor": 4}})",
                 {"\"rope_scaling.low_freq_factor\" is missing"});
  expect_refused(R"({"rope_scaling": {"type": "linear", "factor": "4"}})",
                 {"\"rope_scaling.factor\" is \"4\"", "a number"});
  expect_refused(R"({"rope_scaling": {"type": "linear", "factor": -1}})", {"factor is -1"});
  expect_refused(R"({"rope_theta": 0})", {"rope_theta is 0"});
  expect_refused(R"({"rope_scaling": {"type": "yarn", "factor": 4, "truncate": 0}})",
                 {"\"rope_scaling.truncate\" is 0", "true or false"});
  expect_refused(R"({"rope_scaling": {"type": "yarn", "factor": 4, "truncate": null}})",
                 {"\"rope_scaling.truncate\" is null"});
  expect_refused(
      R"({"rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 4096.5}})",
      {"\"rope_scaling.original_max_position_embeddings\" is 4096.5"});
  expect_refused(R"({"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4,
                     "high_freq_factor": 1, "original_max_position_embeddings": 8192}})",
                 {"high_freq_factor is 1"});
  expect_refused(R"({"rope_scaling": [1]})", {"\"rope_scaling\" is [1]"});
  // yarn's rotation counts: a negative one has no correction dimension (the fuzzer's NaN frequencies).
  expect_refused(R"({"rope_scaling": {"type": "yarn", "factor": 4, "beta_slow": -1e19}})",
                 {"beta_slow is -1e+19", "positive"});
  expect_refused(R"({"rope_theta": 1, "rope_scaling": {"type": "yarn", "factor": 4}})", {"rope_theta is 1"});
  // Fields that transformers 4 and 5 would read differently.
  expect_refused(R"({"rope_theta": 1e4, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5}})",
                 {"\"rope_theta\" is 10000.0", "\"rope_parameters.rope_theta\" is 500000.0"});
  expect_refused(R"({"rope_scaling": {"rope_type": "linear", "type": "dynamic", "factor": 2}})",
                 {"\"rope_scaling.rope_type\" is \"linear\"", "\"rope_scaling.type\" is \"dynamic\""});
  expect_refused(R"({"original_max_position_embeddings": 4096, "rope_scaling": {"type": "yarn", "factor": 4,
                     "original_max_position_embeddings": 8192}})",
                 {"\"original_max_position_embeddings\" is 4096", "is 8192"});
}

// Rotation counts so small that their correction dimension overflows put the ramp past every dimension:
// the frequencies stay finite (all extrapolated or interpolated, as the limit is).
TEST(RopeScaling, YarnWithVanishingRotationCountsStaysFinite) {
  const RopeScaling r{.type = "yarn", .factor = 4, .original_max_position_embeddings = 16, .beta_fast = 1e-310,
                      .beta_slow = 1e-320};
  const auto f = rope_frequencies(r, 8, 64, 64);
  for (const double v : f.inv_freq) EXPECT_TRUE(std::isfinite(v)) << v;
  EXPECT_TRUE(std::isfinite(f.attention_scale));
}

TEST(RopeScaling, FrequenciesRefuseABadStructOrShape) {
  expect_error([] { rope_frequencies(RopeScaling{.type = "longrope"}, 64, 2048, 0); },
               {"rope_frequencies", "\"longrope\""});
  expect_error([] { rope_frequencies(RopeScaling{.type = "yarn", .factor = 0}, 64, 2048, 0); },
               {"factor is 0"});
  expect_error([] { rope_frequencies(RopeScaling{}, 7, 2048, 0); }, {"head dim", "7"});
  expect_error([] { rope_frequencies(RopeScaling{.type = "dynamic", .factor = 2}, 2, 2048, 0); },
               {"head dim > 2"});
  json j;
  expect_error([&] { write_rope_scaling(RopeScaling{.theta = -1}, j); },
               {"write_rope_scaling", "rope_theta is -1"});
}

}  // namespace
}  // namespace pt
