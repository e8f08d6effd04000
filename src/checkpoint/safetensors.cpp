#include "checkpoint/safetensors.h"

#include "core/error.h"
#include "core/float16.h"

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace pt {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct DtypeName {
  StDtype dtype;
  const char* name;
  size_t size;
};
constexpr DtypeName kDtypes[] = {{StDtype::kF32, "F32", 4},   {StDtype::kF64, "F64", 8},
                                 {StDtype::kBF16, "BF16", 2}, {StDtype::kF16, "F16", 2},
                                 {StDtype::kI32, "I32", 4},   {StDtype::kI64, "I64", 8},
                                 {StDtype::kU8, "U8", 1}};

const DtypeName& dtype_entry(StDtype d) {
  for (const auto& e : kDtypes)
    if (e.dtype == d) return e;
  PT_ASSERT(false);
}

std::string checksum_key(const std::string& tensor) { return "packtrain.xxh64." + tensor; }

std::string shape_str(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// entry[key], an array of integers: nlohmann converts a float to an integer type unchecked (undefined past
// the type's range).
const json& integers(const json& entry, const char* key, const std::string& file, const std::string& tensor) {
  const json& a = entry.at(key);
  if (!a.is_array() || !std::all_of(a.begin(), a.end(), [](const json& x) { return x.is_number_integer(); }))
    fail("{}: tensor \"{}\" has {} {}; expected an array of integers", file, tensor, key, a.dump());
  return a;
}

}  // namespace

SafetensorsReader SafetensorsReader::open(const std::string& path) {
  SafetensorsReader r;
  std::string p = path;
  if (fs::is_directory(p)) {
    if (fs::exists(fs::path(p) / "model.safetensors.index.json"))
      p = (fs::path(p) / "model.safetensors.index.json").string();
    else if (fs::exists(fs::path(p) / "model.safetensors"))
      p = (fs::path(p) / "model.safetensors").string();
    else
      fail("{}: no model.safetensors or model.safetensors.index.json in this directory", path);
  }
  if (p.ends_with(".json")) {
    json index;
    try {
      index = json::parse(read_file(p));
    } catch (const json::exception& e) {
      fail("{}: not a valid safetensors index ({})", p, e.what());
    }
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      fail("{}: expected an object \"weight_map\" mapping tensor names to shard files", p);
    std::vector<std::string> shards;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string()) fail("{}: weight_map[\"{}\"] must be a file name", p, name);
      auto shard = (fs::path(p).parent_path() / file.get<std::string>()).string();
      if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
    }
    for (const auto& shard : shards) r.add_file(shard);
    for (const auto& [name, file] : index["weight_map"].items())
      if (!r.contains(name))
        fail("{}: index names tensor \"{}\" in {}, which does not hold it", p, name, file.get<std::string>());
  } else {
    r.add_file(p);
  }
  return r;
}

void SafetensorsReader::add_file(const std::string& file) {
  auto mapped = std::make_shared<MappedFile>(file);
  auto bytes = mapped->bytes();
  if (bytes.size() < 8)
    fail("{}: {} bytes, too short for a safetensors file (truncated?)", file, bytes.size());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > bytes.size() - 8)
    fail("{}: header length {} exceeds the file size {} (truncated or not safetensors)", file, header_len,
         bytes.size());
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(bytes.data()) + 8,
                         reinterpret_cast<const char*>(bytes.data()) + 8 + header_len);
  } catch (const json::exception& e) {
    fail("{}: the safetensors header is not valid JSON ({})", file, e.what());
  }
  if (!header.is_object()) fail("{}: the safetensors header must be a JSON object", file);
  const size_t data_start = 8 + header_len, data_size = bytes.size() - data_start;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : entry.items())
        if (v.is_string()) metadata_[k] = v.get<std::string>();
      continue;
    }
    try {
      StTensorInfo info;
      auto dt = entry.at("dtype").get<std::string>();
      const DtypeName* d = nullptr;
      for (const auto& e : kDtypes)
        if (dt == e.name) d = &e;
      if (!d)
        fail("{}: tensor \"{}\" has dtype {}; supported: F32, F64, BF16, F16, I32, I64, U8", file, name, dt);
      info.dtype = d->dtype;
      info.shape = integers(entry, "shape", file, name).get<std::vector<int64_t>>();
      auto offsets = integers(entry, "data_offsets", file, name).get<std::vector<uint64_t>>();
      // A negative size or a product past 64 bits would wrap to a byte count that matches.
      size_t tensor_bytes = d->size;
      for (auto s : info.shape)
        if (s < 0 || __builtin_mul_overflow(tensor_bytes, static_cast<size_t>(s), &tensor_bytes))
          fail("{}: tensor \"{}\" has shape {}; sizes must be non-negative and the tensor under 2^64 bytes",
               file, name, shape_str(info.shape));
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size ||
          offsets[1] - offsets[0] != tensor_bytes)
        fail(
            "{}: tensor \"{}\" ({} {}) has data_offsets outside the file or of the wrong size (file "
            "truncated "
            "or corrupt)",
            file, name, dt, shape_str(info.shape));
      info.data = bytes.data() + data_start + offsets[0];
      info.bytes = offsets[1] - offsets[0];
      info.file = file;
      if (tensors_.count(name)) fail("{}: tensor \"{}\" appears in two shards", file, name);
      tensors_[name] = std::move(info);
    } catch (const json::exception& e) {
      fail("{}: tensor \"{}\" has a malformed header entry ({})", file, name, e.what());
    }
  }
  files_.push_back(std::move(mapped));
}

const StTensorInfo& SafetensorsReader::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string files;
    for (const auto& f : files_) files += (files.empty() ? "" : ", ") + f->path();
    fail("tensor \"{}\" is missing from {}", name, files);
  }
  return it->second;
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, info] : tensors_) out.push_back(name);
  return out;
}

const StTensorInfo& SafetensorsReader::checked(const std::string& name,
                                               std::span<const int64_t> expected_shape) const {
  const auto& t = info(name);
  if (!std::equal(t.shape.begin(), t.shape.end(), expected_shape.begin(), expected_shape.end()))
    fail("{}: tensor \"{}\" has shape {}, expected {} (checkpoint and model config disagree)", t.file, name,
         shape_str(t.shape), shape_str(expected_shape));
  if (auto it = metadata_.find(checksum_key(name));
      it != metadata_.end() && it->second != fmt::format("{:016x}", XXH64(t.data, t.bytes, 0)))
    fail("{}: tensor \"{}\" does not match its checksum: the file is corrupt; use another checkpoint", t.file,
         name);
  return t;
}

void SafetensorsReader::read_u8(const std::string& name, std::span<const int64_t> expected_shape,
                                std::vector<uint8_t>& out) const {
  const auto& t = checked(name, expected_shape);
  if (t.dtype != StDtype::kU8)
    fail("{}: tensor \"{}\" is {}, expected U8", t.file, name, dtype_entry(t.dtype).name);
  out.assign(reinterpret_cast<const uint8_t*>(t.data), reinterpret_cast<const uint8_t*>(t.data) + t.bytes);
}

void SafetensorsReader::read_f32(const std::string& name, std::span<const int64_t> expected_shape,
                                 std::span<float> out) const {
  const auto& t = checked(name, expected_shape);
  size_t n = t.bytes / dtype_entry(t.dtype).size;
  PT_ASSERT(n == out.size());
  auto load = [&](auto convert, size_t elem) {
    for (size_t i = 0; i < n; ++i) out[i] = convert(t.data + i * elem);
  };
  switch (t.dtype) {
    case StDtype::kF32:
      if (t.bytes) std::memcpy(out.data(), t.data, t.bytes);  // an empty tensor's out.data() may be null
      break;
    case StDtype::kF64:
      load(
          [](const std::byte* p) {
            double d;
            std::memcpy(&d, p, 8);
            return static_cast<float>(d);
          },
          8);
      break;
    case StDtype::kBF16:
      load(
          [](const std::byte* p) {
            uint16_t h;
            std::memcpy(&h, p, 2);
            return bf16_to_float(h);
          },
          2);
      break;
    case StDtype::kF16:
      load(
          [](const std::byte* p) {
            uint16_t h;
            std::memcpy(&h, p, 2);
            return fp16_to_float(h);
          },
          2);
      break;
    default:
      fail("{}: tensor \"{}\" is not a floating-point tensor", t.file, name);
  }
}

uint64_t data_bytes(const StTensorToWrite& t) {
  uint64_t numel = 1;
  for (auto s : t.shape) numel *= static_cast<uint64_t>(s);
  return numel * dtype_entry(t.dtype).size;
}

namespace {

// The bytes a tensor takes in the file: float data converted to bf16 where asked, else as given.
std::span<const std::byte> file_bytes(const StTensorToWrite& t, std::vector<uint16_t>& scratch) {
  const uint64_t bytes = data_bytes(t);
  if (t.dtype != StDtype::kBF16) return {static_cast<const std::byte*>(t.data), bytes};
  const float* f = static_cast<const float*>(t.data);
  scratch.resize(bytes / 2);
  for (size_t i = 0; i < scratch.size(); ++i) scratch[i] = float_to_bf16(f[i]);
  return {reinterpret_cast<const std::byte*>(scratch.data()), bytes};
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<StTensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Per-tensor checksums in the metadata let a reader name the tensor a corruption hit.
  json meta = metadata;
  json header = json::object();
  std::vector<uint16_t> scratch;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    auto bytes = file_bytes(t, scratch);
    meta[checksum_key(t.name)] = fmt::format("{:016x}", XXH64(bytes.data(), bytes.size(), 0));
    header[t.name] = {{"dtype", dtype_entry(t.dtype).name},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes.size()}}};
    offset += bytes.size();
  }
  header["__metadata__"] = meta;
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // align the data section to 8 bytes, as the reference writer does
  uint64_t len = h.size();
  AtomicWriter w(path);
  w.write(&len, 8);
  w.write(h);
  for (const auto& t : tensors) {
    auto bytes = file_bytes(t, scratch);
    w.write(bytes.data(), bytes.size());
  }
  w.commit();
}

}  // namespace pt
