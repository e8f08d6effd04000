// bench_sparse_gemm_lab: the lab of our own 2:4 sparse GEMM on wgmma.mma_async.sp (ops/cuda/sparse_gemm_sm90.h).
//   --probe  exact small-integer inputs (values in [-3, 3], exact in bf16; every sum exact in f32), so any
//            difference is a layout error; each part prints "ok" or the wrong count, a map of 8 x 8 blocks
//            (X: some element wrong) and the first wrong elements. In order, so the first failure
//            localizes the bug:
//            1 compress24 vs a CPU encoder of the format, bit for bit: mask given (pruned entries hold
//              nonzero values; groups keeping 0, 1 or 2), kept = nonzero, and the count of overfull groups
//            2 metadata alone: one CTA, x = identity (token j is column j of K = 128), W's kept values
//              name their column (1 + column % 32), so the raw accumulator is W itself and a wrong entry
//              says which column of its k32 step the hardware took
//            3 raw accumulators of one CTA (256 weight rows x 128 tokens, K = 512: four stages, so stage
//              reuse runs) straight from the wgmma fragments, no epilogue
//            4 the whole kernel (epilogue through stmatrix and shared memory): the same CTA; one CTA with
//              M = 77 tokens and beta = 1 whose guard rows past M must stay NaN; 2 x 3 CTAs (N = 512,
//              M = 300, K = 384)
//   --check  random bf16 x, W pruned by ops::transposable_mask24, at the target shapes: the forward y = x W^T
//            (W packed by compress24) and the input gradient dx = dy W (W^T packed by
//            compress24_transposed) vs cuBLASLt (ops::linear_forward / linear_backward) on the masked W, the
//            output poisoned with NaN first; beta 0 and 1; passes at max |diff| / max |ref| <= 1e-2, no NaN.
//   --time   CUDA events, --reps calls after a warm-up: cuBLASLt dense vs this GEMM for both GEMMs of the
//            weights N x K = 16384 x 2048 (gate|up) and 2048 x 8192 (down) at each of --tokens; TFLOP/s as
//            dense-equivalent 2MNK; both compressions' times.
// Without a mode flag all three run. Exit code 0 when every probe and check passed.
// Usage: bench_sparse_gemm_lab [--probe] [--check] [--time] [--reps 20] [--tokens 16384,65536]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/device_buffer.h"
#include "core/float16.h"
#include "ops/linear.h"
#include "ops/sparse24.h"
#include "probe_report.h"
#include "lab_util.h"
#include "ops/cuda/sparse_gemm_sm90.h"

namespace {

using pt::DeviceBuffer;
using pt::lab::report;

constexpr uint16_t kNanBits = 0x7FC0;  // a quiet bf16 NaN

// --- reports ---

// --- host side of the format (an encoder written from the description in sparse_gemm_sm90.h) ---

struct Packed {
  std::vector<uint16_t> values, meta;  // meta as 16-bit halves of the u32 words
};

// kept: 1 where the entry is kept. Also counts the groups keeping more than 2 (their first two are used).
Packed compress_cpu(const std::vector<uint16_t>& w, const std::vector<uint8_t>& kept, int N, int K,
                    int* overfull = nullptr) {
  Packed p{std::vector<uint16_t>(static_cast<size_t>(N) * K / 2),
           std::vector<uint16_t>(static_cast<size_t>(N) * K / 16)};
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < K; c += 4) {
      // The first two kept columns; while fewer, every kept column is chosen, so the lowest unkept complete.
      std::array<int, 2> cols{};
      int chosen = 0, kept_count = 0;
      const auto is_kept = [&](int k) { return kept[static_cast<size_t>(n) * K + c + k] != 0; };
      for (int k = 0; k < 4; ++k)
        if (is_kept(k) && ++kept_count <= 2) cols[static_cast<size_t>(chosen++)] = k;
      if (kept_count > 2 && overfull) ++*overfull;
      for (int k = 0; k < 4 && chosen < 2; ++k)
        if (!is_kept(k)) cols[static_cast<size_t>(chosen++)] = k;
      if (cols[0] > cols[1]) std::swap(cols[0], cols[1]);
      for (int h = 0; h < 2; ++h) {
        const size_t src = static_cast<size_t>(n) * K + c + cols[static_cast<size_t>(h)];
        p.values[static_cast<size_t>(n) * K / 2 + c / 2 + h] = kept[src] ? w[src] : uint16_t{0};
      }
      const int kt = c / 128, step = c % 128 / 32, half_k = c % 32 / 16, group = c % 16 / 4;
      const int64_t word =
          ((int64_t{n} / 64 * (K / 128) + kt) * 64 + 16 * (n % 64 / 16) + 2 * (n % 8) + half_k) * 4 + step;
      p.meta[static_cast<size_t>(2 * word + n % 16 / 8)] |=
          static_cast<uint16_t>((cols[0] | cols[1] << 2) << (4 * group));
    }
  return p;
}

// --- device helpers ---

DeviceBuffer upload16(const std::vector<uint16_t>& v) {
  DeviceBuffer b(v.size() * 2);
  b.upload(v.data(), v.size() * 2);
  return b;
}
DeviceBuffer upload8(const std::vector<uint8_t>& v) {
  DeviceBuffer b(v.size());
  b.upload(v.data(), v.size());
  return b;
}
template <class T>
std::vector<T> download(const DeviceBuffer& b) {
  std::vector<T> out(b.bytes() / sizeof(T));
  b.download(out.data(), b.bytes());
  return out;
}
std::vector<float> as_floats(const std::vector<uint16_t>& v) {  // bit patterns, for the exact reports
  return {v.begin(), v.end()};
}
std::vector<float> bf16_floats(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = pt::bf16_to_float(v[i]);
  return out;
}

// --- probe ---

struct Problem {  // host operands of one exact product
  int N, K, M;
  std::vector<uint16_t> w, x;  // bf16 bits
  std::vector<uint8_t> mask;
};

std::vector<float> product(const Problem& p) {  // acc[n][m] = sum_k (W * mask)[n][k] x[m][k], exact
  std::vector<float> out(static_cast<size_t>(p.N) * p.M);
  for (int n = 0; n < p.N; ++n)
    for (int m = 0; m < p.M; ++m) {
      double acc = 0;
      for (int k = 0; k < p.K; ++k) {
        const size_t i = static_cast<size_t>(n) * p.K + k;
        if (p.mask[i])
          acc += double(pt::bf16_to_float(p.w[i])) * pt::bf16_to_float(p.x[static_cast<size_t>(m) * p.K + k]);
      }
      out[static_cast<size_t>(n) * p.M + m] = static_cast<float>(acc);
    }
  return out;
}

// Random integers in [-3, 3] for W (also at pruned entries) and x; per group of 4 the mask keeps two
// columns, or with `thin` sometimes one or none.
Problem random_problem(int N, int K, int M, uint32_t seed, bool thin) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-3, 3), pick(0, 99);
  Problem p{N, K, M, {}, {}, std::vector<uint8_t>(static_cast<size_t>(N) * K, 0)};
  for (int i = 0; i < N * K; ++i) p.w.push_back(pt::float_to_bf16(float(small(rng))));
  for (int i = 0; i < M * K; ++i) p.x.push_back(pt::float_to_bf16(float(small(rng))));
  for (int i = 0; i < N * K; i += 4) {
    std::array<int, 4> cols{0, 1, 2, 3};
    std::shuffle(cols.begin(), cols.end(), rng);
    const int r = pick(rng), keep = !thin || r >= 10 ? 2 : r >= 5 ? 1 : 0;
    for (int k = 0; k < keep; ++k) p.mask[static_cast<size_t>(i + cols[static_cast<size_t>(k)])] = 1;
  }
  return p;
}

struct DeviceProblem {
  DeviceBuffer x, values, meta;
};

DeviceProblem upload_compressed(const Problem& p) {
  DeviceBuffer w = upload16(p.w), mask = upload8(p.mask);
  DeviceProblem d{upload16(p.x),
                  DeviceBuffer(static_cast<size_t>(pt::ops::cuda::sparse24_values_bytes(p.N, p.K))),
                  DeviceBuffer(static_cast<size_t>(pt::ops::cuda::sparse24_meta_bytes(p.N, p.K)))};
  pt::ops::cuda::compress24(w.data(), static_cast<const uint8_t*>(mask.data()), p.N, p.K, d.values.data(),
                      d.meta.data(), nullptr);
  return d;
}

bool probe_compress() {
  constexpr int N = 128, K = 256;
  const Problem p = random_problem(N, K, 1, 7, true);
  DeviceBuffer w = upload16(p.w), mask = upload8(p.mask), count(sizeof(int));
  DeviceBuffer values(static_cast<size_t>(N) * K), meta(static_cast<size_t>(N) * K / 8);
  bool ok = true;
  const auto compare = [&](const std::string& what, const Packed& want) {
    ok = report(what + ": values", as_floats(download<uint16_t>(values)), as_floats(want.values), N, K / 2) &&
         ok;
    ok = report(what + ": metadata (16-bit halves)", as_floats(download<uint16_t>(meta)),
                as_floats(want.meta), N, K / 16) &&
         ok;
  };
  pt::ops::cuda::compress24(w.data(), static_cast<const uint8_t*>(mask.data()), N, K, values.data(), meta.data(),
                      nullptr);
  compare("compress24, mask given", compress_cpu(p.w, p.mask, N, K));

  std::vector<uint16_t> masked(p.w.size());
  std::vector<uint8_t> nonzero(p.w.size());
  for (size_t i = 0; i < p.w.size(); ++i) {
    masked[i] = p.mask[i] ? p.w[i] : uint16_t{0};
    nonzero[i] = (masked[i] & 0x7FFF) != 0;
  }
  DeviceBuffer wm = upload16(masked);
  pt::ops::cuda::compress24(wm.data(), nullptr, N, K, values.data(), meta.data(), nullptr);
  compare("compress24, kept = nonzero", compress_cpu(masked, nonzero, N, K));

  std::vector<uint8_t> all_nonzero(p.w.size());
  for (size_t i = 0; i < p.w.size(); ++i) all_nonzero[i] = (p.w[i] & 0x7FFF) != 0;
  int want_overfull = 0;
  compress_cpu(p.w, all_nonzero, N, K, &want_overfull);
  pt::ops::cuda::compress24(w.data(), nullptr, N, K, values.data(), meta.data(), static_cast<int*>(count.data()));
  const int got_overfull = download<int>(count)[0];
  const bool count_ok = got_overfull == want_overfull;
  fmt::print("  {:<58} {}\n", "compress24 on a dense W: overfull groups counted",
             count_ok ? std::string("ok") : fmt::format("got {} want {}", got_overfull, want_overfull));
  return ok && count_ok;
}

bool probe_metadata() {
  constexpr int N = 256, K = 128, M = 128;
  Problem p = random_problem(N, K, M, 11, false);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) p.w[static_cast<size_t>(n) * K + k] = pt::float_to_bf16(float(1 + k % 32));
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) p.x[static_cast<size_t>(m) * K + k] = pt::float_to_bf16(m == k ? 1.0f : 0.0f);
  const DeviceProblem d = upload_compressed(p);
  DeviceBuffer acc(static_cast<size_t>(N) * M * 4);
  const std::string status = pt::ops::cuda::wgmma_sparse_gemm_raw(d.x.data(), d.values.data(), d.meta.data(),
                                                      static_cast<float*>(acc.data()), M, N, K);
  if (!status.empty()) {
    fmt::print("  FAILED: {}\n", status);
    return false;
  }
  const auto explain = [](int, int c, float got) {
    if (got == 0.0f) return fmt::format(" (column {} of its k32 step taken as pruned)", c % 32);
    return fmt::format(" (took column {} of the k32 step for column {})", int(got) - 1, c % 32);
  };
  return report("metadata: identity x, W = 1 + column % 32 (raw acc [n][k])", download<float>(acc),
                product(p), N, M, explain);
}

bool probe_raw() {
  constexpr int N = 256, K = 512, M = 128;
  const Problem p = random_problem(N, K, M, 13, true);
  const DeviceProblem d = upload_compressed(p);
  DeviceBuffer acc(static_cast<size_t>(N) * M * 4);
  const std::string status = pt::ops::cuda::wgmma_sparse_gemm_raw(d.x.data(), d.values.data(), d.meta.data(),
                                                      static_cast<float*>(acc.data()), M, N, K);
  if (!status.empty()) {
    fmt::print("  FAILED: {}\n", status);
    return false;
  }
  return report("raw accumulators, one CTA, K = 512 (acc [n][token])", download<float>(acc), product(p), N,
                M);
}

// y = acc + beta y0 through the kernel's epilogue vs the CPU's rounding of the same: the kernel rounds
// acc to bf16, adds beta y0 in f32 and rounds again. Rows M .. M + 2 of y are guard rows that must stay NaN.
bool probe_full(int N, int K, int M, float beta, uint32_t seed) {
  const Problem p = random_problem(N, K, M, seed, true);
  const DeviceProblem d = upload_compressed(p);
  std::mt19937 rng(seed + 1);
  std::uniform_int_distribution<int> small(-8, 8);
  constexpr int kGuard = 3;
  std::vector<uint16_t> y0(static_cast<size_t>(M + kGuard) * N, kNanBits);
  if (beta != 0.0f)
    for (size_t i = 0; i < static_cast<size_t>(M) * N; ++i) y0[i] = pt::float_to_bf16(float(small(rng)));
  DeviceBuffer y = upload16(y0);
  pt::ops::cuda::wgmma_sparse_gemm(d.x.data(), d.values.data(), d.meta.data(), y.data(), M, N, K, beta);
  const std::vector<float> acc = product(p);  // [n][m]
  std::vector<float> want(y0.size(), std::numeric_limits<float>::quiet_NaN());
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const size_t i = static_cast<size_t>(m) * N + n;
      float v = pt::bf16_to_float(pt::float_to_bf16(acc[static_cast<size_t>(n) * M + m]));
      if (beta != 0.0f) v = pt::bf16_to_float(pt::float_to_bf16(v + beta * pt::bf16_to_float(y0[i])));
      want[i] = v;
    }
  return report(fmt::format("whole kernel N={} K={} M={} beta={} (y [token][n], +{} guard rows)", N, K, M,
                            beta, kGuard),
                bf16_floats(download<uint16_t>(y)), want, M + kGuard, N);
}

bool run_probe() {
  fmt::print("probe\n");
  bool ok = probe_compress();
  ok = probe_metadata() && ok;
  ok = probe_raw() && ok;
  ok = probe_full(256, 512, 128, 0.0f, 17) && ok;
  ok = probe_full(256, 256, 77, 1.0f, 19) && ok;
  ok = probe_full(512, 384, 300, 0.0f, 23) && ok;
  return ok;
}

// --- check and timing at the target shapes ---

struct Shape {
  int64_t K, N;
};
constexpr std::array<Shape, 2> kShapes{{{2048, 16384}, {8192, 2048}}};

// A random bf16 weight pruned by the transposable 2:4 mask (masked in place), its mask and packed forms:
// W (2:4 along K) for the forward y = x W^T, W^T (2:4 along N) for the input gradient dx = dy W.
struct Weight {
  int64_t N, K;
  DeviceBuffer w, mask, values, meta, values_t, meta_t;
  Weight(int64_t n, int64_t k, uint64_t seed)
      : N(n),
        K(k),
        w(static_cast<size_t>(n * k * 2)),
        mask(static_cast<size_t>(n * k)),
        values(static_cast<size_t>(n * k)),
        meta(static_cast<size_t>(pt::ops::cuda::sparse24_meta_bytes(n, k))),
        values_t(values.bytes()),
        meta_t(meta.bytes()) {
    pt::lab::fill_uniform_bf16(w.data(), N * K, seed, -1.0f, 1.0f);
    pt::ops::transposable_mask24(tensor(), mask.view(pt::DType::u8, {N, K}));
    pt::ops::apply_mask(tensor(), mask.view(pt::DType::u8, {N, K}), tensor());
    compress();
    compress_transposed();
  }
  pt::Tensor tensor() const { return w.view(pt::DType::bf16, {N, K}); }
  void compress() {
    pt::ops::cuda::compress24(w.data(), static_cast<const uint8_t*>(mask.data()), N, K, values.data(), meta.data(),
                        nullptr);
  }
  void compress_transposed() {
    pt::ops::cuda::compress24_transposed(w.data(), static_cast<const uint8_t*>(mask.data()), N, K, values_t.data(),
                                   meta_t.data(), nullptr);
  }
};

// The two GEMMs of a 2:4 weight in the lab's one form y = x A^T: forward (A = W, x [M, K]) and input
// gradient (A = W^T, x = dy [M, N]).
enum class Gemm { forward, input_grad };

// NaN bounds make every value NaN: the poison that shows unwritten outputs.
void poison(DeviceBuffer& b) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  pt::lab::fill_uniform_bf16(b.data(), static_cast<int64_t>(b.bytes() / 2), 0, nan, nan);
}

bool check_one(const Weight& wt, Gemm gemm, int64_t M, uint64_t seed) {
  const bool fwd = gemm == Gemm::forward;
  const int64_t N = fwd ? wt.N : wt.K, K = fwd ? wt.K : wt.N;  // of y[M, N] = x[M, K] A^T
  DeviceBuffer x(static_cast<size_t>(M * K * 2)), y(static_cast<size_t>(M * N * 2)), ref(y.bytes()),
      y0(y.bytes());
  pt::lab::fill_uniform_bf16(x.data(), M * K, seed, -1.0f, 1.0f);
  pt::lab::fill_uniform_bf16(y0.data(), M * N, seed + 1, -4.0f, 4.0f);
  const pt::Tensor xt = x.view(pt::DType::bf16, {M, K}), rt = ref.view(pt::DType::bf16, {M, N});
  // cuBLASLt's y = x W^T, or dx = dy W (linear_backward reads its x argument's shape only, here rt's).
  const auto reference = [&](pt::ops::Write mode) {
    if (fwd)
      pt::ops::linear_forward(xt, wt.tensor(), rt, mode);
    else
      pt::ops::linear_backward(xt, rt, wt.tensor(), rt, mode, pt::Tensor(), pt::ops::Write::overwrite);
  };
  bool ok = true;
  for (const float beta : {0.0f, 1.0f}) {
    if (beta == 0.0f) {
      poison(y);
      reference(pt::ops::Write::overwrite);
    } else {
      pt::copy_bytes(y.data(), true, y0.data(), true, y.bytes());
      pt::copy_bytes(ref.data(), true, y0.data(), true, y.bytes());
      reference(pt::ops::Write::accumulate);
    }
    pt::ops::cuda::wgmma_sparse_gemm(x.data(), fwd ? wt.values.data() : wt.values_t.data(),
                         fwd ? wt.meta.data() : wt.meta_t.data(), y.data(), M, N, K, beta);
    const pt::lab::Compare c = pt::lab::compare_bf16(y.data(), ref.data(), M * N);
    const double rel = c.max_abs_want > 0 ? c.max_abs_diff / c.max_abs_want : c.max_abs_diff;
    const bool pass = c.nans == 0 && rel <= 1e-2;
    fmt::print("  {:10} K={:5} N={:5} M={:5} beta={}: max|diff| {:.4g}  max|ref| {:.4g}  rel {:.3e}  NaN {}  {}\n",
               fwd ? "forward" : "input grad", K, N, M, beta, c.max_abs_diff, c.max_abs_want, rel, c.nans, pass ? "ok" : "FAILED");
    ok = ok && pass;
  }
  return ok;
}

bool run_check() {
  fmt::print("check vs cuBLASLt on the masked weight\n");
  bool ok = true;
  for (const Shape& s : kShapes) {
    const Weight wt(s.N, s.K, 100 + static_cast<uint64_t>(s.K));
    for (const Gemm gemm : {Gemm::forward, Gemm::input_grad})
      for (const int64_t M : {int64_t{16384}, int64_t{1000}})
        ok = check_one(wt, gemm, M, 200 + static_cast<uint64_t>(M)) && ok;
  }
  return ok;
}

void run_time(const std::vector<int64_t>& tokens, int reps) {
  fmt::print("time (mean of {} calls; TF/s = dense-equivalent 2MNK)\n", reps);
  for (const Shape& s : kShapes) {
    Weight wt(s.N, s.K, 300 + static_cast<uint64_t>(s.K));
    const double compress_ms = pt::lab::time_ms([&] { wt.compress(); }, reps);
    const double compress_t_ms = pt::lab::time_ms([&] { wt.compress_transposed(); }, reps);
    fmt::print("  weight N={:5} K={:5}: compress24 {:.4f} ms, compress24_transposed {:.4f} ms (mask given)\n",
               s.N, s.K, compress_ms, compress_t_ms);
    for (const Gemm gemm : {Gemm::forward, Gemm::input_grad})
      for (const int64_t M : tokens) {
        const bool fwd = gemm == Gemm::forward;
        const int64_t N = fwd ? s.N : s.K, K = fwd ? s.K : s.N;
        DeviceBuffer x(static_cast<size_t>(M * K * 2)), y(static_cast<size_t>(M * N * 2));
        pt::lab::fill_uniform_bf16(x.data(), M * K, 400, -1.0f, 1.0f);
        const pt::Tensor xt = x.view(pt::DType::bf16, {M, K}), yt = y.view(pt::DType::bf16, {M, N});
        const double dense = pt::lab::time_ms(
            [&] {
              if (fwd)
                pt::ops::linear_forward(xt, wt.tensor(), yt);
              else
                pt::ops::linear_backward(xt, yt, wt.tensor(), yt, pt::ops::Write::overwrite, pt::Tensor(),
                                         pt::ops::Write::overwrite);
            },
            reps);
        const double sparse = pt::lab::time_ms(
            [&] {
              pt::ops::cuda::wgmma_sparse_gemm(x.data(), fwd ? wt.values.data() : wt.values_t.data(),
                                   fwd ? wt.meta.data() : wt.meta_t.data(), y.data(), M, N, K, 0.0f);
            },
            reps);
        const double flops = 2.0 * double(M) * double(N) * double(K);
        fmt::print("    {:10} M={:6} N={:5} K={:5}  dense {:8.4f} ms {:6.1f} TF/s | sparse {:8.4f} ms {:6.1f} TF/s  "
                   "{:.2f}x\n",
                   fwd ? "forward" : "input grad", M, N, K, dense, flops / (dense * 1e9), sparse,
                   flops / (sparse * 1e9), dense / sparse);
      }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"2:4 sparse GEMM on wgmma.mma_async.sp: layout probe, check vs cuBLASLt, timing"};
  bool probe = false, check = false, time = false;
  int reps = 20;
  std::vector<int64_t> tokens{16384, 65536};
  app.add_flag("--probe", probe, "exact one-tile probes of the format, the metadata and the kernel");
  app.add_flag("--check", check, "random inputs at the target shapes vs cuBLASLt");
  app.add_flag("--time", time, "dense vs sparse timing at the target shapes");
  app.add_option("--reps", reps, "timed calls per measurement")->check(CLI::PositiveNumber);
  app.add_option("--tokens", tokens, "token counts M for --time")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  if (!probe && !check && !time) probe = check = time = true;

  if (pt::cuda_device_count() == 0) {
    fmt::print("bench_sparse_gemm_lab: no CUDA GPU\n");
    return 1;
  }
  if (!pt::ops::cuda::wgmma_sparse_gemm_available()) {
    fmt::print("bench_sparse_gemm_lab: no sm_90a kernel for this GPU ({})\n", pt::cuda_device_name(0));
    return 1;
  }
  bool ok = true;
  if (probe) {
    ok = run_probe() && ok;
    fmt::print("{}\n", ok ? "probe: all ok" : "probe: LAYOUT ERRORS (see above)");
  }
  if (check) {
    const bool passed = run_check();
    fmt::print("{}\n", passed ? "check: all ok" : "check: FAILED");
    ok = passed && ok;
  }
  if (time) run_time(tokens, reps);
  return ok ? 0 : 1;
}
