// safetensors headers that the fuzzer (fuzz/safetensors.cpp) found accepted with nonsense or read with
// undefined behaviour: each is now refused naming the file and the tensor. Their files are kept in
// fuzz/regressions/safetensors/.
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/file.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace pt {
namespace {

// An 8-byte little-endian header length, the header, then `data`.
std::string safetensors_bytes(const std::string& header, size_t data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data, '\0');
}

void expect_refused(const std::string& header, size_t data, const std::vector<std::string>& needles) {
  auto path = (test::fresh_temp_dir() / "m.safetensors").string();
  write_file_atomic(path, safetensors_bytes(header, data));
  try {
    SafetensorsReader::open(path);
    FAIL() << "accepted: " << header;
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

// The byte count was the product of the sizes in 64-bit unsigned arithmetic: [-1, -1] (product 1) passed
// as one U8, [2^62, 4] F32 (product 0 after wrapping) as an empty tensor.
TEST(SafetensorsFuzzFindings, NegativeOrOverflowingShapesAreRefused) {
  expect_refused(R"({"t": {"dtype": "U8", "shape": [-1, -1], "data_offsets": [0, 1]}})", 1,
                 {"m.safetensors", "\"t\"", "[-1, -1]", "non-negative"});
  expect_refused(R"({"t": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})", 0,
                 {"\"t\"", "2^64"});
}

// nlohmann converted floats to integers unchecked: 1e300 as a size or an offset was undefined behaviour.
TEST(SafetensorsFuzzFindings, NonIntegerShapesAndOffsetsAreRefused) {
  expect_refused(R"({"t": {"dtype": "F32", "shape": [1e300], "data_offsets": [0, 8]}})", 8,
                 {"\"t\"", "shape", "integers"});
  expect_refused(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 1e300]}})", 8,
                 {"\"t\"", "data_offsets", "integers"});
  expect_refused(R"({"t": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", 8, {"\"t\"", "shape"});
}

// Reading an empty F32 tensor passed its null destination to memcpy (undefined even for 0 bytes).
TEST(SafetensorsFuzzFindings, EmptyTensorsRead) {
  auto path = (test::fresh_temp_dir() / "m.safetensors").string();
  write_file_atomic(
      path, safetensors_bytes(R"({"e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [0, 0]}})", 0));
  const std::vector<int64_t> shape = {0, 3};
  SafetensorsReader::open(path).read_f32("e", shape, std::span<float>());
}

}  // namespace
}  // namespace pt
