#include "checkpoint/checkpoint.h"

#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/file.h"
#include "core/log.h"
#include "model/families.h"

#include <fcntl.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

namespace pt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kMasksFile = "masks.safetensors";
constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// The flat buffer's tensors under their names: in HF's layout for a model file (Conv1D weights
// transposed back to [in, out] into `scratch`), or as the flat buffer holds them for packtrain's own
// files (optimizer moments).
std::vector<StTensorToWrite> named_tensors(const ParameterLayout& layout, std::span<const float> flat,
                                           const std::string& prefix, bool hf_layout,
                                           std::vector<std::vector<float>>& scratch) {
  std::vector<StTensorToWrite> out;
  for (const auto& p : layout.params()) {
    const float* data = flat.data() + p.offset;
    if (hf_layout && p.transposed) {
      const int64_t rows = p.shape[1], cols = p.shape[0];  // as the flat buffer holds it
      std::vector<float>& t = scratch.emplace_back(static_cast<size_t>(p.numel));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = data[r * cols + c];
      data = t.data();
    }
    out.push_back({prefix + p.name, StDtype::kF32, hf_layout ? p.shape : p.flat_shape(), data});
  }
  return out;
}

void read_named(const SafetensorsReader& r, const ParameterLayout& layout, std::span<float> flat,
                const std::string& prefix) {
  for (const auto& p : layout.params())
    r.read_f32(prefix + p.name, p.flat_shape(),
               flat.subspan(static_cast<size_t>(p.offset), static_cast<size_t>(p.numel)));
}

// A moment under `prefix` (exp_avg. or exp_avg_sq.) plus each parameter's name, in its format: F32, BF16
// (the values are bf16 already: written exactly), or U8 codes beside one F32 tensor of every block's absmax
// in flat order, named prefix without its dot + "_absmax".
std::string absmax_name(const std::string& prefix) { return prefix.substr(0, prefix.size() - 1) + "_absmax"; }

std::vector<StTensorToWrite> moment_tensors(const ParameterLayout& layout, const ops::HostMoment& moment,
                                            const std::string& prefix,
                                            std::vector<std::vector<float>>& scratch) {
  if (moment.format != ops::MomentFormat::q8) {
    auto out = named_tensors(layout, moment.values, prefix, /*hf_layout=*/false, scratch);
    if (moment.format == ops::MomentFormat::bf16)
      for (auto& t : out) t.dtype = StDtype::kBF16;
    return out;
  }
  std::vector<StTensorToWrite> out;
  for (const auto& p : layout.params())
    out.push_back({prefix + p.name, StDtype::kU8, p.flat_shape(), moment.codes.data() + p.offset});
  out.push_back({absmax_name(prefix), StDtype::kF32, {std::ssize(moment.absmax)}, moment.absmax.data()});
  return out;
}

ops::HostMoment read_moment(const SafetensorsReader& r, const ParameterLayout& layout,
                            const std::string& prefix) {
  ops::HostMoment m;
  const std::string first = prefix + layout.params().front().name;
  const StDtype dtype =
      r.contains(first) ? r.info(first).dtype : StDtype::kF32;  // missing: read_f32 names it
  if (dtype != StDtype::kU8) {
    m.format = dtype == StDtype::kBF16 ? ops::MomentFormat::bf16 : ops::MomentFormat::f32;
    m.values.assign(static_cast<size_t>(layout.total()), 0.0f);
    read_named(r, layout, m.values, prefix);
    return m;
  }
  m.format = ops::MomentFormat::q8;
  m.codes.resize(static_cast<size_t>(layout.total()));
  std::vector<uint8_t> codes;
  for (const auto& p : layout.params()) {
    r.read_u8(prefix + p.name, p.flat_shape(), codes);
    std::copy(codes.begin(), codes.end(), m.codes.begin() + p.offset);
  }
  const std::string absmax = absmax_name(prefix);
  const std::vector<int64_t> shape = r.info(absmax).shape;
  if (shape.size() != 1) fail("{}: {} must be one-dimensional", r.info(absmax).file, absmax);
  m.absmax.resize(static_cast<size_t>(shape[0]));
  r.read_f32(absmax, shape, m.absmax);
  return m;
}

// The name a model file gives a parameter: its HF name, or that name without the family's base-model
// prefix ("transformer.", "model.", "bert."), as checkpoints saved from the base model class (GPT-2's
// original release among them) spell it; and a LayerNorm's weight and bias as gamma and beta, as BERT
// checkpoints converted from TensorFlow (bert-base-uncased among them) spell them, which transformers
// renames on load.
std::string stored_name(const SafetensorsReader& r, const std::string& name) {
  std::vector<std::string> spellings = {name};
  for (auto [hf, tf] :
       {std::pair{"LayerNorm.weight", "LayerNorm.gamma"}, {"LayerNorm.bias", "LayerNorm.beta"}})
    if (name.ends_with(hf)) spellings.push_back(name.substr(0, name.size() - std::strlen(hf)) + tf);
  for (size_t i = 0, n = spellings.size(); i < n; ++i)
    if (const auto dot = spellings[i].find('.'); dot != std::string::npos)
      spellings.push_back(spellings[i].substr(dot + 1));
  for (const std::string& s : spellings)
    if (r.contains(s)) return s;
  return name;  // missing: read_f32 names it
}

// A model file's parameters into the flat buffer, transposing Conv1D weights to [out, in].
void read_model_tensors(const SafetensorsReader& r, const ParameterLayout& layout, std::span<float> flat) {
  std::vector<float> t;
  for (const auto& p : layout.params()) {
    auto dst = flat.subspan(static_cast<size_t>(p.offset), static_cast<size_t>(p.numel));
    if (!p.transposed) {
      r.read_f32(stored_name(r, p.name), p.shape, dst);
      continue;
    }
    t.resize(dst.size());
    r.read_f32(stored_name(r, p.name), p.shape, t);
    const int64_t rows = p.shape[0], cols = p.shape[1];  // as the file holds it
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        dst[static_cast<size_t>(j * rows + i)] = t[static_cast<size_t>(i * cols + j)];
  }
}

// Tensors the model does not read (heads of other architectures, parts of features packtrain lacks) are
// an error naming them, so a checkpoint that only looks compatible does not load silently, unless the
// user accepts them. Not counted: rotary inv_freq buffers, GPT-2's causal-mask buffers (attn.bias,
// attn.masked_bias) and BERT's position_ids, which are constants rather than weights; a tied model's
// lm_head.weight when it equals the embedding (a copy some exporters write), and BERT's decoder bias when
// it equals the logits' bias (HF ties cls.predictions.decoder.bias to cls.predictions.bias). A copy that
// differs is an error, as the model would not be the one saved.
void check_unused(const SafetensorsReader& r, const ParameterLayout& layout, const ModelConfig& config,
                  std::span<const float> flat, const std::string& dir, bool allow_unused) {
  std::set<std::string> used;
  for (const auto& p : layout.params()) used.insert(stored_name(r, p.name));
  auto constant_buffer = [&](const std::string& name) {
    auto ends_with = [&](const char* suffix) {
      const std::string s(suffix);
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    return ends_with("rotary_emb.inv_freq") ||
           (config.family == "gpt2" && (ends_with(".attn.bias") || ends_with(".attn.masked_bias"))) ||
           (config.family == "bert" && ends_with("embeddings.position_ids"));
  };
  // A stored copy of the parameter `p`: used when equal to it, else an error saying why.
  auto accept_copy = [&](const std::string& name, const ParamInfo& p, const char* why) {
    std::vector<float> copy(static_cast<size_t>(p.numel));
    r.read_f32(name, p.shape, copy);
    if (!std::equal(copy.begin(), copy.end(), flat.begin() + p.offset))
      fail("{}: \"{}\" differs from \"{}\", {}", dir, name, p.name, why);
    used.insert(name);
  };
  const std::string head = tensor_names(config.family).lm_head;
  if (config.tie_word_embeddings && r.contains(head))
    accept_copy(
        head, layout.params().front(),
        "but config.json ties them (tie_word_embeddings); set tie_word_embeddings to false to train the "
        "untied head");
  // BERT's decoder bias: the LM head's name with .bias for .weight.
  if (layout.lm_head_bias() >= 0 && head.ends_with(".weight")) {
    const std::string copy = head.substr(0, head.size() - 7) + ".bias";
    const auto bias = std::find_if(layout.params().begin(), layout.params().end(),
                                   [&](const ParamInfo& p) { return p.offset == layout.lm_head_bias(); });
    if (r.contains(copy)) accept_copy(copy, *bias, "which Hugging Face ties it to");
  }
  std::string unused;
  for (const auto& name : r.names())
    if (!used.count(name) && !constant_buffer(name)) unused += (unused.empty() ? "" : ", ") + name;
  if (unused.empty()) return;
  if (!allow_unused)
    fail(
        "{}: the checkpoint holds tensors a {} model with this config.json does not use: {}. It is not the "
        "model packtrain would train; pass --allow-unused-tensors to load it without them",
        dir, config.family, unused);
  log_warn("{}: ignoring tensors the model does not use (--allow-unused-tensors): {}", dir, unused);
}

// Shard i (from 1) of n, named as save_pretrained names it.
std::string shard_name(size_t i, size_t n) { return fmt::format("model-{:05}-of-{:05}.safetensors", i, n); }

bool is_shard_name(const std::string& file) {
  int i = 0, n = 0;
  return std::sscanf(file.c_str(), "model-%5d-of-%5d", &i, &n) == 2 && i >= 0 && n >= 0 &&
         file == shard_name(static_cast<size_t>(i), static_cast<size_t>(n));
}

// The tensors grouped as huggingface_hub's split_state_dict_into_shards groups them, so packtrain shards
// a model as save_pretrained does: in order, a shard is closed when the next tensor would take it past the
// limit, and a tensor over the limit gets a shard of its own, placed before the one being filled.
std::vector<std::vector<StTensorToWrite>> split_into_shards(const std::vector<StTensorToWrite>& tensors,
                                                            uint64_t max_bytes) {
  std::vector<std::vector<StTensorToWrite>> shards;
  std::vector<StTensorToWrite> current;
  uint64_t current_bytes = 0;
  for (const auto& t : tensors) {
    const uint64_t bytes = data_bytes(t);
    if (bytes > max_bytes) {
      shards.push_back({t});
      continue;
    }
    if (current_bytes + bytes > max_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(t);
    current_bytes += bytes;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  return shards;
}

// Removes the weight files of an earlier save that this one did not overwrite, so that dir holds one model.
// The index goes first: while it is there, readers use it and the shards it names.
void remove_stale_weights(const fs::path& dir, const std::set<std::string>& written) {
  if (!written.count(kIndexFile) && fs::remove(dir / kIndexFile)) fsync_dir(dir);
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (entry.is_regular_file() && (name == kWeightsFile || is_shard_name(name)) && !written.count(name))
      stale.push_back(entry.path());
  }
  for (const auto& path : stale) fs::remove(path);
  if (!stale.empty()) fsync_dir(dir);
}

// Removes NAME.tmp directories that interrupted saves left behind.
void remove_partial_saves(const fs::path& root) {
  for (const auto& entry : fs::directory_iterator(root))
    if (entry.is_directory() && entry.path().extension() == ".tmp") fs::remove_all(entry.path());
}

// What a training checkpoint takes on disk, but for its JSON files and headers.
uint64_t checkpoint_bytes(size_t params, std::span<const MaskTensor> masks,
                          const std::string& tokenizer_json) {
  uint64_t bytes = 3 * params * sizeof(float) + tokenizer_json.size();
  for (const auto& m : masks) bytes += m.values.size();
  return bytes;
}

// A save that could not be written (a full disk, a quota, a file size limit): its partial directory goes,
// freeing what it took, and the error says what the checkpoint needs and that the previous one stands.
[[noreturn]] void save_failed(const fs::path& root, const fs::path& tmp_dir, int64_t step, uint64_t needed,
                              const std::string& cause) {
  std::error_code ignored;
  fs::remove_all(tmp_dir, ignored);
  const fs::path latest = root / "latest";
  const std::string previous =
      fs::exists(latest)
          ? fmt::format("{} still points to the previous checkpoint, which is unchanged", latest.string())
          : std::string("there is no earlier checkpoint");
  fail(
      "cannot save the checkpoint of step {} in {}: {}. The checkpoint needs about {}; {}. Free space there "
      "(or raise the file size limit) and run the same command to resume",
      step, root.string(), cause, format_bytes(needed), previous);
}

// The save itself: NAME.tmp/ written and synced, renamed to NAME, then `latest` moved to it.
void write_training_checkpoint(const fs::path& root, const std::string& name, const ModelConfig& config,
                               std::span<const float> params, const ops::HostMoment& adam_m,
                               const ops::HostMoment& adam_v, const TrainerState& state,
                               const std::string& tokenizer_json, std::span<const MaskTensor> masks) {
  const fs::path final_dir = root / name, tmp_dir = root / (name + ".tmp");
  fs::create_directories(root);
  remove_partial_saves(root);
  save_model_dir(tmp_dir.string(), config, params, tokenizer_json, kDefaultShardBytes, state.masters);
  ParameterLayout layout(config);
  std::vector<std::vector<float>> scratch;
  auto moments = moment_tensors(layout, adam_m, "exp_avg.", scratch);
  auto second = moment_tensors(layout, adam_v, "exp_avg_sq.", scratch);
  moments.insert(moments.end(), second.begin(), second.end());
  write_safetensors((tmp_dir / "optimizer.safetensors").string(), moments,
                    {{"optimizer_state", std::string(ops::moment_format_name(adam_m.format))}});
  if (!masks.empty()) {
    std::vector<StTensorToWrite> m;
    for (const auto& mask : masks) m.push_back({mask.name, StDtype::kU8, mask.shape, mask.values.data()});
    write_safetensors((tmp_dir / kMasksFile).string(), m, {});
  }
  json st = {{"step", state.step},
             {"epoch", state.epoch},
             {"batches_in_epoch", state.batches_in_epoch},
             {"seed", state.seed},
             {"tokens_seen", state.tokens_seen},
             {"master_weights", dtype_name(state.masters)}};
  if (state.position) st["position"] = *state.position;
  write_file_atomic((tmp_dir / "trainer_state.json").string(), st.dump(2) + "\n");
  fsync_dir(tmp_dir);
  fs::remove_all(final_dir);  // a checkpoint of this step from an earlier, abandoned run
  fs::rename(tmp_dir, final_dir);
  fsync_dir(root);
  write_file_atomic((fs::path(root) / "latest").string(), name + "\n");
}

}  // namespace

void save_model_dir(const std::string& dir, const ModelConfig& config, std::span<const float> params,
                    const std::string& tokenizer_json, int64_t max_shard_bytes, DType dtype) {
  ParameterLayout layout(config);
  PT_ASSERT(static_cast<int64_t>(params.size()) == layout.total());
  PT_ASSERT(max_shard_bytes > 0);
  if (dtype != DType::f32 && dtype != DType::bf16)
    fail("save_model_dir: weights are saved in f32 or bf16, not {}", dtype_name(dtype));
  const fs::path d(dir);
  fs::create_directories(d);
  write_file_atomic((d / "config.json").string(), config_to_json(config, dtype));
  std::vector<std::vector<float>> scratch;
  auto tensors = named_tensors(layout, params, "", /*hf_layout=*/true, scratch);
  if (dtype == DType::bf16)
    for (auto& t : tensors) t.dtype = StDtype::kBF16;
  const auto shards = split_into_shards(tensors, static_cast<uint64_t>(max_shard_bytes));
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (shards.size() == 1) {
    write_safetensors((d / kWeightsFile).string(), shards[0], metadata);
    remove_stale_weights(d, {kWeightsFile});
  } else {
    // The index goes last: until it is written, an earlier save's model.safetensors or index stays in use.
    std::set<std::string> written;
    json weight_map = json::object();
    uint64_t total_size = 0;
    for (size_t i = 0; i < shards.size(); ++i) {
      const auto name = shard_name(i + 1, shards.size());
      write_safetensors((d / name).string(), shards[i], metadata);
      written.insert(name);
      for (const auto& t : shards[i]) {
        weight_map[t.name] = name;
        total_size += data_bytes(t);
      }
    }
    // As save_pretrained writes it: json.dumps(index, indent=2, sort_keys=True) + "\n".
    const json index = {{"metadata", {{"total_parameters", layout.total()}, {"total_size", total_size}}},
                        {"weight_map", weight_map}};
    write_file_atomic((d / kIndexFile).string(), index.dump(2) + "\n");
    written.insert(kIndexFile);
    remove_stale_weights(d, written);
  }
  if (!tokenizer_json.empty()) write_file_atomic((d / "tokenizer.json").string(), tokenizer_json);
}

ModelWeights load_model_dir(const std::string& dir, bool allow_unused_tensors) {
  auto config_path = fs::path(dir) / "config.json";
  if (!fs::exists(config_path))
    fail("{}: no config.json; a model directory needs config.json and safetensors weights", dir);
  ModelWeights w{load_config(config_path.string()), {}};
  ParameterLayout layout(w.config);
  auto reader = SafetensorsReader::open(dir);
  w.params.assign(static_cast<size_t>(layout.total()), 0.0f);
  read_model_tensors(reader, layout, w.params);
  check_unused(reader, layout, w.config, w.params, dir, allow_unused_tensors);
  return w;
}

std::string save_training_checkpoint(const std::string& root, const ModelConfig& config,
                                     std::span<const float> params, const ops::HostMoment& adam_m,
                                     const ops::HostMoment& adam_v, const TrainerState& state,
                                     const std::string& tokenizer_json, std::span<const MaskTensor> masks) {
  const auto name = fmt::format("step-{:08}", state.step);
  const fs::path final_dir = fs::path(root) / name, tmp_dir = fs::path(root) / (name + ".tmp");
  try {
    write_training_checkpoint(root, name, config, params, adam_m, adam_v, state, tokenizer_json, masks);
  } catch (const WriteError& e) {
    save_failed(root, tmp_dir, state.step, checkpoint_bytes(params.size(), masks, tokenizer_json), e.what());
  } catch (const fs::filesystem_error& e) {
    save_failed(root, tmp_dir, state.step, checkpoint_bytes(params.size(), masks, tokenizer_json), e.what());
  }
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
  auto opt = SafetensorsReader::open((fs::path(dir) / "optimizer.safetensors").string());
  ck.adam_m = read_moment(opt, layout, "exp_avg.");
  ck.adam_v = read_moment(opt, layout, "exp_avg_sq.");
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
    if (st.contains("master_weights")) {
      const auto masters = st.at("master_weights").get<std::string>();
      const std::optional<DType> dtype = parse_dtype(masters);
      if (dtype != DType::f32 && dtype != DType::bf16)
        fail(
            "{}: master_weights is \"{}\", expected f32 or bf16; the checkpoint is damaged or from a newer "
            "packtrain",
            state_path, masters);
      ck.state.masters = *dtype;
    }
  } catch (const json::exception& e) {
    fail("{}: malformed trainer state ({}); the checkpoint is damaged, resume from an earlier one",
         state_path, e.what());
  }
  return ck;
}

}  // namespace pt
