// 2:4 sparse GEMMs on cuSPARSELt (ops/cuda/sparse_gemm.h) and SparseLinear on cuda: with the sparse
// kernels forced in each operand arrangement, every GEMM equals the masked dense math, both the f64 cpu
// reference and cuBLASLt on the same bf16 operands, for token counts on and off the plan grid, outputs
// poisoned (NaN) first, overwritten and accumulated; plus the weight refresh and the autotuner.
#ifdef PACKTRAIN_CUDA

#include "ops/cuda/sparse_gemm.h"
#include "ops/cuda/cusparselt_pack.h"
#include "ops/cuda/sparse_gemm_sm90.h"

#include <algorithm>
#include <array>
#include <iostream>
#include <random>
#include <tuple>

#include "cuda_test_util.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/gelu.h"
#include "ops/linear.h"
#include "ops/sparse24.h"
#include "ops/sparse_linear.h"
#include "ops/swiglu.h"

namespace pt::ops {
namespace {

using namespace pt::testing;
using cuda::SparseGemmMode;

// Sets the sparse GEMM mode for one scope.
class ModeGuard {
 public:
  explicit ModeGuard(SparseGemmMode mode) : previous_(cuda::sparse_gemm_mode()) {
    cuda::set_sparse_gemm_mode(mode);
  }
  ~ModeGuard() { cuda::set_sparse_gemm_mode(previous_); }

 private:
  SparseGemmMode previous_;
};

#define SKIP_WITHOUT_SPARSE_GEMM()                                                                    \
  do {                                                                                                \
    SKIP_WITHOUT_GPU();                                                                               \
    if (!cuda::sparse_gemm_available()) GTEST_SKIP() << "no cuSPARSELt in this build or on this GPU"; \
  } while (0)

// Random values with a random transposable 2:4 mask applied: every aligned 4x4 block keeps the union of
// two permutation matrices that share no entry, so each row and each column of a block keeps 2.
std::vector<double> masked_weight(int64_t N, int64_t K, uint64_t seed) {
  std::vector<double> w = rounded(random_values(N * K, seed), DType::bf16);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  for (int64_t bn = 0; bn < N; bn += 4)
    for (int64_t bk = 0; bk < K; bk += 4) {
      std::array<int, 4> s{0, 1, 2, 3}, t{0, 1, 2, 3};
      std::shuffle(s.begin(), s.end(), rng);
      do std::shuffle(t.begin(), t.end(), rng);
      while (s[0] == t[0] || s[1] == t[1] || s[2] == t[2] || s[3] == t[3]);
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c)
          if (c != s[r] && c != t[r]) w[(bn + r) * K + bk + c] = 0;
    }
  return w;
}

// g[M,N] with at most 2 nonzeros in every column of every group of 4 rows (as MVUE24 leaves it); a last
// partial group keeps the rows of its 2 drawn slots that exist.
std::vector<double> pruned_along_tokens(int64_t M, int64_t N, uint64_t seed) {
  std::vector<double> g = rounded(random_values(M * N, seed), DType::bf16);
  std::mt19937_64 rng(seed + 1);
  for (int64_t m0 = 0; m0 < M; m0 += 4)
    for (int64_t n = 0; n < N; ++n) {
      std::array<int, 4> slots{0, 1, 2, 3};
      std::shuffle(slots.begin(), slots.end(), rng);
      for (int i = 2; i < 4; ++i)
        if (m0 + slots[i] < M) g[(m0 + slots[i]) * N + n] = 0;
    }
  return g;
}

// Operands of one layer shape and token count, their f64 cpu products, and device copies.
struct Problem {
  int64_t M, N, K;
  std::vector<double> x, w, dy, g;
  std::vector<double> y, dx, dw;  // x W^T, dy W, g^T x
  DeviceTensor d_x, d_w, d_dy, d_g;

  Problem(int64_t M_, int64_t N_, int64_t K_) : M(M_), N(N_), K(K_) {
    x = rounded(random_values(M * K, 11), DType::bf16);
    w = masked_weight(N, K, 12);
    dy = rounded(random_values(M * N, 13), DType::bf16);
    g = pruned_along_tokens(M, N, 14);
    y.resize(M * N), dx.resize(M * K), dw.resize(N * K);
    linear_forward(view(x, {M, K}), view(w, {N, K}), view(y, {M, N}));
    linear_backward(view(dy, {M, N}), view(x, {M, K}), view(w, {N, K}), view(dx, {M, K}), Write::overwrite,
                    Tensor(), Write::overwrite);
    linear_backward(view(g, {M, N}), view(x, {M, K}), view(w, {N, K}), Tensor(), Write::overwrite,
                    view(dw, {N, K}), Write::overwrite);
    d_x = upload(x, DType::bf16, {M, K});
    d_w = upload(w, DType::bf16, {N, K});
    d_dy = upload(dy, DType::bf16, {M, N});
    d_g = upload(g, DType::bf16, {M, N});
  }
};

std::vector<double> plus(std::vector<double> a, const std::vector<double>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// The output buffer: poisoned to overwrite, or holding `init` to add to.
DeviceTensor output(Write mode, const std::vector<double>& init, DType dtype,
                    std::initializer_list<int64_t> dims) {
  return mode == Write::accumulate ? upload(init, dtype, dims) : poisoned(dtype, dims);
}

const char* mode_name(Write mode) { return mode == Write::accumulate ? "accumulate" : "overwrite"; }

// Every GEMM through the sparse layer in `arrangement`, against the cpu reference and cuBLASLt. Returns
// which of forward, input grad and weight grad ran on a sparse kernel (cuSPARSELt's or ours).
std::array<bool, 3> check_gemms(Problem& p, SparseGemmMode arrangement, Write mode, DType dw_type) {
  const auto [M, N, K] = std::tuple(p.M, p.N, p.K);
  SCOPED_TRACE(fmt::format("{} M={} N={} K={} {} dw {}", cuda::sparse_gemm_mode_name(arrangement), M, N, K,
                           mode_name(mode), dtype_name(dw_type)));
  const ModeGuard guard(arrangement);
  const bool acc = mode == Write::accumulate;
  const std::vector<double> y0 = rounded(random_values(M * N, 21), DType::bf16),
                            dx0 = rounded(random_values(M * K, 22), DType::bf16),
                            dw0 = rounded(random_values(N * K, 23), dw_type);
  const double tol = tolerance(DType::bf16, true);
  cuda::SparseWeight weight(p.d_w.t);
  std::array<bool, 3> ran{};
  auto sparse_calls = [] { return cuda::sparse_gemm_stats().sparse_calls; };

  // Reference cuBLASLt results on the same device operands, from the same starting outputs.
  DeviceTensor ref_y = output(mode, y0, DType::bf16, {M, N}), ref_dx = output(mode, dx0, DType::bf16, {M, K}),
               ref_dw = output(mode, dw0, dw_type, {N, K});
  linear_forward(p.d_x.t, p.d_w.t, ref_y.t, mode);
  linear_backward(p.d_dy.t, p.d_x.t, p.d_w.t, ref_dx.t, mode, Tensor(), mode);
  linear_backward(p.d_g.t, p.d_x.t, p.d_w.t, Tensor(), mode, ref_dw.t, mode);

  int64_t before = sparse_calls();
  DeviceTensor y = output(mode, y0, DType::bf16, {M, N});
  cuda::sparse_linear_forward(p.d_x.t, weight, y.t, mode, "test");
  ran[0] = sparse_calls() > before;
  EXPECT_CLOSE(y.t, acc ? plus(y0, p.y) : p.y, tol);
  EXPECT_CLOSE(y.t, download(ref_y.t), tol);

  before = sparse_calls();
  DeviceTensor dx = output(mode, dx0, DType::bf16, {M, K});
  cuda::sparse_linear_input_grad(p.d_dy.t, weight, dx.t, mode, "test");
  ran[1] = sparse_calls() > before;
  EXPECT_CLOSE(dx.t, acc ? plus(dx0, p.dx) : p.dx, tol);
  EXPECT_CLOSE(dx.t, download(ref_dx.t), tol);

  before = sparse_calls();
  DeviceTensor dw = output(mode, dw0, dw_type, {N, K});
  cuda::sparse_linear_weight_grad(p.d_g.t, p.d_x.t, dw.t, mode, "test");
  ran[2] = sparse_calls() > before;
  EXPECT_CLOSE(dw.t, acc ? plus(dw0, p.dw) : p.dw, tol);
  EXPECT_CLOSE(dw.t, download(ref_dw.t), tol);
  return ran;
}

// Both arrangements, overwrite and accumulate, bf16 dw, and f32 dw. Every GEMM must have run on
// cuSPARSELt in at least one arrangement whenever M has grid rows (an arrangement cuSPARSELt refuses
// falls back to dense, correctly, and is reported), and f32 dw too (a bf16 product added in).
void check_shape(int64_t N, int64_t K, std::initializer_list<int64_t> token_counts) {
  const char* gemm_names[] = {"forward", "input grad", "weight grad"};
  for (int64_t M : token_counts) {
    Problem p(M, N, K);
    std::array<bool, 3> any{};
    for (SparseGemmMode arrangement : {SparseGemmMode::sparse_a, SparseGemmMode::sparse_b})
      for (Write mode : {Write::overwrite, Write::accumulate}) {
        const std::array<bool, 3> ran = check_gemms(p, arrangement, mode, DType::bf16);
        for (size_t i = 0; i < 3; ++i) {
          any[i] = any[i] || ran[i];
          if (!ran[i] && cuda::sparse_gemm_grid_rows(M) > 0)
            std::cout << "note: " << gemm_names[i] << " M=" << M << " N=" << N << " K=" << K
                      << " ran dense in " << cuda::sparse_gemm_mode_name(arrangement) << "\n";
        }
      }
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(any[i], cuda::sparse_gemm_grid_rows(M) > 0)
          << gemm_names[i] << " M=" << M << " N=" << N << " K=" << K;
    for (Write mode : {Write::overwrite, Write::accumulate}) {
      const std::array<bool, 3> f32 = check_gemms(p, SparseGemmMode::sparse, mode, DType::f32);
      EXPECT_EQ(f32[2], cuda::sparse_gemm_grid_rows(M) > 0) << "f32 dw M=" << M << " N=" << N << " K=" << K;
    }
  }
}

TEST(SparseGemm, GridRowsStayWithinMAndCloseToIt) {
  EXPECT_EQ(cuda::sparse_gemm_grid_rows(0), 0);
  EXPECT_EQ(cuda::sparse_gemm_grid_rows(31), 0);
  EXPECT_EQ(cuda::sparse_gemm_grid_rows(37), 32);
  EXPECT_EQ(cuda::sparse_gemm_grid_rows(1100), 1088);
  EXPECT_EQ(cuda::sparse_gemm_grid_rows(16384), 16384);
  EXPECT_EQ(cuda::sparse_gemm_grid_rows(16384 + 1000), 16384 + 512);  // steps of 16384/32
  int64_t distinct = 0, previous = -1;
  for (int64_t M = 32; M < (1 << 17); ++M) {
    const int64_t M0 = cuda::sparse_gemm_grid_rows(M);
    ASSERT_LE(M0, M);
    ASSERT_EQ(M0 % 32, 0) << M;
    ASSERT_LT(M - M0, std::max<int64_t>(32, M / 16)) << M;
    if (M0 != previous) ++distinct, previous = M0;
  }
  EXPECT_LE(distinct, 32 * 12) << "plans per octave should stay bounded";
}

TEST(SparseGemm, ModeNamesParseAndBadOnesFail) {
  for (SparseGemmMode m : {SparseGemmMode::automatic, SparseGemmMode::sparse, SparseGemmMode::sparse_a,
                           SparseGemmMode::sparse_b, SparseGemmMode::wgmma, SparseGemmMode::dense})
    EXPECT_EQ(cuda::parse_sparse_gemm_mode(cuda::sparse_gemm_mode_name(m)), m);
  try {
    cuda::parse_sparse_gemm_mode("fast");
    FAIL() << "accepted 'fast'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("auto, sparse, sparse-a, sparse-b, wgmma, dense"), std::string::npos)
        << e.what();
  }
}

// Our packer against cuSPARSELt's own compression, byte for byte: from A and from a stored A^T, at the
// smallest shapes it takes and at FFN shapes (multiples of 64; cuSPARSELt pads the others).
TEST(SparseGemm, OurPackingWritesCusparseLtsLayout) {
  EXPECT_FALSE(cuda::cusparselt_pack_fits(64, 32));
  EXPECT_FALSE(cuda::cusparselt_pack_fits(96, 128));
  SKIP_WITHOUT_SPARSE_GEMM();
  for (const auto& [R, C] :
       {std::pair<int64_t, int64_t>{64, 64}, {128, 192}, {192, 64}, {768, 2048}, {2048, 768}, {4096, 1024}})
    for (bool transpose : {false, true})
      EXPECT_TRUE(cuda::cusparselt_pack_matches_library(R, C, transpose))
          << "A [" << R << ", " << C << "]" << (transpose ? " from A^T" : "");
}

// The weight gradient's fused pass (MVUE24 pruning inside the packing of g^T) writes exactly what packing
// ops::mvue24's output writes, on gradients with zeros, ties and dominant entries. Needs no cuSPARSELt.
TEST(SparseGemm, FusedMvuePackingEqualsPruningThenPacking) {
  SKIP_WITHOUT_GPU();
  for (const auto& [R, C] : {std::pair<int64_t, int64_t>{64, 64}, {128, 192}, {512, 1088}, {2048, 320}}) {
    SCOPED_TRACE(fmt::format("A [{}, {}] from g [{}, {}]", R, C, C, R));
    std::vector<double> g = rounded(random_values(C * R, static_cast<uint64_t>(R + C), -2, 2), DType::bf16);
    std::mt19937 rng(static_cast<uint32_t>(R * C));
    for (double& v : g) {
      const uint32_t r = rng() % 8;
      if (r < 2) v = 0;     // groups with 0..4 nonzeros: some pass unpruned
      if (r == 2) v = 0.5;  // ties
      if (r == 3) v *= 64;  // dominant entries: kept for sure
    }
    const uint64_t seed = 0x51 + static_cast<uint64_t>(C);
    DeviceTensor d_g = upload(g, DType::bf16, {C, R}), pruned = poisoned(DType::bf16, {C, R});
    mvue24(d_g.t, seed, pruned.t);
    const int64_t bytes = cuda::cusparselt_pack_bytes(R, C);
    DeviceTensor want = poisoned(DType::u8, {bytes}), got = poisoned(DType::u8, {bytes});
    cuda::cusparselt_pack24(pruned.t.data, R, true, R, C, want.t.data);
    cuda::cusparselt_pack24_mvue(d_g.t.data, R, R, C, seed, got.t.data);
    EXPECT_EQ(download_bytes(got.t), download_bytes(want.t));
  }
}

// One FFN activation's plain backward, and its backward fused with MVUE24 and the packing, as SparseLinear
// runs them; U is the width of its input h and gradient dh (2F for SwiGLU's gate|up, F for GELU).
struct ActivationCase {
  Activation activation;
  const char* name;
  int64_t U(int64_t F) const { return activation == Activation::swiglu ? 2 * F : F; }
  void plain(const Tensor& dout, const Tensor& h, const Tensor& dh) const {
    if (activation == Activation::swiglu) return swiglu_backward(dout, h, dh);
    if (activation == Activation::gelu_tanh) return gelu_backward(dout, h, dh);
    gelu_erf_backward(dout, h, dh);
  }
  bool fused(const Tensor& dout, const Tensor& h, const Tensor& dh, uint64_t seed, int64_t rows,
             void* packed) const {
    if (activation == Activation::swiglu)
      return cuda::swiglu_backward_mvue_packed(dout, h, dh, seed, rows, packed);
    if (activation == Activation::gelu_tanh)
      return cuda::gelu_backward_mvue_packed(dout, h, dh, seed, rows, packed);
    return cuda::gelu_erf_backward_mvue_packed(dout, h, dh, seed, rows, packed);
  }
};
constexpr ActivationCase kActivations[] = {
    {Activation::swiglu, "swiglu"}, {Activation::gelu_tanh, "gelu"}, {Activation::gelu_erf, "gelu_erf"}};

// The activation backward fused with MVUE24 and the packing writes the dh of the plain backward and, for
// its first `rows` tokens, the bytes that packing mvue24(dh)^T writes; where it cannot fuse (F not a
// multiple of 64) it runs the plain backward alone and says so. Gradients with exact zeros (pruned groups
// of 0..4 nonzeros). Needs no cuSPARSELt.
TEST(SparseGemm, ActivationBackwardFusedWithMvuePacksWhatPruningItsOutputPacks) {
  SKIP_WITHOUT_GPU();
  for (const ActivationCase& act : kActivations)
    for (const auto& [T, F, rows] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 64},
                                     {200, 128, 192},
                                     {1100, 192, 1088},
                                     {128, 96, 64}}) {
      SCOPED_TRACE(fmt::format("{} T={} F={} rows={}", act.name, T, F, rows));
      const int64_t U = act.U(F);
      const std::vector<double> h =
          rounded(random_values(T * U, static_cast<uint64_t>(T + F), -4, 4), DType::bf16);
      std::vector<double> dout =
          rounded(random_values(T * F, static_cast<uint64_t>(3 * T + F), -1, 1), DType::bf16);
      std::mt19937 rng(static_cast<uint32_t>(T * F));
      for (double& v : dout)
        if (rng() % 3 == 0) v = 0;
      const DeviceTensor d_h = upload(h, DType::bf16, {T, U}), d_dout = upload(dout, DType::bf16, {T, F});
      DeviceTensor plain = poisoned(DType::bf16, {T, U}), fused = poisoned(DType::bf16, {T, U});
      const int64_t bytes = cuda::cusparselt_pack_bytes(U, rows);
      DeviceTensor want = poisoned(DType::u8, {bytes}), got = poisoned(DType::u8, {bytes});
      const uint64_t seed = 0x5eed + static_cast<uint64_t>(T);
      act.plain(d_dout.t, d_h.t, plain.t);
      const bool packed = act.fused(d_dout.t, d_h.t, fused.t, seed, rows, got.t.data);
      EXPECT_EQ(download_bytes(fused.t), download_bytes(plain.t));
      EXPECT_EQ(packed, F % 64 == 0);
      if (!packed) continue;
      cuda::cusparselt_pack24_mvue(plain.t.data, U, U, rows, seed, want.t.data);
      EXPECT_EQ(download_bytes(got.t), download_bytes(want.t));
    }
}

// SparseLinear::activation_backward on an up projection with MVUE dW, with and without rows past the plan's
// grid. With cuSPARSELt forced (sparse-a), once the first call has made the plan it packs dh itself, and
// the backward that takes that operand gives the dx and dw of the unfused path bit for bit. In automatic
// mode (where it also times itself for the autotuner's first decision) dw is the cpu's mvue24 of the same
// dh times x, whichever path the autotuner takes.
TEST(SparseGemm, ActivationBackwardPackingFeedsTheSparseWeightGradient) {
  SKIP_WITHOUT_SPARSE_GEMM();
  const int64_t F = 256, C = 128;
  const uint64_t seed = 99;
  for (const ActivationCase& act : kActivations)
    for (SparseGemmMode mode : {SparseGemmMode::sparse_a, SparseGemmMode::automatic})
      for (int64_t T : {1088, 1100}) {
        SCOPED_TRACE(fmt::format("{} {} T={}", act.name, cuda::sparse_gemm_mode_name(mode), T));
        const ModeGuard guard(mode);
        const int64_t U = act.U(F);
        std::vector<double> w = masked_weight(U, C, 5), x = rounded(random_values(T * C, 6), DType::bf16);
        const DeviceTensor d_w = upload(w, DType::bf16, {U, C}), d_x = upload(x, DType::bf16, {T, C});
        const DeviceTensor h =
            upload(rounded(random_values(T * U, 7, -3, 3), DType::bf16), DType::bf16, {T, U});
        const DeviceTensor dout = upload(rounded(random_values(T * F, 8), DType::bf16), DType::bf16, {T, F});
        SparseLinear layer(d_w.t, T, fmt::format("layers.0.mlp.{}", act.name));
        const auto step = [&](bool fuse) {
          DeviceTensor dh = poisoned(DType::bf16, {T, U}), dx = poisoned(DType::bf16, {T, C});
          DeviceTensor dw = poisoned(DType::f32, {U, C});
          const bool packed =
              fuse ? layer.activation_backward(act.activation, dout.t, h.t, dh.t, seed, DType::f32)
                   : (act.plain(dout.t, h.t, dh.t), false);
          layer.backward(dh.t, d_x.t, dx.t, Write::overwrite, dw.t, Write::overwrite, dh.t, seed, packed);
          return std::tuple(packed, download_bytes(dx.t), std::move(dw));
        };
        if (mode == SparseGemmMode::sparse_a) {
          const auto [first_packed, dx_want, dw_want] = step(false);  // decides and makes the plan
          const auto [packed, dx_got, dw_got] = step(true);
          EXPECT_TRUE(packed);
          EXPECT_EQ(dx_got, dx_want);
          EXPECT_EQ(download_bytes(dw_got.t), download_bytes(dw_want.t));
          continue;
        }
        DeviceTensor dh = poisoned(DType::bf16, {T, U});
        act.plain(dout.t, h.t, dh.t);
        const std::vector<double> dh_host = download(dh.t);
        std::vector<float> dh_f(dh_host.begin(), dh_host.end()), pruned_f(dh_f.size());
        mvue24(Tensor::of(dh_f.data(), {T, U}), seed, Tensor::of(pruned_f.data(), {T, U}));
        std::vector<double> pruned(pruned_f.begin(), pruned_f.end()), dw_want(U * C);
        linear_backward(view(pruned, {T, U}), view(x, {T, C}), view(w, {U, C}), Tensor(), Write::overwrite,
                        view(dw_want, {U, C}), Write::overwrite);
        for (int call = 0; call < 2; ++call) {
          const auto [packed, dx_bytes, dw] = step(true);
          EXPECT_CLOSE(dw.t, dw_want, tolerance(DType::bf16, true));
        }
      }
}

// dw = mvue24(dy)^T x through sparse_linear_weight_grad_mvue against the cpu's mvue24 and f64 GEMM: token
// counts whose grid rows our packer takes (pruned as packed, with and without a dense tail) and one it
// does not (pruned first, cuSPARSELt's compression), both arrangements, in place and into another buffer.
TEST(SparseGemm, WeightGradPrunedOnTheWayMatchesCpu) {
  SKIP_WITHOUT_SPARSE_GEMM();
  const int64_t N = 512, K = 256;
  const uint64_t seed = 77;
  for (int64_t M : {1088, 2100, 1000}) {
    Problem p(M, N, K);
    std::vector<float> dy_f(p.dy.begin(), p.dy.end()), pruned_f(dy_f.size());
    mvue24(Tensor::of(dy_f.data(), {M, N}), seed, Tensor::of(pruned_f.data(), {M, N}));
    std::vector<double> pruned = rounded(std::vector<double>(pruned_f.begin(), pruned_f.end()), DType::bf16);
    std::vector<double> dw_want(N * K);
    linear_backward(view(pruned, {M, N}), view(p.x, {M, K}), view(p.w, {N, K}), Tensor(), Write::overwrite,
                    view(dw_want, {N, K}), Write::overwrite);
    for (SparseGemmMode arrangement : {SparseGemmMode::sparse_a, SparseGemmMode::sparse_b})
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(fmt::format("M={} {} {}", M, cuda::sparse_gemm_mode_name(arrangement),
                                 in_place ? "in place" : "into a scratch"));
        const ModeGuard guard(arrangement);
        DeviceTensor dy = upload(p.dy, DType::bf16, {M, N}), scratch = poisoned(DType::bf16, {M, N});
        DeviceTensor dw = poisoned(DType::f32, {N, K});
        const auto before = cuda::sparse_gemm_stats();
        cuda::sparse_linear_weight_grad_mvue(dy.t, seed, in_place ? dy.t : scratch.t, p.d_x.t, dw.t,
                                             Write::overwrite, "test");
        if (arrangement == SparseGemmMode::sparse_a) {  // cuSPARSELt may refuse the other: then dense
          EXPECT_EQ(cuda::sparse_gemm_stats().sparse_calls - before.sparse_calls, 1);
        }
        EXPECT_CLOSE(dw.t, dw_want, tolerance(DType::bf16, true));
      }
  }
}

// A GPT-2-small-sized FFN (768 <-> 2048) at token counts on the grid, off it (a dense tail) and tiny.
TEST(SparseGemm, SmallFfnShapesMatchMaskedDense) {
  SKIP_WITHOUT_SPARSE_GEMM();
  check_shape(2048, 768, {16, 37, 200, 1100, 4100});
  check_shape(768, 2048, {16, 37, 1100});
}

TEST(SparseGemm, LargeFfnShapesMatchMaskedDense) {
  SKIP_WITHOUT_SPARSE_GEMM();
  check_shape(8192, 2048, {48, 1100});
  check_shape(2048, 8192, {48, 1100});
}

// Our wgmma kernel for the forward and the input gradient at FFN shapes, token counts that are not
// multiples of its 128-token tile, overwritten and accumulated; dW stays dense in this mode.
TEST(SparseGemm, WgmmaKernelMatchesMaskedDense) {
  SKIP_WITHOUT_SPARSE_GEMM();
  if (!cuda::wgmma_sparse_gemm_available()) GTEST_SKIP() << "no sm_90a kernel for this GPU";
  for (const auto& [N, K, tokens] : {std::tuple{2048, 768, std::vector<int64_t>{37, 200, 1100, 4100}},
                                     std::tuple{768, 2048, std::vector<int64_t>{48, 1100}},
                                     std::tuple{8192, 2048, std::vector<int64_t>{300}}})
    for (int64_t M : tokens) {
      Problem p(M, N, K);
      for (Write mode : {Write::overwrite, Write::accumulate}) {
        const std::array<bool, 3> ran = check_gemms(p, SparseGemmMode::wgmma, mode, DType::bf16);
        EXPECT_TRUE(ran[0] && ran[1]) << "forward and input grad on the wgmma kernel, M=" << M;
        EXPECT_FALSE(ran[2]) << "dW dense";
      }
    }
}

// Below 32 tokens and on misaligned views everything runs dense, with the same results.
TEST(SparseGemm, FewTokensAndMisalignedViewsRunDense) {
  SKIP_WITHOUT_SPARSE_GEMM();
  const ModeGuard guard(SparseGemmMode::sparse);
  Problem p(9, 256, 128);
  cuda::SparseWeight weight(p.d_w.t);
  auto before = cuda::sparse_gemm_stats();
  DeviceTensor y = poisoned(DType::bf16, {p.M, p.N});
  cuda::sparse_linear_forward(p.d_x.t, weight, y.t, Write::overwrite, "test");
  EXPECT_CLOSE(y.t, p.y, tolerance(DType::bf16, true));
  EXPECT_EQ(cuda::sparse_gemm_stats().dense_calls - before.dense_calls, 1);

  Problem q(64, 256, 128);
  DeviceTensor big = poisoned(DType::bf16, {q.M * q.N + 1});
  const Tensor y_off(static_cast<uint16_t*>(big.t.data) + 1, DType::bf16, {q.M, q.N}, Device::cuda);
  cuda::SparseWeight wq(q.d_w.t);
  before = cuda::sparse_gemm_stats();
  cuda::sparse_linear_forward(q.d_x.t, wq, y_off, Write::overwrite, "test");
  EXPECT_CLOSE(y_off, q.y, tolerance(DType::bf16, true));
  EXPECT_EQ(cuda::sparse_gemm_stats().dense_calls - before.dense_calls, 1);
}

// SparseLinear on cuda against SparseLinear on cpu (the masked dense reference): forward, dx on the
// sparse kernel, dense dw from the unpruned dy; then new weight values reach the GEMMs after refresh().
// In each sparse mode: cuSPARSELt, and our wgmma kernel where the GPU runs it.
void check_sparse_linear_and_refresh(SparseGemmMode sparse_mode) {
  SCOPED_TRACE(cuda::sparse_gemm_mode_name(sparse_mode));
  const ModeGuard guard(sparse_mode);
  const int64_t M = 256, N = 512, K = 256;  // on the grid: no dense tail rows
  Problem p(M, N, K);
  SparseLinear gpu(p.d_w.t, M, "layers.0.mlp.up_proj");
  SparseLinear cpu(view(p.w, {N, K}), M, "cpu");
  const double tol = tolerance(DType::bf16, true);

  std::vector<double> y(M * N), dx(M * K), dw(N * K, 0.0);
  cpu.forward(view(p.x, {M, K}), view(y, {M, N}), Write::overwrite);
  cpu.backward(view(p.dy, {M, N}), view(p.x, {M, K}), view(dx, {M, K}), Write::overwrite, view(dw, {N, K}),
               Write::accumulate, Tensor(), 0);
  DeviceTensor d_y = poisoned(DType::bf16, {M, N}), d_dx = poisoned(DType::bf16, {M, K});
  DeviceTensor d_dw = upload(std::vector<double>(N * K, 0.0), DType::f32, {N, K});
  const auto before = cuda::sparse_gemm_stats();
  gpu.forward(p.d_x.t, d_y.t, Write::overwrite);
  gpu.backward(p.d_dy.t, p.d_x.t, d_dx.t, Write::overwrite, d_dw.t, Write::accumulate, Tensor(), 0);
  EXPECT_CLOSE(d_y.t, y, tol);
  EXPECT_CLOSE(d_dx.t, dx, tol);
  EXPECT_CLOSE(d_dw.t, dw, tol);
  EXPECT_EQ(cuda::sparse_gemm_stats().sparse_calls - before.sparse_calls, 2) << "forward and dx";

  // New values in the same buffer: without refresh() the compressed copies still hold the old ones
  // (which shows the sparse kernel reads them); after it both GEMMs see the new weight.
  std::vector<double> w2 = masked_weight(N, K, 99);
  std::vector<double> y2(M * N), dx2(M * K);
  linear_forward(view(p.x, {M, K}), view(w2, {N, K}), view(y2, {M, N}));
  linear_backward(view(p.dy, {M, N}), view(p.x, {M, K}), view(w2, {N, K}), view(dx2, {M, K}),
                  Write::overwrite, Tensor(), Write::overwrite);
  DeviceTensor w2_bf16 = upload(w2, DType::bf16, {N, K});
  copy_bytes(p.d_w.t.data, true, w2_bf16.t.data, true, static_cast<size_t>(p.d_w.t.bytes()));
  gpu.forward(p.d_x.t, d_y.t, Write::overwrite);
  EXPECT_CLOSE(d_y.t, y, tol);
  gpu.refresh();
  gpu.forward(p.d_x.t, d_y.t, Write::overwrite);
  gpu.backward(p.d_dy.t, p.d_x.t, d_dx.t, Write::overwrite, Tensor(), Write::overwrite, Tensor(), 0);
  EXPECT_CLOSE(d_y.t, y2, tol);
  EXPECT_CLOSE(d_dx.t, dx2, tol);

  // One compressed copy serves every token count (cuSPARSELt: the plans of other sizes).
  for (int64_t m : {100, 64}) {
    const Tensor x_head(p.d_x.t.data, DType::bf16, {m, K}, Device::cuda);
    DeviceTensor y_head = poisoned(DType::bf16, {m, N});
    gpu.forward(x_head, y_head.t, Write::overwrite);
    SCOPED_TRACE(fmt::format("{} tokens", m));
    EXPECT_CLOSE(y_head.t, std::vector<double>(y2.begin(), y2.begin() + m * N), tol);
  }
}

TEST(SparseGemm, SparseLinearMatchesCpuAndRefreshPicksUpNewWeights) {
  SKIP_WITHOUT_SPARSE_GEMM();
  check_sparse_linear_and_refresh(SparseGemmMode::sparse);
  if (cuda::wgmma_sparse_gemm_available()) check_sparse_linear_and_refresh(SparseGemmMode::wgmma);
}

TEST(SparseGemm, SparseLinearChecksItsArguments) {
  SKIP_WITHOUT_GPU();
  DeviceTensor w = upload(masked_weight(64, 32, 1), DType::bf16, {64, 32});
  SparseLinear layer(w.t, 16, "layers.1.mlp.down_proj");
  DeviceTensor x = poisoned(DType::bf16, {32, 32}), y = poisoned(DType::bf16, {32, 64});
  EXPECT_THROW(layer.forward(x.t, y.t, Write::overwrite), Error);  // 32 tokens > max_tokens 16
  DeviceTensor x16 = poisoned(DType::bf16, {16, 48});
  EXPECT_THROW(layer.forward(x16.t, y.t, Write::overwrite), Error);  // K 48 != 32
}

// In auto mode the first call of a GEMM shape and token octave times sparse against dense once, keeps
// the faster and reuses it; every path gives the masked dense result.
TEST(SparseGemm, AutotunerDecidesOncePerBucketAndStaysCorrect) {
  SKIP_WITHOUT_SPARSE_GEMM();
  const ModeGuard guard(SparseGemmMode::automatic);
  const int64_t N = 1024, K = 512;
  const double tol = tolerance(DType::bf16, true);
  for (int64_t M : {2048, 3000}) {  // two buckets: [2048, 4096) holds both M0, so one decision
    Problem p(M, N, K);
    cuda::SparseWeight weight(p.d_w.t);
    const auto before = cuda::sparse_gemm_stats();
    for (int rep = 0; rep < 2; ++rep) {
      DeviceTensor y = poisoned(DType::bf16, {M, N});
      cuda::sparse_linear_forward(p.d_x.t, weight, y.t, Write::overwrite, "tuned");
      EXPECT_CLOSE(y.t, p.y, tol);
      DeviceTensor dw = upload(std::vector<double>(N * K, 0.5), DType::bf16, {N, K});
      cuda::sparse_linear_weight_grad(p.d_g.t, p.d_x.t, dw.t, Write::accumulate, "tuned");
      EXPECT_CLOSE(dw.t, plus(std::vector<double>(N * K, 0.5), p.dw), tol);
    }
    const auto after = cuda::sparse_gemm_stats();
    EXPECT_EQ(after.sparse_calls + after.dense_calls - before.sparse_calls - before.dense_calls, 4);
    EXPECT_EQ(after.decisions - before.decisions, M == 2048 ? 2 : 0) << "one per GEMM kind and bucket";
  }
  const auto before = cuda::sparse_gemm_stats();
  {
    const ModeGuard dense(SparseGemmMode::dense);
    Problem p(2048, N, K);
    cuda::SparseWeight weight(p.d_w.t);
    DeviceTensor y = poisoned(DType::bf16, {p.M, N});
    cuda::sparse_linear_forward(p.d_x.t, weight, y.t, Write::overwrite, "dense");
    EXPECT_CLOSE(y.t, p.y, tol);
  }
  const auto after = cuda::sparse_gemm_stats();
  EXPECT_EQ(after.sparse_calls, before.sparse_calls);
  EXPECT_EQ(after.dense_calls - before.dense_calls, 1);
}

// What SparseLinear::weight_grad_sparse (and so --sparse-dw auto) asks: true until the autotuner has
// decided the bucket, then whether the call it timed ran sparse; false in modes that keep dW dense.
TEST(SparseGemm, WeightGradRunsSparseFollowsTheAutotunersChoice) {
  SKIP_WITHOUT_SPARSE_GEMM();
  const int64_t M = 2048, N = 512, K = 256;  // a shape no other test decides
  {
    const ModeGuard dense(SparseGemmMode::dense);
    EXPECT_FALSE(cuda::sparse_weight_grad_runs_sparse(M, N, K, DType::f32));
  }
  const ModeGuard guard(SparseGemmMode::automatic);
  EXPECT_TRUE(cuda::sparse_weight_grad_runs_sparse(M, N, K, DType::f32)) << "undecided";
  EXPECT_FALSE(cuda::sparse_weight_grad_runs_sparse(16, N, K, DType::f32)) << "too few rows for a plan";
  Problem p(M, N, K);
  DeviceTensor dw = poisoned(DType::f32, {N, K});
  const auto before = cuda::sparse_gemm_stats();
  cuda::sparse_linear_weight_grad(p.d_g.t, p.d_x.t, dw.t, Write::overwrite, "asked");
  EXPECT_CLOSE(dw.t, p.dw, tolerance(DType::bf16, true));
  const bool ran_sparse = cuda::sparse_gemm_stats().sparse_calls > before.sparse_calls;
  EXPECT_EQ(cuda::sparse_weight_grad_runs_sparse(M, N, K, DType::f32), ran_sparse);
  EXPECT_EQ(cuda::sparse_weight_grad_runs_sparse(M + 100, N, K, DType::f32), ran_sparse) << "same bucket";
}

}  // namespace
}  // namespace pt::ops

#endif  // PACKTRAIN_CUDA
