// safetensors (Hugging Face's weight format): an 8-byte little-endian header length, a JSON header
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the raw data.
// Reading maps the file and converts F32/F64/BF16/F16 tensors to float32 (U8 masks are read as they are); a
// sharded checkpoint is read through its model.safetensors.index.json. Writing is atomic (pt::AtomicWriter).
#pragma once

#include "core/file.h"

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace pt {

enum class StDtype { kF32, kF64, kBF16, kF16, kI32, kI64, kU8 };

struct StTensorInfo {
  StDtype dtype;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // into the mapped file
  size_t bytes = 0;
  std::string file;  // for error messages
};

// All tensors of one checkpoint (one file, or the shards of an index), mapped read-only.
class SafetensorsReader {
 public:
  // `path`: a .safetensors file, a model.safetensors.index.json, or a directory holding either.
  static SafetensorsReader open(const std::string& path);

  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const StTensorInfo& info(const std::string& name) const;  // throws, naming the tensor and the files
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Copies tensor `name` into `out` as float32 after checking its shape (throws naming tensor and shapes).
  void read_f32(const std::string& name, std::span<const int64_t> expected_shape, std::span<float> out) const;
  // Tensor `name`, which must be U8 of that shape, into `out` (resized).
  void read_u8(const std::string& name, std::span<const int64_t> expected_shape,
               std::vector<uint8_t>& out) const;

 private:
  void add_file(const std::string& file);
  // The tensor after checking its shape and checksum.
  const StTensorInfo& checked(const std::string& name, std::span<const int64_t> expected_shape) const;

  std::vector<std::shared_ptr<MappedFile>> files_;
  std::map<std::string, StTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct StTensorToWrite {
  std::string name;
  StDtype dtype;  // kF32 or kBF16 from float data, or kU8/kI32/kI64 raw
  std::vector<int64_t> shape;
  const void* data;  // float* for F32/BF16 (converted on write); raw bytes otherwise
};

// The bytes the tensor's data takes in a file (its dtype's size times its elements).
uint64_t data_bytes(const StTensorToWrite& t);

void write_safetensors(const std::string& path, const std::vector<StTensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace pt
