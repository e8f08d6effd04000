#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/file.h"
#include "core/float16.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace pt {
namespace {

TEST(Safetensors, RoundTripF32AndBf16) {
  auto dir = test::fresh_temp_dir();
  std::vector<float> a = {1.5f, -2.25f, 3.0f, 0.1f, 7.0f, -0.0f};
  std::vector<float> b = {0.5f, 1e-3f, -300.0f, 2.0f};
  auto path = (dir / "m.safetensors").string();
  write_safetensors(path, {{"a", StDtype::kF32, {2, 3}, a.data()}, {"b", StDtype::kBF16, {4}, b.data()}},
                    {{"format", "pt"}});
  auto r = SafetensorsReader::open(path);
  EXPECT_EQ(r.metadata().at("format"), "pt");
  std::vector<float> a2(6), b2(4);
  std::vector<int64_t> sa = {2, 3}, sb = {4};
  r.read_f32("a", sa, a2);
  r.read_f32("b", sb, b2);
  EXPECT_EQ(a, a2);
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b2[i], bf16_to_float(float_to_bf16(b[i])));
  EXPECT_NEAR(b2[1], 1e-3f, 1e-5f);
}

TEST(Safetensors, ShapeMismatchNamesTensorAndShapes) {
  auto dir = test::fresh_temp_dir();
  std::vector<float> a(6, 1.0f);
  auto path = (dir / "m.safetensors").string();
  write_safetensors(path, {{"layer.w", StDtype::kF32, {2, 3}, a.data()}}, {});
  auto r = SafetensorsReader::open(path);
  std::vector<float> out(6);
  std::vector<int64_t> wrong = {3, 2};
  try {
    r.read_f32("layer.w", wrong, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("layer.w"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3, 2]"), std::string::npos) << msg;
  }
  EXPECT_THROW(r.info("missing.tensor"), Error);
}

TEST(Safetensors, TruncatedFileIsAnErrorNotACrash) {
  auto dir = test::fresh_temp_dir();
  std::vector<float> a(1000, 1.0f);
  auto path = (dir / "m.safetensors").string();
  write_safetensors(path, {{"w", StDtype::kF32, {1000}, a.data()}}, {});
  auto full = read_file(path);
  for (size_t keep : {size_t{0}, size_t{5}, size_t{20}, full.size() - 1}) {
    write_file_atomic(path, full.substr(0, keep));
    EXPECT_THROW(SafetensorsReader::open(path), Error) << "kept " << keep << " bytes";
  }
}

TEST(Safetensors, CorruptTensorIsNamed) {
  auto dir = test::fresh_temp_dir();
  std::vector<float> a(64, 1.0f), b(64, 2.0f);
  auto path = (dir / "m.safetensors").string();
  write_safetensors(
      path, {{"first", StDtype::kF32, {64}, a.data()}, {"second", StDtype::kF32, {64}, b.data()}}, {});
  auto bytes = read_file(path);
  bytes[bytes.size() - 10] ^= 0x40;  // flip a bit in the last tensor's data
  write_file_atomic(path, bytes);
  auto r = SafetensorsReader::open(path);
  std::vector<float> out(64);
  std::vector<int64_t> shape = {64};
  r.read_f32("first", shape, out);
  try {
    r.read_f32("second", shape, out);
    FAIL() << "corruption not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"second\""), std::string::npos) << e.what();
  }
}

TEST(Safetensors, ShardedIndex) {
  auto dir = test::fresh_temp_dir();
  std::vector<float> a = {1, 2}, b = {3, 4, 5};
  write_safetensors((dir / "s1.safetensors").string(), {{"a", StDtype::kF32, {2}, a.data()}}, {});
  write_safetensors((dir / "s2.safetensors").string(), {{"b", StDtype::kBF16, {3}, b.data()}}, {});
  write_file_atomic((dir / "model.safetensors.index.json").string(),
                    R"({"metadata": {}, "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  auto r = SafetensorsReader::open(dir.string());
  std::vector<float> b2(3);
  std::vector<int64_t> sb = {3};
  r.read_f32("b", sb, b2);
  EXPECT_EQ(b2, b);
  EXPECT_EQ(r.names().size(), 2u);
  write_file_atomic((dir / "model.safetensors.index.json").string(),
                    R"({"weight_map": {"a": "s1.safetensors", "c": "s1.safetensors"}})");
  EXPECT_THROW(SafetensorsReader::open(dir.string()), Error);
}

TEST(Float16, Fp16RoundTripsRepresentableValues) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f})
    EXPECT_EQ(fp16_to_float(float_to_fp16(f)), f) << f;
  EXPECT_TRUE(std::isinf(fp16_to_float(float_to_fp16(1e6f))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);  // ties to even
}

}  // namespace
}  // namespace pt
