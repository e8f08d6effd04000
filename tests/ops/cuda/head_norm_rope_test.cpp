// The fused per-head q/k norm and rotation: CUDA against the cpu backend in f64, on the fused kernels' head
// dims (a row is one 16-byte vector a lane of 8, 16 or 32 lanes) and on shapes they leave to the separate
// norm and rotation kernels (other head dims, rows off 16-byte alignment); plain and scaled frequencies,
// with and without rotation, in place and into separate buffers, tokens from 1 to many blocks.
#include "ops/head_norm_rope.h"

#include "cuda_test_util.h"
#include "shifted.h"

namespace pt::ops {
namespace {

using namespace pt::testing;

struct Case {
  DType x, weight;
  int64_t T, H, Hkv, D;
  bool rotating = true, in_place = false;
  int64_t offset = 0;  // > 0: every tensor that many elements into its buffer (off 16-byte alignment)
};

std::vector<int32_t> positions(int64_t T) {  // examples of 37 tokens packed together, one long angle
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t % 37);
  if (T > 2) pos[1] = 8191;
  return pos;
}

void check(const Case& c) {
  const auto [xt, wt, T, H, Hkv, D, rotating, in_place, offset] = c;
  SCOPED_TRACE(fmt::format("x {} weight {} T={} H={} Hkv={} D={} {} {} offset {}", dtype_name(xt),
                           dtype_name(wt), T, H, Hkv, D, rotating ? "rotating" : "norms only",
                           in_place ? "in place" : "separate", offset));
  RopeFrequencies freq;
  freq.inv_freq = random_values(D / 2, 11, 1e-5, 1.2);
  freq.attention_scale = 1.17;
  std::vector<double> q_pre = rounded(random_values(T * H * D, 1, -2, 2), xt),
                      k_pre = rounded(random_values(T * Hkv * D, 2, -2, 2), xt);
  std::vector<double> wq = rounded(random_values(D, 3, 0.5, 1.5), wt),
                      wk = rounded(random_values(D, 4, 0.5, 1.5), wt);
  std::vector<double> gq = rounded(random_values(T * H * D, 5), xt),
                      gk = rounded(random_values(T * Hkv * D, 6), xt);
  std::vector<double> dwq0 = rounded(random_values(D, 7), wt), dwk0 = rounded(random_values(D, 8), wt);
  std::vector<int32_t> pos = positions(T);

  // f64 reference.
  std::vector<double> rstd_q(T * H), rstd_k(T * Hkv), q(T * H * D), k(T * Hkv * D);
  std::vector<double> dq_pre(T * H * D), dk_pre(T * Hkv * D), dwq = dwq0, dwk = dwk0;
  HeadNormRope ref{view(q_pre, {T, H, D}), view(k_pre, {T, Hkv, D}), view(wq, {D}), view(wk, {D}),
                   view(rstd_q, {T * H}),  view(rstd_k, {T * Hkv}),  view(pos, {T})};
  ref.freq = rotating ? &freq : nullptr;
  ref.eps = 1e-5;
  head_norm_rope_forward(ref, view(q, {T, H, D}), view(k, {T, Hkv, D}));
  head_norm_rope_backward(ref, view(gq, {T, H, D}), view(gk, {T, Hkv, D}), view(dq_pre, {T, H, D}),
                          view(dk_pre, {T, Hkv, D}), view(dwq, {D}), view(dwk, {D}));

  DeviceTensor d_q_pre = upload_shifted(q_pre, xt, {T, H, D}, offset),
               d_k_pre = upload_shifted(k_pre, xt, {T, Hkv, D}, offset);
  DeviceTensor d_wq = upload_shifted(wq, wt, {D}, offset), d_wk = upload_shifted(wk, wt, {D}, offset);
  DeviceTensor d_rstd_q = poisoned(DType::f32, {T * H}), d_rstd_k = poisoned(DType::f32, {T * Hkv});
  DeviceTensor d_pos = upload_ints(pos, {T});
  DeviceTensor d_q = poisoned_shifted(xt, {T, H, D}, offset), d_k = poisoned_shifted(xt, {T, Hkv, D}, offset);
  HeadNormRope p{d_q_pre.t, d_k_pre.t, d_wq.t, d_wk.t, d_rstd_q.t, d_rstd_k.t, d_pos.t};
  p.freq = ref.freq;
  p.eps = ref.eps;
  head_norm_rope_forward(p, d_q.t, d_k.t);
  EXPECT_CLOSE(d_q.t, q, tolerance(xt));
  EXPECT_CLOSE(d_k.t, k, tolerance(xt));
  EXPECT_CLOSE(d_rstd_q.t, rstd_q, tolerance(DType::f32, true));
  EXPECT_CLOSE(d_rstd_k.t, rstd_k, tolerance(DType::f32, true));

  // The backward from the reference's rstd, as rounded to f32 on the device.
  DeviceTensor d_gq = upload_shifted(gq, xt, {T, H, D}, offset),
               d_gk = upload_shifted(gk, xt, {T, Hkv, D}, offset);
  DeviceTensor d_dq_pre = poisoned_shifted(xt, {T, H, D}, offset),
               d_dk_pre = poisoned_shifted(xt, {T, Hkv, D}, offset);
  DeviceTensor d_dwq = upload_shifted(dwq0, wt, {D}, offset), d_dwk = upload_shifted(dwk0, wt, {D}, offset);
  const Tensor out_q = in_place ? d_gq.t : d_dq_pre.t, out_k = in_place ? d_gk.t : d_dk_pre.t;
  head_norm_rope_backward(p, d_gq.t, d_gk.t, out_q, out_k, d_dwq.t, d_dwk.t);
  EXPECT_CLOSE(out_q, dq_pre, tolerance(xt, true));
  EXPECT_CLOSE(out_k, dk_pre, tolerance(xt, true));
  EXPECT_CLOSE(d_dwq.t, dwq, tolerance(wt == DType::bf16 ? DType::bf16 : xt, true));
  EXPECT_CLOSE(d_dwk.t, dwk, tolerance(wt == DType::bf16 ? DType::bf16 : xt, true));
}

// Head dims of the fused kernels (bf16: 64, 128, 256; f32: 32, 64, 128), Qwen3's shapes among them, 1 token
// to thousands (teams with several groups of rows, part blocks), GQA and MHA.
TEST(CudaHeadNormRope, FusedKernelsMatchCpu) {
  SKIP_WITHOUT_GPU();
  const DType bf = DType::bf16, f32 = DType::f32;
  for (const Case& c : std::vector<Case>{{bf, f32, 1, 1, 1, 128},
                                         {bf, f32, 3, 16, 8, 128},
                                         {bf, f32, 2051, 16, 8, 128},
                                         {bf, f32, 301, 14, 2, 64},
                                         {bf, bf, 77, 4, 4, 256},
                                         {bf, f32, 513, 8, 1, 128, false},
                                         {bf, f32, 130, 6, 2, 64, true, true},
                                         {f32, f32, 65, 3, 1, 32},
                                         {f32, f32, 9, 5, 5, 64, true, true},
                                         {f32, f32, 40, 2, 2, 128, false}})
    check(c);
}

// Shapes the fused kernels leave to the norm and rotation kernels: head dims that are not 8, 16 or 32
// vectors, and rows off 16-byte alignment.
TEST(CudaHeadNormRope, OtherShapesMatchCpu) {
  SKIP_WITHOUT_GPU();
  const DType bf = DType::bf16, f32 = DType::f32;
  for (const Case& c : std::vector<Case>{{bf, f32, 5, 3, 1, 96},
                                         {bf, f32, 33, 2, 2, 6},
                                         {f32, f32, 7, 3, 3, 80, false},
                                         {bf, f32, 37, 4, 2, 128, true, false, 1},
                                         {bf, f32, 37, 4, 2, 128, true, true, 1}})
    check(c);
}

}  // namespace
}  // namespace pt::ops
