// A .safetensors file (checkpoint/safetensors.cpp): the 8-byte header length, the JSON header and the
// data it points into. The input is the whole file.
#include "safetensors_check.h"

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto path = pt::fuzz::scratch_dir() / "model.safetensors";
  pt::fuzz::write_bytes(path, data, size);
  std::optional<pt::SafetensorsReader> reader;
  if (pt::fuzz::parses([&] { reader.emplace(pt::SafetensorsReader::open(path.string())); }))
    pt::fuzz::check_tensors(*reader);
  return 0;
}
