#include "checkpoint/checkpoint.h"

#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/file.h"
#include "core/log.h"

#include <fcntl.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>

namespace pt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kMasksFile = "masks.safetensors";

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

std::vector<StTensorToWrite> named_tensors(const ParameterLayout& layout, std::span<const float> flat,
                                           const std::string& prefix) {
  std::vector<StTensorToWrite> out;
  for (const auto& p : layout.params())
    out.push_back({prefix + p.name, StDtype::kF32, p.shape, flat.data() + p.offset});
  return out;
}

void read_named(const SafetensorsReader& r, const ParameterLayout& layout, std::span<float> flat,
                const std::string& prefix) {
  for (const auto& p : layout.params())
    r.read_f32(prefix + p.name, p.shape,
               flat.subspan(static_cast<size_t>(p.offset), static_cast<size_t>(p.numel)));
}

// Tensors the model does not read (rotary inv_freq buffers, heads of other architectures) are listed, so
// a checkpoint that only looks compatible does not load silently. A tied model's lm_head.weight is the
// embedding by definition (Hugging Face ignores it too), so it is skipped quietly.
void warn_unused(const SafetensorsReader& r, const ParameterLayout& layout, const std::string& dir) {
  std::set<std::string> used;
  for (const auto& p : layout.params()) used.insert(p.name);
  used.insert("lm_head.weight");
  std::string unused;
  for (const auto& name : r.names())
    if (!used.count(name)) unused += (unused.empty() ? "" : ", ") + name;
  if (!unused.empty()) log_warn("{}: ignoring tensors the model does not use: {}", dir, unused);
}

// Removes NAME.tmp directories that interrupted saves left behind.
void remove_partial_saves(const fs::path& root) {
  for (const auto& entry : fs::directory_iterator(root))
    if (entry.is_directory() && entry.path().extension() == ".tmp") fs::remove_all(entry.path());
}

}  // namespace

void save_model_dir(const std::string& dir, const LlamaConfig& config, std::span<const float> params,
                    const std::string& tokenizer_json) {
  ParameterLayout layout(config);
  PT_ASSERT(static_cast<int64_t>(params.size()) == layout.total());
  fs::create_directories(dir);
  write_file_atomic((fs::path(dir) / "config.json").string(), config_to_json(config));
  write_safetensors((fs::path(dir) / "model.safetensors").string(), named_tensors(layout, params, ""),
                    {{"format", "pt"}});
  if (!tokenizer_json.empty()) write_file_atomic((fs::path(dir) / "tokenizer.json").string(), tokenizer_json);
}

ModelWeights load_model_dir(const std::string& dir) {
  auto config_path = fs::path(dir) / "config.json";
  if (!fs::exists(config_path))
    fail("{}: no config.json; a model directory needs config.json and safetensors weights", dir);
  ModelWeights w{load_config(config_path.string()), {}};
  ParameterLayout layout(w.config);
  auto reader = SafetensorsReader::open(dir);
  w.params.assign(static_cast<size_t>(layout.total()), 0.0f);
  read_named(reader, layout, w.params, "");
  warn_unused(reader, layout, dir);
  return w;
}

std::string save_training_checkpoint(const std::string& root, const LlamaConfig& config,
                                     std::span<const float> params, std::span<const float> adam_m,
                                     std::span<const float> adam_v, const TrainerState& state,
                                     const std::string& tokenizer_json, std::span<const MaskTensor> masks) {
  const auto name = fmt::format("step-{:08}", state.step);
  const fs::path final_dir = fs::path(root) / name, tmp_dir = fs::path(root) / (name + ".tmp");
  fs::create_directories(root);
  remove_partial_saves(root);
  save_model_dir(tmp_dir.string(), config, params, tokenizer_json);
  ParameterLayout layout(config);
  auto moments = named_tensors(layout, adam_m, "exp_avg.");
  auto second = named_tensors(layout, adam_v, "exp_avg_sq.");
  moments.insert(moments.end(), second.begin(), second.end());
  write_safetensors((tmp_dir / "optimizer.safetensors").string(), moments, {});
  if (!masks.empty()) {
    std::vector<StTensorToWrite> m;
    for (const auto& mask : masks) m.push_back({mask.name, StDtype::kU8, mask.shape, mask.values.data()});
    write_safetensors((tmp_dir / kMasksFile).string(), m, {});
  }
  json st = {{"step", state.step},
             {"epoch", state.epoch},
             {"batches_in_epoch", state.batches_in_epoch},
             {"seed", state.seed},
             {"tokens_seen", state.tokens_seen}};
  if (state.position) st["position"] = *state.position;
  write_file_atomic((tmp_dir / "trainer_state.json").string(), st.dump(2) + "\n");
  fsync_dir(tmp_dir);
  fs::remove_all(final_dir);  // a checkpoint of this step from an earlier, abandoned run
  fs::rename(tmp_dir, final_dir);
  fsync_dir(root);
  write_file_atomic((fs::path(root) / "latest").string(), name + "\n");
  return final_dir.string();
}

std::optional<std::string> latest_checkpoint(const std::string& root) {
  auto pointer = fs::path(root) / "latest";
  if (!fs::exists(pointer)) return std::nullopt;
  auto name = read_file(pointer.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  auto dir = fs::path(root) / name;
  if (name.empty() || !fs::is_directory(dir))
    fail("{}: points to \"{}\", which is not a checkpoint directory; delete the file to start afresh",
         pointer.string(), name);
  return dir.string();
}

TrainingCheckpoint load_training_checkpoint(const std::string& dir) {
  TrainingCheckpoint ck;
  ck.dir = dir;
  ck.weights = load_model_dir(dir);
  ParameterLayout layout(ck.weights.config);
  auto n = static_cast<size_t>(layout.total());
  ck.adam_m.assign(n, 0.0f);
  ck.adam_v.assign(n, 0.0f);
  auto opt = SafetensorsReader::open((fs::path(dir) / "optimizer.safetensors").string());
  read_named(opt, layout, ck.adam_m, "exp_avg.");
  read_named(opt, layout, ck.adam_v, "exp_avg_sq.");
  if (const auto masks = fs::path(dir) / kMasksFile; fs::exists(masks)) {
    const auto reader = SafetensorsReader::open(masks.string());
    for (const auto& name : reader.names()) {
      MaskTensor& m = ck.masks.emplace_back();
      m.name = name;
      m.shape = reader.info(name).shape;
      reader.read_u8(name, m.shape, m.values);
    }
  }
  auto state_path = (fs::path(dir) / "trainer_state.json").string();
  try {
    auto st = json::parse(read_file(state_path));
    ck.state = {st.at("step").get<int64_t>(),
                st.at("epoch").get<int64_t>(),
                st.at("batches_in_epoch").get<int64_t>(),
                st.at("seed").get<uint64_t>(),
                st.at("tokens_seen").get<int64_t>(),
                std::nullopt};
    if (st.contains("position")) ck.state.position = st.at("position").get<int64_t>();
  } catch (const json::exception& e) {
    fail("{}: malformed trainer state ({}); the checkpoint is damaged, resume from an earlier one",
         state_path, e.what());
  }
  return ck;
}

}  // namespace pt
