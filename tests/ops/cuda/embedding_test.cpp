// CUDA embedding against the cpu backend in f64: lookup in f32 and bf16, and the deterministic backward
// (tokens grouped by a stable sort, long buckets summed in chunks) with heavily repeated ids, f32 and bf16
// gradients into an f32 table.
#include "ops/embedding.h"

#include <array>
#include <random>

#include "cuda_test_util.h"

namespace pt::ops {
namespace {

using namespace pt::testing;

// Zipf-like ids: a few ids repeat hundreds of times (as "the" and EOS do), most appear once or never.
std::vector<int32_t> skewed_ids(int64_t T, int64_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(T));
  for (int32_t& id : ids) {
    const uint32_t r = rng() % 4;
    id = static_cast<int32_t>(r == 0 ? rng() % std::min<int64_t>(3, V) : r == 1 ? V - 1 : rng() % V);
  }
  return ids;
}

void check_embedding(DType dtype, DType dtable_type, const std::vector<int32_t>& ids, int64_t V, int64_t C,
                     Write mode) {
  const auto T = static_cast<int64_t>(ids.size());
  SCOPED_TRACE(
      fmt::format("{} (dtable {}) T={} V={} C={}", dtype_name(dtype), dtype_name(dtable_type), T, V, C));
  std::vector<int32_t> host_ids = ids;
  std::vector<double> table = rounded(random_values(V * C, 2), dtype), out(T * C);
  std::vector<double> dout = rounded(random_values(T * C, 3), dtype);
  const std::vector<double> dtable0 = rounded(random_values(V * C, 4), dtable_type);
  std::vector<double> dtable = dtable0;
  embedding_forward(view(host_ids, {T}), view(table, {V, C}), view(out, {T, C}));
  embedding_backward(view(host_ids, {T}), view(dout, {T, C}), view(dtable, {V, C}), mode);

  DeviceTensor d_ids = upload_ints(ids, {T}), d_table = upload(table, dtype, {V, C});
  DeviceTensor d_out = poisoned(dtype, {T, C}), d_dout = upload(dout, dtype, {T, C});
  DeviceTensor d_dtable =
      mode == Write::accumulate ? upload(dtable0, dtable_type, {V, C}) : poisoned(dtable_type, {V, C});
  embedding_forward(d_ids.t, d_table.t, d_out.t);
  EXPECT_CLOSE(d_out.t, out, 0.0);  // a lookup copies exactly
  embedding_backward(d_ids.t, d_dout.t, d_dtable.t, mode);
  EXPECT_CLOSE(d_dtable.t, dtable, tolerance(dtable_type == DType::bf16 ? DType::bf16 : dtype, true));
}

void check_embedding(DType dtype, DType dtable_type, int64_t T, int64_t V, int64_t C, Write mode) {
  check_embedding(dtype, dtable_type, skewed_ids(T, V, 1), V, C, mode);
}

TEST(CudaEmbedding, F32MatchesCpu) {
  SKIP_WITHOUT_GPU();
  check_embedding(DType::f32, DType::f32, 1, 1, 1, Write::overwrite);
  check_embedding(DType::f32, DType::f32, 1, 32000, 128, Write::overwrite);
  check_embedding(DType::f32, DType::f32, 1000, 500, 77, Write::overwrite);
  check_embedding(DType::f32, DType::f32, 2048, 32000, 64, Write::accumulate);
}

TEST(CudaEmbedding, Bf16IntoF32TableGradientMatchesCpu) {
  SKIP_WITHOUT_GPU();
  check_embedding(DType::bf16, DType::f32, 513, 1000, 768, Write::overwrite);
  check_embedding(DType::bf16, DType::f32, 4096, 4000, 2048, Write::accumulate);
  check_embedding(DType::bf16, DType::bf16, 100, 50, 64, Write::overwrite);
}

// Buckets of one id across many of the backward's 32-token chunks: the pad id of a padded batch fills
// most of it; buckets ending exactly at, just before and just after chunk boundaries.
TEST(CudaEmbedding, LongBucketsAcrossChunksMatchCpu) {
  SKIP_WITHOUT_GPU();
  check_embedding(DType::bf16, DType::f32, std::vector<int32_t>(4101, 7), 50, 768, Write::accumulate);
  for (int64_t first : {31, 32, 33, 64, 95}) {
    std::vector<int32_t> ids(200, 3);
    std::fill(ids.begin(), ids.begin() + first, 9);
    ids[150] = 1;
    check_embedding(DType::f32, DType::f32, ids, 10, 300, Write::overwrite);
  }
}

TEST(CudaEmbedding, BackwardIsBitwiseReproducible) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 8192, V = 32000, C = 768;
  DeviceTensor ids = upload_ints(skewed_ids(T, V, 5), {T});
  DeviceTensor dout = upload(random_values(T * C, 6), DType::bf16, {T, C});
  DeviceTensor dtable = poisoned(DType::f32, {V, C});
  embedding_backward(ids.t, dout.t, dtable.t, Write::overwrite);
  const auto first = download_bytes(dtable.t);
  embedding_backward(ids.t, dout.t, dtable.t, Write::overwrite);
  EXPECT_EQ(download_bytes(dtable.t), first);
}

// ids_checked: the lookup without reading the check back, the same rows as the cpu's.
TEST(CudaEmbedding, CheckedIdsLookupMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (auto [T, V, C] :
         std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {1000, 500, 77}, {4096, 32000, 768}}) {
      SCOPED_TRACE(fmt::format("{} T={} V={} C={}", dtype_name(dtype), T, V, C));
      std::vector<int32_t> ids = skewed_ids(T, V, 8);
      std::vector<double> table = rounded(random_values(V * C, 9), dtype), out(T * C);
      embedding_forward(view(ids, {T}), view(table, {V, C}), view(out, {T, C}), true);
      DeviceTensor d_ids = upload_ints(ids, {T}), d_table = upload(table, dtype, {V, C});
      DeviceTensor d_out = poisoned(dtype, {T, C});
      embedding_forward(d_ids.t, d_table.t, d_out.t, true);
      EXPECT_CLOSE(d_out.t, out, 0.0);
    }
  }
}

// With ids_checked a bad id is the caller's bug: nothing is reported, but its row is zeroed, not read
// from outside the table.
TEST(CudaEmbedding, CheckedIdsOutsideTheTableGiveZeroRows) {
  SKIP_WITHOUT_GPU();
  const std::vector<double> table = rounded(random_values(4 * 3, 10), DType::f32);
  DeviceTensor d_table = upload(table, DType::f32, {4, 3}), out = poisoned(DType::f32, {3, 3});
  DeviceTensor ids = upload_ints({2, 4, -1}, {3});
  embedding_forward(ids.t, d_table.t, out.t, true);
  std::vector<double> want(9, 0.0);
  for (int c = 0; c < 3; ++c) want[c] = table[2 * 3 + c];
  EXPECT_CLOSE(out.t, want, 0.0);
}

TEST(CudaEmbedding, IdOutsideTheTableIsAnError) {
  SKIP_WITHOUT_GPU();
  DeviceTensor table = upload(random_values(4 * 3, 7), DType::f32, {4, 3}),
               out = poisoned(DType::f32, {3, 3});
  DeviceTensor ids = upload_ints({0, 3, 4}, {3});
  for (bool backward : {false, true}) {
    try {
      if (backward)
        embedding_backward(ids.t, out.t, table.t, Write::overwrite);
      else
        embedding_forward(ids.t, table.t, out.t);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token 2 has an id outside the embedding table of 4 rows"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace pt::ops
