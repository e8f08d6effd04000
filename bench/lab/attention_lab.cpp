// Kernel lab harness: checks the sm_90a wgmma attention forward (bench/lab/attention_wgmma.cu) against the
// production pt::ops::attention_forward on the same random bf16 inputs, then times both.
//
// Batches: SFT-like lengths (~32k tokens, lognormal, median 330, max 2048, as bench_attention), one 8k
// sequence ("8k"), and two small edge mixes (1-token examples, lengths around multiples of 64 and 128; a
// batch with pads through valid_lens). Shapes: H12 D64, H16 D128, H16 Hkv4 D128 (GQA). Check: the lab's out
// and lse are poisoned with NaN first; the error printed is max |lab - production| over max |production| per
// tensor; above 1e-2 or any NaN fails the exit code, and the first element beyond the tolerance is named
// (token, its segment and position, head, column) to localise a bug. Timing: CUDA events around `reps`
// back-to-back calls after one warm-up; the production op runs with segments_checked (no host sync per call).
// FLOPs: 4 D H sum_i L_i (L_i + 1) / 2 (QK^T and PV over the causal pairs). "lab/prod" is production time
// over lab time (above 1: the lab kernel is faster). A CUDA error (a fault inside the lab kernel) ends the
// run with its message and exit code 1; run one batch under compute-sanitizer with --mix NAME.
// --probe runs only the layout probe (lab_layout_probe): S = Q K^T and O = P V of one tile, D 64 and 128, on
// an "identity" set (Q and P the identity, K[n][c] and V[n][c] = 16 (n % 16) + c % 16, so that a wrong value
// names the row and column it came from, mod 16) and a random set (integers in [-3, 3]: a transposed or
// mirrored operand that the identity hides), all exact in bf16 and f32; per product it prints the wrong
// count, a map of 8 x 8 blocks (X: some element wrong) and the first wrong elements. Usage:
// bench_attention_lab [--tokens 32768] [--reps 20] [--check-only] [--mix edge|pads|sft-like|8k] [--probe]
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../gpu_bench.h"
#include "attention_wgmma.h"
#include "core/device.h"
#include "core/device_buffer.h"
#include "core/error.h"
#include "core/float16.h"
#include "ops/attention.h"

namespace {

using namespace pt;

constexpr double kTolerance = 1e-2;

void cuda_check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail("{} failed: {} ({})", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

struct Mix {
  std::string name;
  std::vector<int32_t> lengths;
  std::vector<int32_t> valid;  // empty: every token real
  bool timed;
};

struct Shape {
  int H, Hkv, D;
};

DeviceBuffer upload_random_bf16(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& x : v) x = float_to_bf16(dist(rng));
  DeviceBuffer b(v.size() * sizeof(uint16_t));
  b.upload(v.data(), v.size() * sizeof(uint16_t));
  return b;
}

DeviceBuffer upload_ints(const std::vector<int32_t>& v) {
  DeviceBuffer b(v.size() * sizeof(int32_t));
  b.upload(v.data(), v.size() * sizeof(int32_t));
  return b;
}

std::vector<float> download_bf16(const DeviceBuffer& b) {
  std::vector<uint16_t> raw(b.bytes() / 2);
  b.download(raw.data(), b.bytes());
  std::vector<float> out(raw.size());
  std::transform(raw.begin(), raw.end(), out.begin(), bf16_to_float);
  return out;
}

std::vector<float> download_f32(const DeviceBuffer& b) {
  std::vector<float> out(b.bytes() / 4);
  b.download(out.data(), b.bytes());
  return out;
}

struct Comparison {
  double rel = 0;      // max |lab - ref| / max |ref|
  int64_t nans = 0;    // NaN in lab
  int64_t first = -1;  // first element index beyond the tolerance (or NaN), -1 when none
  double first_lab = 0, first_ref = 0;
};

Comparison compare(const std::vector<float>& lab, const std::vector<float>& ref) {
  Comparison c;
  double ref_max = 0, diff_max = 0;
  for (float r : ref) ref_max = std::max(ref_max, std::fabs(double(r)));
  const double scale = std::max(ref_max, 1e-20);
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(double(lab[i]) - double(ref[i]));
    const bool nan = std::isnan(lab[i]);
    c.nans += nan;
    if (!nan) diff_max = std::max(diff_max, d);
    if (c.first < 0 && (nan || d > kTolerance * scale)) {
      c.first = static_cast<int64_t>(i);
      c.first_lab = lab[i];
      c.first_ref = ref[i];
    }
  }
  c.rel = diff_max / scale;
  return c;
}

// "token 1234 (segment 7, position 90 of 300) head 3 col 17" for out [T,H,D]; lse [H,T] has no column.
std::string locate(int64_t index, bool is_lse, const std::vector<int32_t>& cu, const Shape& s, int64_t T) {
  int64_t token, head, col = -1;
  if (is_lse) {
    head = index / T;
    token = index % T;
  } else {
    token = index / (int64_t{s.H} * s.D);
    head = index / s.D % s.H;
    col = index % s.D;
  }
  const auto seg = std::upper_bound(cu.begin(), cu.end(), token) - cu.begin() - 1;
  std::string where = fmt::format("token {} (segment {}, position {} of {}) head {}", token, seg,
                                  token - cu[seg], cu[seg + 1] - cu[seg], head);
  if (col >= 0) where += fmt::format(" col {}", col);
  return where;
}

// One product of the layout probe: got and want are row-major [rows, cols]. With identity inputs a value
// v = 16 a + b is the element [row = a, column = b] (mod 16) of the B operand (`operand`: K or V), so a wrong
// value names the element that was read instead: for S = Q K^T the wanted one is K[n][m % D] (n the S column,
// m the S row), for O = P V it is V[m][c].
bool report_probe(const char* what, const char* operand, const std::vector<float>& got,
                  const std::vector<float>& want, int rows, int cols, bool identity) {
  int wrong = 0;
  std::vector<std::string> map(static_cast<size_t>(rows / 8),
                               std::string(static_cast<size_t>(cols / 8), '.'));
  std::vector<std::string> first;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const float g = got[static_cast<size_t>(r * cols + c)], w = want[static_cast<size_t>(r * cols + c)];
      if (g == w) continue;
      ++wrong;
      map[static_cast<size_t>(r / 8)][static_cast<size_t>(c / 8)] = 'X';
      if (first.size() < 6) {
        std::string line = fmt::format("      [{:3}][{:3}] got {} want {}", r, c, g, w);
        if (identity && g >= 0 && g < 256 && g == std::floor(g))
          line += fmt::format(" (read {}[{} mod 16][{} mod 16], wanted {}[{} mod 16][{} mod 16])", operand,
                              int(g) / 16, int(g) % 16, operand, int(w) / 16, int(w) % 16);
        first.push_back(line);
      }
    }
  fmt::print("  {:<34} {}\n", what,
             wrong == 0 ? std::string("ok") : fmt::format("{} of {} wrong", wrong, rows * cols));
  if (wrong == 0) return true;
  fmt::print("    rows/8 x cols/8 blocks (X: wrong):\n");
  for (const std::string& line : map) fmt::print("      {}\n", line);
  for (const std::string& line : first) fmt::print("{}\n", line);
  return false;
}

DeviceBuffer upload_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> raw(v.size());
  std::transform(v.begin(), v.end(), raw.begin(), float_to_bf16);
  DeviceBuffer b(raw.size() * sizeof(uint16_t));
  b.upload(raw.data(), raw.size() * sizeof(uint16_t));
  return b;
}

// The layout probe for one head dim and one input set; returns false when a product is wrong.
bool run_probe(int D, bool identity) {
  constexpr int kRows = 128;  // query rows = keys = the tile
  std::vector<float> q(static_cast<size_t>(kRows * D)), k(q.size()), v(q.size()),
      p(static_cast<size_t>(kRows * kRows));
  std::mt19937 rng(static_cast<uint32_t>(D) + 7);
  std::uniform_int_distribution<int> small(-3, 3);
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < D; ++c) {
      const size_t i = static_cast<size_t>(r * D + c);
      q[i] = identity ? float(c == r % D) : float(small(rng));
      k[i] = identity ? float(16 * (r % 16) + c % 16) : float(small(rng));
      v[i] = identity ? float(16 * (r % 16) + c % 16) : float(small(rng));
    }
    for (int c = 0; c < kRows; ++c)
      p[static_cast<size_t>(r * kRows + c)] = identity ? float(c == r) : float(small(rng));
  }
  std::vector<float> s_want(static_cast<size_t>(kRows * kRows)), o_want(q.size());
  for (int r = 0; r < kRows; ++r) {
    for (int n = 0; n < kRows; ++n) {
      double acc = 0;
      for (int c = 0; c < D; ++c)
        acc += double(q[static_cast<size_t>(r * D + c)]) * k[static_cast<size_t>(n * D + c)];
      s_want[static_cast<size_t>(r * kRows + n)] = static_cast<float>(acc);
    }
    for (int c = 0; c < D; ++c) {
      double acc = 0;
      for (int n = 0; n < kRows; ++n)
        acc += double(p[static_cast<size_t>(r * kRows + n)]) * v[static_cast<size_t>(n * D + c)];
      o_want[static_cast<size_t>(r * D + c)] = static_cast<float>(acc);
    }
  }
  DeviceBuffer dq = upload_bf16(q), dk = upload_bf16(k), dv = upload_bf16(v), dp = upload_bf16(p);
  DeviceBuffer ds(s_want.size() * 4), dout(o_want.size() * 4);
  cuda_check(cudaMemset(ds.data(), 0xFF, ds.bytes()), "poisoning s");
  cuda_check(cudaMemset(dout.data(), 0xFF, dout.bytes()), "poisoning o");
  const std::string status =
      lab::lab_layout_probe(D, dq.data(), dk.data(), dv.data(), dp.data(), static_cast<float*>(ds.data()),
                            static_cast<float*>(dout.data()));
  fmt::print("probe D={} {} inputs\n", D, identity ? "identity" : "random");
  if (!status.empty()) {
    fmt::print("  FAILED: {}\n", status);
    return false;
  }
  const bool s_ok =
      report_probe("S = Q K^T (desc_k_major, ss)", "K", download_f32(ds), s_want, kRows, kRows, identity);
  const bool o_ok =
      report_probe("O = P V (registers A, desc_v)", "V", download_f32(dout), o_want, kRows, D, identity);
  return s_ok && o_ok;
}

float time_ms(const std::function<void()>& fn, int reps) {
  fn();  // warm-up: first launches, scratch growth
  cudaEvent_t e0, e1;
  cuda_check(cudaEventCreate(&e0), "cudaEventCreate");
  cuda_check(cudaEventCreate(&e1), "cudaEventCreate");
  cuda_check(cudaDeviceSynchronize(), "warm-up call");
  cuda_check(cudaEventRecord(e0), "cudaEventRecord");
  for (int i = 0; i < reps; ++i) fn();
  cuda_check(cudaEventRecord(e1), "cudaEventRecord");
  cuda_check(cudaEventSynchronize(e1), "timed calls");
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms / static_cast<float>(reps);
}

// Checks (and times, for timed mixes) one batch and shape; returns false when the lab kernel is wrong.
bool run(const Mix& mix, const Shape& s, int reps, bool check_only) {
  std::vector<int32_t> cu(mix.lengths.size() + 1, 0);
  std::partial_sum(mix.lengths.begin(), mix.lengths.end(), cu.begin() + 1);
  const int64_t T = cu.back(), S = static_cast<int64_t>(mix.lengths.size());
  const int64_t q_elems = T * s.H * s.D, kv_elems = T * s.Hkv * s.D;
  DeviceBuffer q = upload_random_bf16(q_elems, 1), k = upload_random_bf16(kv_elems, 2),
               v = upload_random_bf16(kv_elems, 3), dcu = upload_ints(cu);
  DeviceBuffer dvalid = mix.valid.empty() ? DeviceBuffer() : upload_ints(mix.valid);
  DeviceBuffer out_ref(static_cast<size_t>(q_elems) * 2), out_lab(static_cast<size_t>(q_elems) * 2),
      lse_ref(static_cast<size_t>(T * s.H) * 4), lse_lab(static_cast<size_t>(T * s.H) * 4),
      scratch(lab::lab_scratch_bytes(static_cast<int>(T), static_cast<int>(S)));

  const int64_t H = s.H, Hkv = s.Hkv, D = s.D;
  ops::AttentionParams p{q.view(DType::bf16, {T, H, D}),
                         k.view(DType::bf16, {T, Hkv, D}),
                         v.view(DType::bf16, {T, Hkv, D}),
                         dcu.view(DType::i32, {S + 1}),
                         mix.valid.empty() ? Tensor() : dvalid.view(DType::i32, {S}),
                         out_ref.view(DType::bf16, {T, H, D}),
                         lse_ref.view(DType::f32, {H, T}),
                         0,
                         true};
  lab::LabAttention l;
  l.q = q.data();
  l.k = k.data();
  l.v = v.data();
  l.out = out_lab.data();
  l.lse = static_cast<float*>(lse_lab.data());
  l.cu_seqlens = static_cast<const int32_t*>(dcu.data());
  l.valid_lens = mix.valid.empty() ? nullptr : static_cast<const int32_t*>(dvalid.data());
  l.segments = static_cast<int>(S);
  l.T = static_cast<int>(T);
  l.H = s.H;
  l.Hkv = s.Hkv;
  l.D = s.D;

  ops::attention_forward(p);
  // All bytes 0xFF: bf16 0xFFFF and f32 0xFFFFFFFF are NaN, so anything the lab kernel leaves unwritten
  // shows.
  cuda_check(cudaMemset(out_lab.data(), 0xFF, out_lab.bytes()), "poisoning out");
  cuda_check(cudaMemset(lse_lab.data(), 0xFF, lse_lab.bytes()), "poisoning lse");
  lab::lab_attention_forward(l, scratch.data(), nullptr);
  const std::string status = lab::lab_status(scratch.data(), l.T, l.segments, nullptr);
  const std::string shape = fmt::format("T={} S={} H={} Hkv={} D={}", T, S, s.H, s.Hkv, s.D);
  if (!status.empty()) {
    fmt::print("{:<10} {:<34} FAILED: {}\n", mix.name, shape, status);
    return false;
  }
  const Comparison out_cmp = compare(download_bf16(out_lab), download_bf16(out_ref));
  const Comparison lse_cmp = compare(download_f32(lse_lab), download_f32(lse_ref));
  const bool ok = out_cmp.first < 0 && lse_cmp.first < 0 && out_cmp.nans == 0 && lse_cmp.nans == 0;
  fmt::print("{:<10} {:<34} {:>10.2e} {:>10.2e} {:>6} {:>6} {:>5}", mix.name, shape, out_cmp.rel, lse_cmp.rel,
             out_cmp.nans, lse_cmp.nans, ok ? "ok" : "FAIL");
  if (mix.timed && !check_only && ok) {
    double pairs = 0;  // causal (query, key) pairs per head over the real tokens
    for (size_t i = 0; i < mix.lengths.size(); ++i) {
      const double L = mix.valid.empty() ? mix.lengths[i] : mix.valid[i];
      pairs += 0.5 * L * (L + 1);
    }
    const double flops = 4.0 * s.D * s.H * pairs;
    const float prod = time_ms([&] { ops::attention_forward(p); }, reps);
    const float labt = time_ms([&] { lab::lab_attention_forward(l, scratch.data(), nullptr); }, reps);
    fmt::print(" {:>9.3f} {:>8.1f} {:>9.3f} {:>8.1f} {:>8.2f}x", prod, flops / prod / 1e9, labt,
               flops / labt / 1e9, prod / labt);
  }
  fmt::print("\n");
  for (const auto& [name, cmp, is_lse] :
       {std::tuple{"out", out_cmp, false}, std::tuple{"lse", lse_cmp, true}})
    if (cmp.first >= 0)
      fmt::print("    first bad {}: {} lab {} production {}\n", name, locate(cmp.first, is_lse, cu, s, T),
                 cmp.first_lab, cmp.first_ref);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("wgmma attention forward lab: correctness against the production kernel, then timing");
  int64_t tokens = 32768;
  int reps = 20;
  bool check_only = false;
  app.add_option("--tokens", tokens, "tokens of the SFT-like batch")->check(CLI::Range(64, 1 << 22));
  app.add_option("--reps", reps, "timed calls per measurement")->check(CLI::Range(1, 1000));
  app.add_flag("--check-only", check_only, "compare only, no timing");
  bool probe = false;
  app.add_flag("--probe", probe, "run only the wgmma layout probe (one tile, exact integer inputs)");
  std::string only;
  app.add_option("--mix", only, "run only this batch")
      ->check(CLI::IsMember({"edge", "pads", "sft-like", "8k"}));
  CLI11_PARSE(app, argc, argv);
  if (cuda_device_count() == 0) {
    fmt::print("bench_attention_lab: no CUDA GPU; nothing to check or measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  fmt::print("device: {} (sm_{}{})\n", prop.name, prop.major, prop.minor);
  if (prop.major != 9 || prop.minor != 0) {
    fmt::print("bench_attention_lab: the lab kernel needs sm_90a (H100/H200); nothing to check here\n");
    return 0;
  }
  if (probe) {
    bool probe_ok = true;
    try {
      for (int D : {64, 128})
        for (bool identity : {true, false}) probe_ok = run_probe(D, identity) && probe_ok;
    } catch (const Error& e) {
      fmt::print("\nbench_attention_lab: {}\n", e.what());
      return 1;
    }
    fmt::print("{}\n", probe_ok ? "layout probe passed" : "LAYOUT PROBE FAILED");
    return probe_ok ? 0 : 1;
  }
  const std::vector<Mix> mixes = {
      {"edge", {1, 1, 63, 64, 65, 127, 128, 129, 1, 255, 256, 257, 300, 1, 2, 3, 500, 7, 383}, {}, false},
      {"pads", {300, 129, 64, 1, 200, 7}, {250, 1, 64, 0, 130, 7}, false},
      {"sft-like", bench::sft_batch(tokens), {}, true},
      {"8k", {8192}, {}, true},
  };
  const std::vector<Shape> shapes = {{12, 12, 64}, {16, 16, 128}, {16, 4, 128}};
  fmt::print("error = max|lab - production| / max|production| (fails above {:.0e} or on NaN)\n", kTolerance);
  fmt::print("{:<10} {:<34} {:>10} {:>10} {:>6} {:>6} {:>5} {:>9} {:>8} {:>9} {:>8} {:>9}\n", "batch",
             "shape", "out err", "lse err", "NaN o", "NaN l", "check", "prod ms", "TFLOP/s", "lab ms",
             "TFLOP/s", "lab/prod");
  bool ok = true;
  try {
    for (const Mix& mix : mixes)
      if (only.empty() || mix.name == only)
        for (const Shape& s : shapes) ok = run(mix, s, reps, check_only) && ok;
  } catch (const Error& e) {  // a CUDA error is sticky: nothing after it would run
    fmt::print("\nbench_attention_lab: {}\n", e.what());
    return 1;
  }
  fmt::print("{}\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
