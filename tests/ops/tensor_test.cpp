#include "core/tensor.h"

#include <gtest/gtest.h>

#include <vector>

namespace pt {
namespace {

TEST(Tensor, ShapeNumelAndDescription) {
  std::vector<float> data(24);
  Tensor t = Tensor::of(data.data(), {2, 3, 4});
  EXPECT_EQ(t.dtype, DType::f32);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.bytes(), 96);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.str(), "f32[2,3,4]@cpu");
  EXPECT_EQ(t.ptr<float>(), data.data());
  EXPECT_THROW(t.size(3), Error);
}

TEST(Tensor, TypedAccessChecksTheElementType) {
  std::vector<int32_t> ids(3);
  Tensor t = Tensor::of(ids.data(), {3});
  EXPECT_EQ(t.dtype, DType::i32);
  try {
    (void)t.ptr<float>();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("i32[3]@cpu accessed as f32"), std::string::npos) << e.what();
  }
}

TEST(Tensor, ReshapeKeepsMemoryAndChecksTheCount) {
  std::vector<double> data(12);
  Tensor t = Tensor::of(data.data(), {2, 6}).reshape({2, 3, 2});
  EXPECT_EQ(t.str(), "f64[2,3,2]@cpu");
  EXPECT_EQ(t.ptr<double>(), data.data());
  EXPECT_THROW(t.reshape({5, 2}), Error);
}

TEST(Tensor, RowsViewARangeOfRowsAndCheckIt) {
  std::vector<float> data(12);
  const Tensor t = Tensor::of(data.data(), {4, 3});
  const Tensor r = t.rows(1, 3);
  EXPECT_EQ(r.str(), "f32[2,3]@cpu");
  EXPECT_EQ(r.ptr<float>(), data.data() + 3);
  EXPECT_EQ(t.rows(4, 4).numel(), 0);
  EXPECT_THROW(t.rows(2, 5), Error);
  EXPECT_THROW(t.rows(3, 2), Error);
  EXPECT_THROW(t.reshape({12}).rows(0, 1), Error);
}

TEST(Tensor, RejectsTooManyOrNegativeDims) {
  float x = 0;
  EXPECT_THROW(Tensor(&x, DType::f32, {1, 1, 1, 1, 1}), Error);
  EXPECT_THROW(Tensor(&x, DType::f32, {2, -1}), Error);
  EXPECT_TRUE(Tensor().empty());
}

}  // namespace
}  // namespace pt
