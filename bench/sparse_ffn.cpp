// 2:4 sparse FFN training (Hu et al., ICML 2024) on cuSPARSELt against dense cuBLASLt, on Llama FFN
// shapes d/ff (gate_up weight [2F,C], down weight [C,F]) and M tokens per micro-batch:
//  (a) each GEMM of each linear: forward y = x W^T, input grad dx = dy W, weight grad dw = g^T x (g 2:4
//      along tokens; compressing g is part of it; dw f32 as in training, and bf16; and dw from the unpruned
//      dy with MVUE24 pruning inside the packing or as a pass before it, against dense dw from dy), dense
//      vs the sparse kernel in each cuSPARSELt arrangement (the 2:4 operand as its A or its B) and our wgmma
//      kernel (forward and input grad; it leaves dw dense), forced;
//  (b) the FFN block forward + backward (gate_up, swiglu, down, and the dx and dw GEMMs of both linears,
//      compressing both weights once per step as after an optimizer update): dense vs SparseLinear with
//      the autotuner (MVUE only for a dw the autotuner runs sparse, exact dw elsewhere, as --sparse-dw
//      auto trains), with cuSPARSELt forced (MVUE pruning of dy and dh, sparse dw), and with our wgmma
//      kernel (exact dense dw, as --sparse-dw auto trains in that mode).
// Times are means over --iters calls after a warm-up call (which also runs cuSPARSELt's kernel search);
// in (b) the variants are measured in turn, --rounds times, and the median kept. TFLOP/s counts the
// dense-equivalent 2MNK per GEMM; "x" is dense time / this time (> 1: faster).
// Usage: bench_sparse_ffn [--dims 768x2048,2048x8192,4096x14336] [--tokens 16384,32768,65536]
//   [--iters 10] [--rounds 3] [--skip-gemms] [--skip-block] [--block-modes auto,sparse,wgmma]
//   [--phases] [--packing] [--json FILE]
// --phases adds, per block, the mean time of each of its parts (CUDA events between them); --packing
// times (c), the passes over a weight gradient's g: MVUE24 and packing g^T, fused and apart, against a copy.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/device_buffer.h"
#include "core/float16.h"
#include "gpu_bench.h"
#include "ops/linear.h"
#include "ops/sparse24.h"
#include "ops/sparse_linear.h"
#include "ops/swiglu.h"
#ifdef PACKTRAIN_CUDA
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/cusparselt_pack.h"
#include "ops/cuda/sparse_gemm.h"
#include "ops/cuda/stream.h"
#endif

namespace {

using namespace pt;
using namespace pt::ops;

int iters = 10;
int rounds = 3;
bool phases = false;

#ifdef PACKTRAIN_CUDA

using cuda::SparseGemmMode;

std::ofstream json;

void record(nlohmann::json j) {
  if (json.is_open()) json << j.dump() << "\n" << std::flush;
}

double time_ms(const std::function<void()>& fn) { return bench::gpu_time_ms(fn, iters); }

double tflops(double flops, double ms) { return flops / (ms * 1e9); }

// A step split into named parts: mark(name) ends the part called name.
using Mark = std::function<void(const char*)>;
using Step = std::function<void(const Mark&)>;

double time_step_ms(const Step& step) {
  return time_ms([&] { step([](const char*) {}); });
}

// The mean milliseconds of each part of `step` over --iters runs after a warm-up, from CUDA events
// recorded on the current stream between the parts, as "name ms" pairs in the step's order.
std::string time_parts(const Step& step) {
  step([](const char*) {});
  std::vector<cudaEvent_t> events;
  std::vector<const char*> names;
  std::vector<double> ms;
  const auto event = [&](size_t i) {
    if (i == events.size()) PT_CUDA_CHECK(cudaEventCreate(&events.emplace_back()));
    PT_CUDA_CHECK(cudaEventRecord(events[i], cuda::current_stream()));
  };
  for (int it = 0; it < iters; ++it) {
    size_t part = 0;
    event(0);
    step([&](const char* name) {
      event(++part);
      if (it == 0) names.push_back(name), ms.push_back(0.0);
    });
    PT_CUDA_CHECK(cudaEventSynchronize(events[part]));
    for (size_t i = 0; i < part; ++i) {
      float t = 0;
      PT_CUDA_CHECK(cudaEventElapsedTime(&t, events[i], events[i + 1]));
      ms[i] += static_cast<double>(t) / iters;
    }
  }
  for (cudaEvent_t e : events) PT_CUDA_CHECK(cudaEventDestroy(e));
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += fmt::format("{}{} {:.3f}", i ? ", " : "", names[i], ms[i]);
  return out;
}

using bench::Pool;

enum class Pattern { dense, transposable24, tokens24 };

// Random bf16 values in [-1,1) (zeros would flatter the tensor cores' power draw) in a tile of up to 256
// rows repeated down the [R,C] tensor. transposable24: every 4x4 block keeps 2 per row and column (a
// pruned weight); tokens24: each column keeps 2 of every 4 rows (an MVUE-pruned gradient).
void fill(const Tensor& t, Pattern pattern, uint64_t seed) {
  const int64_t R = t.shape[0], C = t.shape[1], tile = std::min<int64_t>(R, 256);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> host(static_cast<size_t>(tile * C));
  for (uint16_t& v : host) v = float_to_bf16(dist(rng));
  auto zero = [&](int64_t r, int64_t c) { host[static_cast<size_t>(r * C + c)] = 0; };
  for (int64_t r0 = 0; r0 + 4 <= tile && pattern != Pattern::dense; r0 += 4) {
    if (pattern == Pattern::tokens24) {
      for (int64_t c = 0; c < C; ++c) {
        std::array<int64_t, 4> slots{0, 1, 2, 3};
        std::shuffle(slots.begin(), slots.end(), rng);
        zero(r0 + slots[2], c), zero(r0 + slots[3], c);
      }
      continue;
    }
    for (int64_t c0 = 0; c0 + 4 <= C; c0 += 4) {
      std::array<int64_t, 4> s{0, 1, 2, 3}, u{0, 1, 2, 3};
      std::shuffle(s.begin(), s.end(), rng);
      do std::shuffle(u.begin(), u.end(), rng);
      while (s[0] == u[0] || s[1] == u[1] || s[2] == u[2] || s[3] == u[3]);
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < 4; ++c)
          if (c != s[static_cast<size_t>(r)] && c != u[static_cast<size_t>(r)]) zero(r0 + r, c0 + c);
    }
  }
  const auto row_bytes = static_cast<size_t>(C * 2);
  copy_bytes(t.data, true, host.data(), false, static_cast<size_t>(tile) * row_bytes);
  for (int64_t done = tile; done < R;) {
    const int64_t n = std::min(done, R - done);
    copy_bytes(static_cast<char*>(t.data) + static_cast<size_t>(done) * row_bytes, true, t.data, true,
               static_cast<size_t>(n) * row_bytes);
    done += n;
  }
}

// "" when ops::mvue24 runs on cuda, else why not.
std::string mvue_unavailable() {
  Pool pool;
  const Tensor g = pool.make(DType::bf16, {8, 16}), out = pool.make(DType::bf16, {8, 16});
  try {
    mvue24(g, 1, out);
    cuda_synchronize();
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

struct Dims {
  int64_t C, F;
};

// (a): the three GEMMs of one linear W[N,K] at M tokens.
void bench_gemms(const Dims& d, const char* linear, int64_t N, int64_t K, int64_t M) {
  Pool pool;
  const DType bf = DType::bf16;
  const Tensor x = pool.make(bf, {M, K}), w = pool.make(bf, {N, K}), y = pool.make(bf, {M, N});
  const Tensor dy = pool.make(bf, {M, N}), g = pool.make(bf, {M, N}), dx = pool.make(bf, {M, K});
  const Tensor dw32 = pool.make(DType::f32, {N, K}), dw16 = pool.make(bf, {N, K});
  fill(x, Pattern::dense, 1), fill(w, Pattern::transposable24, 2), fill(dy, Pattern::dense, 3);
  fill(g, Pattern::tokens24, 4);
  cuda::SparseWeight weight(w);
  const double flops = 2.0 * double(M) * double(N) * double(K);

  struct Gemm {
    const char* name;
    std::function<void()> dense, sparse;
  };
  const std::string label = linear;
  const std::vector<Gemm> gemms = {
      {"fwd", [&] { linear_forward(x, w, y, Write::overwrite); },
       [&] { cuda::sparse_linear_forward(x, weight, y, Write::overwrite, label); }},
      {"dx", [&] { linear_backward(dy, x, w, dx, Write::overwrite, Tensor(), Write::overwrite); },
       [&] { cuda::sparse_linear_input_grad(dy, weight, dx, Write::overwrite, label); }},
      {"dw->f32", [&] { linear_backward(g, x, w, Tensor(), Write::overwrite, dw32, Write::accumulate); },
       [&] { cuda::sparse_linear_weight_grad(g, x, dw32, Write::accumulate, label); }},
      {"dw->bf16", [&] { linear_backward(g, x, w, Tensor(), Write::overwrite, dw16, Write::accumulate); },
       [&] { cuda::sparse_linear_weight_grad(g, x, dw16, Write::accumulate, label); }},
      // As training runs it: dense dw from dy against MVUE24(dy) pruned on the way (into g where needed).
      {"dw+mvue->f32",
       [&] { linear_backward(dy, x, w, Tensor(), Write::overwrite, dw32, Write::accumulate); },
       [&] { cuda::sparse_linear_weight_grad_mvue(dy, 1, g, x, dw32, Write::accumulate, label); }},
      // The same in two passes: MVUE24 into g, then the weight gradient packs g.
      {"dw mvue,pack->f32",
       [&] { linear_backward(dy, x, w, Tensor(), Write::overwrite, dw32, Write::accumulate); },
       [&] {
         mvue24(dy, 1, g);
         cuda::sparse_linear_weight_grad(g, x, dw32, Write::accumulate, label);
       }},
  };
  for (const Gemm& gemm : gemms) {
    const double dense_ms = time_ms(gemm.dense);
    std::string row = fmt::format("{:>5}/{:<5} {:<7} {:<8} {:>6} | dense {:8.3f} ms {:6.1f} TF/s", d.C, d.F,
                                  linear, gemm.name, M, dense_ms, tflops(flops, dense_ms));
    nlohmann::json j = {{"part", "gemm"}, {"d", d.C}, {"ff", d.F}, {"linear", linear},    {"gemm", gemm.name},
                        {"M", M},         {"N", N},   {"K", K},    {"dense_ms", dense_ms}};
    for (SparseGemmMode mode : {SparseGemmMode::sparse_a, SparseGemmMode::sparse_b, SparseGemmMode::wgmma}) {
      cuda::set_sparse_gemm_mode(mode);
      const auto before = cuda::sparse_gemm_stats();
      const double ms = time_ms(gemm.sparse);
      const bool ran_sparse = cuda::sparse_gemm_stats().sparse_calls > before.sparse_calls;
      const std::string name = cuda::sparse_gemm_mode_name(mode);
      row += fmt::format(" | {} {:8.3f} ms {:6.1f} TF/s {:5.2f}x{}", name, ms, tflops(flops, ms),
                         dense_ms / ms, ran_sparse ? "" : " (ran dense)");
      j[name + "_ms"] = ms;
      j[name + "_speedup"] = dense_ms / ms;
      j[name + "_ran_sparse"] = ran_sparse;
    }
    fmt::print("{}\n", row);
    record(j);
  }
}

// (b): one FFN block step, forward and backward.
void bench_block(const Dims& d, int64_t M, const std::string& no_mvue,
                 const std::vector<SparseGemmMode>& modes) {
  Pool pool;
  const DType bf = DType::bf16, f32 = DType::f32;
  const int64_t C = d.C, F = d.F;
  const Tensor x = pool.make(bf, {M, C}), w_gu = pool.make(bf, {2 * F, C}), w_d = pool.make(bf, {C, F});
  const Tensor h = pool.make(bf, {M, 2 * F}), a = pool.make(bf, {M, F}), y = pool.make(bf, {M, C});
  const Tensor dy = pool.make(bf, {M, C}), dy_p = pool.make(bf, {M, C}), da = pool.make(bf, {M, F});
  const Tensor dh = pool.make(bf, {M, 2 * F}), dx = pool.make(bf, {M, C});
  const Tensor dw_gu = pool.make(f32, {2 * F, C}), dw_d = pool.make(f32, {C, F});
  fill(x, Pattern::dense, 5), fill(w_gu, Pattern::transposable24, 6), fill(w_d, Pattern::transposable24, 7);
  fill(dy, Pattern::dense, 8);
  // Without a cuda mvue24, dw runs on stand-in gradients that already have the 2:4 pattern.
  Tensor g_d, g_gu;
  if (!no_mvue.empty()) {
    g_d = pool.make(bf, {M, C}), g_gu = pool.make(bf, {M, 2 * F});
    fill(g_d, Pattern::tokens24, 9), fill(g_gu, Pattern::tokens24, 10);
  }
  const double flops = 18.0 * double(M) * double(C) * double(F);

  const Step dense_step = [&](const Mark& mark) {
    linear_forward(x, w_gu, h, Write::overwrite);
    mark("gate_up fwd");
    swiglu_forward(h, a);
    mark("swiglu fwd");
    linear_forward(a, w_d, y, Write::overwrite);
    mark("down fwd");
    linear_backward(dy, a, w_d, da, Write::overwrite, dw_d, Write::accumulate);
    mark("down bwd");
    swiglu_backward(da, h, dh);
    mark("swiglu bwd");
    linear_backward(dh, x, w_gu, dx, Write::overwrite, dw_gu, Write::accumulate);
    mark("gate_up bwd");
  };
  SparseLinear gate_up(w_gu, M, "mlp.gate_up_proj"), down(w_d, M, "mlp.down_proj");
  uint64_t seed = 0;
  bool mvue = true;
  const Step sparse_step = [&](const Mark& mark) {
    gate_up.refresh(), down.refresh();  // after an optimizer update: both weights compressed again
    gate_up.forward(x, h, Write::overwrite);
    mark("gate_up fwd");
    swiglu_forward(h, a);
    mark("swiglu fwd");
    down.forward(a, y, Write::overwrite);
    mark("down fwd");
    ++seed;
    if (!mvue) {
      down.backward(dy, a, da, Write::overwrite, dw_d, Write::accumulate, Tensor(), seed);
      mark("down bwd");
      swiglu_backward(da, h, dh);
      mark("swiglu bwd");
      gate_up.backward(dh, x, dx, Write::overwrite, dw_gu, Write::accumulate, Tensor(), seed);
    } else if (no_mvue.empty()) {  // as --sparse-dw auto: MVUE where the autotuner runs that dW sparse
      const bool mvue_d = down.weight_grad_sparse(M, f32), mvue_gu = gate_up.weight_grad_sparse(M, f32);
      down.backward(dy, a, da, Write::overwrite, dw_d, Write::accumulate, mvue_d ? dy_p : Tensor(), seed);
      mark("down bwd");
      // As the model: the SwiGLU backward prunes and packs dh for a sparse MVUE dW where it can.
      const bool packed = mvue_gu ? gate_up.activation_backward(Activation::swiglu, da, h, dh, seed, f32)
                                  : (swiglu_backward(da, h, dh), false);
      mark("swiglu bwd");
      gate_up.backward(dh, x, dx, Write::overwrite, dw_gu, Write::accumulate, mvue_gu ? dh : Tensor(), seed,
                       packed);
    } else {
      down.backward(dy, a, da, Write::overwrite, Tensor(), Write::accumulate, Tensor(), seed);
      cuda::sparse_linear_weight_grad(g_d, a, dw_d, Write::accumulate, "mlp.down_proj");
      mark("down bwd");
      swiglu_backward(da, h, dh);
      mark("swiglu bwd");
      gate_up.backward(dh, x, dx, Write::overwrite, Tensor(), Write::accumulate, Tensor(), seed);
      cuda::sparse_linear_weight_grad(g_gu, x, dw_gu, Write::accumulate, "mlp.gate_up_proj");
    }
    mark("gate_up bwd");
  };
  // Each variant warmed up (the autotuner decides there), then all timed in turn, round after round, and
  // the median round kept: a GPU whose clock drifts under load moves every variant alike.
  const auto use = [&](size_t v) -> const Step& {  // variant 0 is dense, v > 0 is modes[v - 1]
    if (v == 0) return dense_step;
    cuda::set_sparse_gemm_mode(modes[v - 1]);
    mvue = ops::sparse_weight_grad_gemm(Device::cuda);
    return sparse_step;
  };
  const size_t variants = modes.size() + 1;
  std::vector<std::vector<double>> rounds_ms(variants);
  for (size_t v = 0; v < variants; ++v) use(v)([](const char*) {});
  for (int round = 0; round < rounds; ++round)
    for (size_t v = 0; v < variants; ++v) rounds_ms[v].push_back(time_step_ms(use(v)));
  std::vector<double> ms;
  for (std::vector<double>& r : rounds_ms) std::sort(r.begin(), r.end()), ms.push_back(r[r.size() / 2]);

  const double dense_ms = ms[0];
  std::string row = fmt::format("{:>5}/{:<5} block {:>6} | dense {:8.3f} ms {:6.1f} TF/s", C, F, M, dense_ms,
                                tflops(flops, dense_ms));
  nlohmann::json j = {{"part", "block"},
                      {"d", C},
                      {"ff", F},
                      {"M", M},
                      {"mvue", no_mvue.empty()},
                      {"dense_ms", dense_ms},
                      {"rounds", rounds},
                      {"dense_rounds_ms", rounds_ms[0]}};
  std::vector<std::string> parts;  // --phases: each mode's parts, printed under the row
  for (size_t v = 1; v < variants; ++v) {
    const std::string name = cuda::sparse_gemm_mode_name(modes[v - 1]);
    row += fmt::format(" | {} {:8.3f} ms {:6.1f} TF/s {:5.2f}x", name, ms[v], tflops(flops, ms[v]),
                       dense_ms / ms[v]);
    j[name + "_ms"] = ms[v];
    j[name + "_speedup"] = dense_ms / ms[v];
    j[name + "_rounds_ms"] = rounds_ms[v];
    if (phases) parts.push_back(fmt::format("    {:<8} {}", name, time_parts(use(v))));
  }
  fmt::print("{}\n", row);
  if (phases) {
    fmt::print("    {:<8} {}\n", "dense", time_parts(dense_step));
    for (const std::string& p : parts) fmt::print("{}\n", p);
  }
  record(j);
}

// (c): the weight gradient's passes over g [M, N] (M tokens): MVUE24 pruning and packing g^T into
// cuSPARSELt's layout, fused and apart, against a device copy of g (the memory bound of a pass that reads g
// and writes as much); for gate_up's g also the SwiGLU backward that makes it, alone and with MVUE24 and
// the packing fused in. GB/s counts the bytes each pass reads and writes.
void bench_packing(int64_t N, int64_t M, bool gate_up) {
  Pool pool;
  const Tensor g = pool.make(DType::bf16, {M, N}), pruned = pool.make(DType::bf16, {M, N});
  const Tensor copy = pool.make(DType::bf16, {M, N}), dout = pool.make(DType::bf16, {M, N / 2});
  const int64_t packed_bytes = cuda::cusparselt_pack_bytes(N, M), g_bytes = M * N * 2;
  const Tensor packed = pool.make(DType::u8, {packed_bytes});
  fill(g, Pattern::dense, 11), fill(copy, Pattern::dense, 12), fill(dout, Pattern::dense, 13);
  cuda::mvue24(g, 1, pruned);
  struct Pass {
    const char* name;
    int64_t bytes;
    std::function<void()> run;
  };
  const Pass passes[] = {
      {"copy g", 2 * g_bytes,
       [&] {
         PT_CUDA_CHECK(cudaMemcpyAsync(copy.data, g.data, static_cast<size_t>(g_bytes),
                                       cudaMemcpyDeviceToDevice, cuda::current_stream()));
       }},
      {"mvue24 g", 2 * g_bytes, [&] { cuda::mvue24(g, 1, pruned); }},
      {"pack g^T (pruned)", g_bytes + packed_bytes,
       [&] { cuda::cusparselt_pack24(pruned.data, N, true, N, M, packed.data); }},
      {"mvue24 + pack g^T fused", g_bytes + packed_bytes,
       [&] { cuda::cusparselt_pack24_mvue(g.data, N, N, M, 1, packed.data); }},
      // The gate_up g from the SwiGLU backward (reads h [M, N] and dout [M, N/2], writes g): plain, and
      // fused with MVUE24 and the packing.
      {"swiglu bwd", g_bytes * 5 / 2, [&] { swiglu_backward(dout, copy, g); }},
      {"swiglu bwd + mvue24 + pack", g_bytes * 5 / 2 + packed_bytes,
       [&] { cuda::swiglu_backward_mvue_packed(dout, copy, g, 1, M, packed.data); }},
  };
  std::string row = fmt::format("g [{:>6}, {:>6}]", M, N);
  for (const Pass& p : passes) {
    if (!gate_up && std::string(p.name).starts_with("swiglu")) continue;
    const double ms = time_ms(p.run);
    row += fmt::format(" | {} {:.3f} ms {:5.0f} GB/s", p.name, ms, static_cast<double>(p.bytes) / (ms * 1e6));
    record({{"part", "packing"}, {"M", M}, {"N", N}, {"pass", p.name}, {"ms", ms}});
  }
  fmt::print("{}\n", row);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) parts.push_back(s.substr(start, i - start)), start = i + 1;
  return parts;
}

#endif  // PACKTRAIN_CUDA

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"2:4 sparse FFN GEMMs (cuSPARSELt, our wgmma kernel) against dense cuBLASLt"};
  std::string dims_arg = "768x2048,2048x8192,4096x14336", tokens_arg = "16384,32768,65536", json_path;
  std::string block_modes_arg = "auto,sparse,wgmma";
  bool skip_gemms = false, skip_block = false, packing = false;
  app.add_option("--dims", dims_arg, "comma-separated CxF (hidden x FFN) sizes, multiples of 16");
  app.add_option("--tokens", tokens_arg, "comma-separated token counts M per micro-batch");
  app.add_option("--iters", iters, "timed calls per measurement")->check(CLI::Range(1, 10000));
  app.add_option("--rounds", rounds, "(b): measurements of each variant, in turn; the median is kept")
      ->check(CLI::Range(1, 100));
  app.add_flag("--skip-gemms", skip_gemms, "skip (a), the single GEMMs");
  app.add_flag("--skip-block", skip_block, "skip (b), the FFN block");
  app.add_option("--block-modes", block_modes_arg, "comma-separated sparse GEMM modes of (b), beside dense");
  app.add_flag("--packing", packing, "also time (c), the MVUE24 and packing passes over g");
  app.add_flag("--phases", phases, "also time each part of the block (ms per part, CUDA events)");
  app.add_option("--json", json_path, "also write one JSON object per measurement to this file");
  CLI11_PARSE(app, argc, argv);
  if (cuda_device_count() == 0) {
    fmt::print("no CUDA device{}: nothing to benchmark\n", built_with_cuda() ? "" : " (CPU-only build)");
    return 0;
  }
#ifdef PACKTRAIN_CUDA
  std::vector<Dims> dims;
  std::vector<int64_t> tokens;
  std::vector<SparseGemmMode> block_modes;
  try {
    for (const std::string& s : split(block_modes_arg, ','))
      block_modes.push_back(cuda::parse_sparse_gemm_mode(s));
    for (const std::string& s : split(dims_arg, ',')) {
      const auto cf = split(s, 'x');
      if (cf.size() != 2) throw std::invalid_argument(s);
      dims.push_back({std::stoll(cf[0]), std::stoll(cf[1])});
    }
    for (const std::string& s : split(tokens_arg, ',')) tokens.push_back(std::stoll(s));
  } catch (const std::exception&) {
    fmt::print(stderr,
               "bad --dims '{}', --tokens '{}' or --block-modes '{}': expected e.g. 768x2048,2048x8192, "
               "16384,32768 and auto,sparse\n",
               dims_arg, tokens_arg, block_modes_arg);
    return 2;
  }
  if (!json_path.empty()) {
    json.open(json_path);
    if (!json) {
      fmt::print(stderr, "cannot write {}\n", json_path);
      return 2;
    }
  }
  const std::string no_mvue = mvue_unavailable();
  fmt::print("device: {}; cuSPARSELt {}; {} timed calls per measurement\n", cuda_device_name(0),
             cuda::sparse_gemm_available() ? "available" : "UNAVAILABLE (sparse rows run dense)", iters);
  if (!no_mvue.empty())
    fmt::print(
        "note: ops::mvue24 is not available on cuda ({}); the block's dw GEMMs use stand-in 2:4 "
        "gradients and its time leaves out MVUE pruning\n",
        no_mvue);
  const SparseGemmMode saved = cuda::sparse_gemm_mode();
  if (!skip_gemms) {
    fmt::print(
        "\n(a) single GEMMs: dense cuBLASLt vs cuSPARSELt forced (2:4 operand as its A / its B) vs our wgmma "
        "kernel\n");
    for (const Dims& d : dims)
      for (int64_t M : tokens) {
        bench_gemms(d, "gate_up", 2 * d.F, d.C, M);
        bench_gemms(d, "down", d.C, d.F, M);
      }
  }
  if (!skip_block) {
    fmt::print(
        "\n(b) FFN block forward + backward: dense vs SparseLinear (autotuned / cuSPARSELt forced / our "
        "wgmma "
        "kernel with dense dw), weight compression once per step included\n");
    for (const Dims& d : dims)
      for (int64_t M : tokens) bench_block(d, M, no_mvue, block_modes);
  }
  if (packing) {
    fmt::print("\n(c) passes over the weight gradient's g: MVUE24 and packing g^T, against a copy\n");
    for (const Dims& d : dims)
      for (int64_t M : tokens) {
        bench_packing(2 * d.F, M, true);
        bench_packing(d.C, M, false);
      }
  }
  cuda::set_sparse_gemm_mode(saved);
#endif
  return 0;
}
