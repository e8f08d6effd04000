// RoPE vector and scalar kernel paths, the fused q/k rotation and the packed q | k | v forms: CUDA against
// the cpu backend in f64, with plain frequencies and with a scaled table (as HF's scaled rope types give);
// and the cpu's rope_*_qk against its per-tensor calls.
#include "ops/rope.h"

#include "cuda_test_util.h"
#include "shifted.h"

namespace pt::ops {
namespace {

using namespace pt::testing;

const DType kTypes[] = {DType::f32, DType::bf16};

// plain: theta 1e4. Otherwise frequencies no theta gives and a YaRN-like attention scale.
RopeFrequencies frequencies(int64_t D, bool plain) {
  if (plain) return RopeFrequencies::plain(D, 1e4);
  RopeFrequencies f;
  f.inv_freq = random_values(D / 2, 11, 1e-5, 1.2);
  f.attention_scale = 1.17;
  return f;
}

std::vector<int32_t> positions(int64_t T) {
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t % 53);
  if (T > 2) pos[1] = 8191;  // a long-context angle
  return pos;
}

// f64 cpu reference of one rotation.
std::vector<double> reference(std::vector<double> x, int64_t T, int64_t N, int64_t D,
                              const RopeFrequencies& f, int sign) {
  std::vector<int32_t> pos = positions(T);
  std::vector<double> out(x.size());
  if (sign > 0)
    rope_forward(view(x, {T, N, D}), view(pos, {T}), f, view(out, {T, N, D}));
  else
    rope_backward(view(x, {T, N, D}), view(pos, {T}), f, view(out, {T, N, D}));
  return out;
}

// Half head dims that are and are not multiples of the 16-byte vector (8 bf16, 4 f32), one token, many
// heads, head dims up to the kernel's 512; each also one element off 16-byte alignment (the scalar path).
TEST(CudaRope, VectorAndScalarPathsMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kTypes)
    for (bool plain : {true, false})
      for (auto [T, N, D] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 2},
                                                                               {7, 3, 6},
                                                                               {9, 5, 8},
                                                                               {33, 2, 16},
                                                                               {4, 3, 200},
                                                                               {300, 12, 64},
                                                                               {2, 1, 512},
                                                                               {1, 40, 128}})
        for (int64_t offset : {0, 1}) {
          SCOPED_TRACE(fmt::format("{} {} T={} N={} D={} offset {}", dtype_name(dtype),
                                   plain ? "plain" : "scaled", T, N, D, offset));
          const RopeFrequencies f = frequencies(D, plain);
          const std::vector<double> x = rounded(random_values(T * N * D, 7), dtype);
          DeviceTensor d_pos = upload_ints(positions(T), {T}),
                       d_x = upload_shifted(x, dtype, {T, N, D}, offset);
          DeviceTensor d_out = poisoned_shifted(dtype, {T, N, D}, offset);
          rope_forward(d_x.t, d_pos.t, f, d_out.t);
          EXPECT_CLOSE(d_out.t, reference(x, T, N, D, f, +1), tolerance(dtype));
          rope_backward(d_x.t, d_pos.t, f, d_x.t);
          EXPECT_CLOSE(d_x.t, reference(x, T, N, D, f, -1), tolerance(dtype));
        }
}

// The fused launch gives each tensor exactly what its own launch gives, and both match the cpu.
TEST(CudaRope, QkInOneLaunchMatchesSeparateCallsBitForBit) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kTypes)
    for (auto [T, H, Hkv, D] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
             {1, 1, 1, 2}, {5, 3, 1, 6}, {300, 12, 4, 64}, {257, 12, 12, 64}, {3, 2, 2, 128}}) {
      SCOPED_TRACE(fmt::format("{} T={} H={} Hkv={} D={}", dtype_name(dtype), T, H, Hkv, D));
      const RopeFrequencies f = frequencies(D, false);
      const std::vector<double> q = rounded(random_values(T * H * D, 8), dtype),
                                k = rounded(random_values(T * Hkv * D, 9), dtype);
      DeviceTensor d_pos = upload_ints(positions(T), {T});
      DeviceTensor d_q = upload(q, dtype, {T, H, D}), d_k = upload(k, dtype, {T, Hkv, D});
      DeviceTensor q_out = poisoned(dtype, {T, H, D}), k_out = poisoned(dtype, {T, Hkv, D});
      rope_forward_qk(d_q.t, d_k.t, d_pos.t, f, q_out.t, k_out.t);
      EXPECT_CLOSE(q_out.t, reference(q, T, H, D, f, +1), tolerance(dtype));
      EXPECT_CLOSE(k_out.t, reference(k, T, Hkv, D, f, +1), tolerance(dtype));
      DeviceTensor q_one = poisoned(dtype, {T, H, D}), k_one = poisoned(dtype, {T, Hkv, D});
      rope_forward(d_q.t, d_pos.t, f, q_one.t);
      rope_forward(d_k.t, d_pos.t, f, k_one.t);
      EXPECT_EQ(download_bytes(q_out.t), download_bytes(q_one.t));
      EXPECT_EQ(download_bytes(k_out.t), download_bytes(k_one.t));

      rope_backward_qk(d_q.t, d_k.t, d_pos.t, f, d_q.t, d_k.t);  // in place
      EXPECT_CLOSE(d_q.t, reference(q, T, H, D, f, -1), tolerance(dtype));
      EXPECT_CLOSE(d_k.t, reference(k, T, Hkv, D, f, -1), tolerance(dtype));
    }
}

// The packed forms against the cpu: q and k rotated out of (and back into) rows of q | k | v, v copied; head
// dims whose packed rows are and are not multiples of the 16-byte vector, one token and a long batch.
TEST(CudaRope, PackedQkvMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kTypes)
    for (auto [T, H, Hkv, D] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
             {1, 2, 1, 64}, {5, 3, 1, 6}, {300, 14, 2, 64}, {4097, 8, 2, 128}, {7, 4, 2, 10}}) {
      SCOPED_TRACE(fmt::format("{} T={} H={} Hkv={} D={}", dtype_name(dtype), T, H, Hkv, D));
      const int64_t P = (H + 2 * Hkv) * D;
      const RopeFrequencies f = frequencies(D, false);
      std::vector<double> qkv = rounded(random_values(T * P, 12), dtype);
      std::vector<double> dq = rounded(random_values(T * H * D, 13), dtype),
                          dk = rounded(random_values(T * Hkv * D, 14), dtype),
                          dv = rounded(random_values(T * Hkv * D, 15), dtype);
      std::vector<int32_t> pos = positions(T);
      std::vector<double> q(T * H * D), k(T * Hkv * D), v(T * Hkv * D), dqkv(T * P);
      rope_forward_qkv(view(qkv, {T, P}), view(pos, {T}), f, view(q, {T, H, D}), view(k, {T, Hkv, D}),
                       view(v, {T, Hkv, D}));
      rope_backward_qkv(view(dq, {T, H, D}), view(dk, {T, Hkv, D}), view(dv, {T, Hkv, D}), view(pos, {T}), f,
                        view(dqkv, {T, P}));

      DeviceTensor d_pos = upload_ints(pos, {T}), d_qkv = upload(qkv, dtype, {T, P});
      DeviceTensor d_q = poisoned(dtype, {T, H, D}), d_k = poisoned(dtype, {T, Hkv, D}),
                   d_v = poisoned(dtype, {T, Hkv, D});
      rope_forward_qkv(d_qkv.t, d_pos.t, f, d_q.t, d_k.t, d_v.t);
      EXPECT_CLOSE(d_q.t, q, tolerance(dtype));
      EXPECT_CLOSE(d_k.t, k, tolerance(dtype));
      EXPECT_CLOSE(d_v.t, v, tolerance(dtype));
      DeviceTensor d_dq = upload(dq, dtype, {T, H, D}), d_dk = upload(dk, dtype, {T, Hkv, D}),
                   d_dv = upload(dv, dtype, {T, Hkv, D}), d_dqkv = poisoned(dtype, {T, P});
      rope_backward_qkv(d_dq.t, d_dk.t, d_dv.t, d_pos.t, f, d_dqkv.t);
      EXPECT_CLOSE(d_dqkv.t, dqkv, tolerance(dtype));
    }
}

TEST(CudaRope, RefusesHeadDimsPastTheKernelsTable) {
  SKIP_WITHOUT_GPU();
  const int64_t T = 2, D = 514;
  const RopeFrequencies f = frequencies(D, true);
  DeviceTensor d_pos = upload_ints(positions(T), {T}),
               d_x = upload(random_values(T * D, 1), DType::f32, {T, 1, D});
  try {
    rope_forward(d_x.t, d_pos.t, f, d_x.t);
    ADD_FAILURE() << "no error for head dim 514";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head dims up to 512"), std::string::npos) << e.what();
  }
}

TEST(RopeQk, CpuEqualsPerTensorCalls) {
  const int64_t T = 6, H = 4, Hkv = 2, D = 8;
  const RopeFrequencies f = frequencies(D, false);
  std::vector<double> q = random_values(T * H * D, 1), k = random_values(T * Hkv * D, 2);
  std::vector<int32_t> pos = {0, 1, 2, 0, 1, 300};
  std::vector<double> q_want(q.size()), k_want(k.size()), q_got = q, k_got = k;
  rope_backward(view(q, {T, H, D}), view(pos, {T}), f, view(q_want, {T, H, D}));
  rope_backward(view(k, {T, Hkv, D}), view(pos, {T}), f, view(k_want, {T, Hkv, D}));
  rope_backward_qk(view(q_got, {T, H, D}), view(k_got, {T, Hkv, D}), view(pos, {T}), f,
                   view(q_got, {T, H, D}), view(k_got, {T, Hkv, D}));
  EXPECT_EQ(q_got, q_want);
  EXPECT_EQ(k_got, k_want);
  rope_forward(view(q, {T, H, D}), view(pos, {T}), f, view(q_want, {T, H, D}));
  rope_forward_qk(view(q, {T, H, D}), view(k, {T, Hkv, D}), view(pos, {T}), f, view(q_got, {T, H, D}),
                  view(k_got, {T, Hkv, D}));
  EXPECT_EQ(q_got, q_want);
}

TEST(RopeQk, RejectsOverlapAndMismatchedShapes) {
  std::vector<double> a(4 * 2 * 8), b(4 * 2 * 8), c(4 * 2 * 4);
  std::vector<int32_t> pos = {0, 1, 2, 3};
  const RopeFrequencies f = RopeFrequencies::plain(8, 1e4);
  auto expect_error = [](auto&& call, const std::string& part) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one containing: " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(
      [&] {
        rope_forward_qk(view(a, {4, 2, 8}), view(a, {4, 2, 8}), view(pos, {4}), f, view(a, {4, 2, 8}),
                        view(a, {4, 2, 8}));
      },
      "overlap");
  expect_error(
      [&] {
        rope_forward_qk(view(a, {4, 2, 8}), view(b, {4, 2, 8}), view(pos, {4}), f, view(b, {4, 2, 8}),
                        view(a, {4, 2, 8}));
      },
      "overlap");
  expect_error(
      [&] {
        rope_forward_qk(view(a, {4, 2, 8}), view(c, {4, 2, 4}), view(pos, {4}), f, view(a, {4, 2, 8}),
                        view(c, {4, 2, 4}));
      },
      "head dims differ");
  expect_error(
      [&] {
        rope_backward_qk(view(a, {4, 2, 8}), view(c, {2, 2, 8}), view(pos, {4}), f, view(a, {4, 2, 8}),
                         view(c, {2, 2, 8}));
      },
      "position_ids");
  expect_error(
      [&] {
        rope_forward_qk(view(a, {4, 2, 8}), view(b, {4, 2, 8}), view(pos, {4}),
                        RopeFrequencies::plain(16, 1e4), view(a, {4, 2, 8}), view(b, {4, 2, 8}));
      },
      "rope_forward_qk: 8 rope frequencies for head dim 8");
}

}  // namespace
}  // namespace pt::ops
