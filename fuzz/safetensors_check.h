// What the two safetensors targets check of a reader that opened: every tensor's shape, dtype and byte
// count agree (no negative or overflowing dimension), and reading each one as its own shape either works
// or is refused with a pt::Error (a bad checksum, an integer tensor read as floats).
#pragma once

#include "checkpoint/safetensors.h"
#include "fuzz_util.h"

#include <vector>

namespace pt::fuzz {

inline size_t dtype_size(StDtype d) {
  switch (d) {
    case StDtype::kF64:
    case StDtype::kI64:
      return 8;
    case StDtype::kF32:
    case StDtype::kI32:
      return 4;
    case StDtype::kBF16:
    case StDtype::kF16:
      return 2;
    case StDtype::kU8:
      return 1;
  }
  std::abort();
}

inline void check_tensors(const SafetensorsReader& reader) {
  for (const auto& name : reader.names()) {
    const StTensorInfo& t = reader.info(name);
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      PT_FUZZ_CHECK(d >= 0);
      PT_FUZZ_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel));
    }
    uint64_t bytes = 0;
    PT_FUZZ_CHECK(!__builtin_mul_overflow(numel, dtype_size(t.dtype), &bytes) && bytes == t.bytes);
    PT_FUZZ_CHECK(t.bytes == 0 || t.data != nullptr);
    if (t.dtype == StDtype::kU8) {
      std::vector<uint8_t> out;
      parses([&] { reader.read_u8(name, t.shape, out); });
    } else {
      std::vector<float> out(numel);
      parses([&] { reader.read_f32(name, t.shape, out); });
    }
  }
}

}  // namespace pt::fuzz
