// model.safetensors.index.json (checkpoint/safetensors.cpp): the input is the index of a directory that
// also holds two valid shards, written once by packtrain's own writer, so the fuzzer works on the
// weight_map (tensors named in the wrong shard, missing shards, names in two shards, odd file names).
#include "safetensors_check.h"

#include <optional>

namespace {

const std::filesystem::path& model_dir() {
  static const std::filesystem::path dir = [] {
    auto d = pt::fuzz::scratch_dir() / "model";
    std::filesystem::create_directories(d);
    const float a[6] = {1, 2, 3, 4, 5, 6}, c[3] = {0.5f, -1, 3};
    const uint8_t b[4] = {1, 0, 1, 1};
    pt::write_safetensors((d / "model-00001-of-00002.safetensors").string(),
                          {{"a", pt::StDtype::kF32, {2, 3}, a}, {"b", pt::StDtype::kU8, {4}, b}},
                          {{"format", "pt"}});
    pt::write_safetensors((d / "model-00002-of-00002.safetensors").string(),
                          {{"c", pt::StDtype::kBF16, {3}, c}}, {{"format", "pt"}});
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pt::fuzz::write_bytes(model_dir() / "model.safetensors.index.json", data, size);
  std::optional<pt::SafetensorsReader> reader;
  if (pt::fuzz::parses([&] { reader.emplace(pt::SafetensorsReader::open(model_dir().string())); }))
    pt::fuzz::check_tensors(*reader);
  return 0;
}
