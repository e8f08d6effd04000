// Throughput of the CPU reference backend's heavy ops on shapes of a ~110M-parameter Llama (hidden 768,
// 12 heads of 64, FFN 2048, vocab 32000): linear layers through BLAS and varlen causal attention.
// Usage: bench_cpu_ops [--tokens 2048] [--threads N]
#include "core/parallel.h"
#include "ops/attention.h"
#include "ops/cpu/threads.h"
#include "ops/linear.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace pt;
using namespace pt::ops;

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Best of a few runs, in seconds (the first run also warms caches and BLAS threads).
double best_seconds(const std::function<void()>& fn, int runs = 3) {
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void row(const std::string& op, const std::string& shape, double fwd_flops, double fwd_s, double bwd_flops,
         double bwd_s) {
  fmt::print("{:<16} {:<34} {:>9.2f} {:>9.1f} {:>9.2f} {:>9.1f}\n", op, shape, fwd_s * 1e3,
             fwd_flops / fwd_s / 1e9, bwd_s * 1e3, bwd_flops / bwd_s / 1e9);
}

void bench_linear(const std::string& name, int64_t M, int64_t N, int64_t K) {
  std::vector<float> x = random_floats(M * K, 1), w = random_floats(N * K, 2), y(M * N),
                     dy = random_floats(M * N, 3);
  std::vector<float> dx(M * K), dw(N * K);
  Tensor tx = Tensor::of(x.data(), {M, K}), tw = Tensor::of(w.data(), {N, K}),
         ty = Tensor::of(y.data(), {M, N});
  Tensor tdy = Tensor::of(dy.data(), {M, N}), tdx = Tensor::of(dx.data(), {M, K}),
         tdw = Tensor::of(dw.data(), {N, K});
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const double fwd = best_seconds([&] { linear_forward(tx, tw, ty); });
  const double bwd =
      best_seconds([&] { linear_backward(tdy, tx, tw, tdx, Write::overwrite, tdw, Write::accumulate); });
  row(name, fmt::format("[{},{}] x [{},{}]^T", M, K, N, K), flops, fwd, 2 * flops, bwd);
}

void bench_attention(const std::string& name, const std::vector<int32_t>& lengths, int64_t H, int64_t Hkv,
                     int64_t D) {
  std::vector<int32_t> cu(lengths.size() + 1, 0);
  std::partial_sum(lengths.begin(), lengths.end(), cu.begin() + 1);
  const int64_t T = cu.back(), S = static_cast<int64_t>(lengths.size());
  std::vector<float> q = random_floats(T * H * D, 4), k = random_floats(T * Hkv * D, 5),
                     v = random_floats(T * Hkv * D, 6);
  std::vector<float> out(q.size()), lse(H * T), dout = random_floats(T * H * D, 7), dq(q.size()),
                                                dk(k.size()), dv(v.size());
  AttentionParams p{Tensor::of(q.data(), {T, H, D}),
                    Tensor::of(k.data(), {T, Hkv, D}),
                    Tensor::of(v.data(), {T, Hkv, D}),
                    Tensor::of(cu.data(), {S + 1}),
                    Tensor(),
                    Tensor::of(out.data(), {T, H, D}),
                    Tensor::of(lse.data(), {H, T}),
                    0};
  AttentionGrads g{Tensor::of(dout.data(), {T, H, D}), Tensor::of(dq.data(), {T, H, D}),
                   Tensor::of(dk.data(), {T, Hkv, D}), Tensor::of(dv.data(), {T, Hkv, D})};
  double pairs = 0;  // causal (query, key) pairs per head
  for (int32_t L : lengths) pairs += 0.5 * double(L) * double(L + 1);
  // Forward: QK^T and PV, 2D flops each per pair. Backward: QK^T again, dO V^T, dQ, dK, dV.
  const double fwd_flops = pairs * double(H) * 4.0 * double(D),
               bwd_flops = pairs * double(H) * 10.0 * double(D);
  const double fwd = best_seconds([&] { attention_forward(p); }, 2);
  const double bwd = best_seconds([&] { attention_backward(p, g); }, 2);
  row(name, fmt::format("T={} S={} H={} Hkv={} D={}", T, S, H, Hkv, D), fwd_flops, fwd, bwd_flops, bwd);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("CPU op throughput on 110M-Llama shapes");
  int64_t tokens = 2048;
  int threads = 0;
  app.add_option("--tokens", tokens, "tokens per batch (T)")->check(CLI::Range(64, 1 << 20));
  app.add_option("--threads", threads, "CPU threads for the attention kernels (0: all)");
  CLI11_PARSE(app, argc, argv);
  set_cpu_threads(threads);

  const int64_t C = 768, F = 2048, V = 32000, H = 12, D = 64;
  fmt::print("threads: {} (attention), BLAS decides its own\n", cpu_threads());
  fmt::print("{:<16} {:<34} {:>9} {:>9} {:>9} {:>9}\n", "op", "shape", "fwd ms", "GFLOP/s", "bwd ms",
             "GFLOP/s");
  bench_linear("linear qkv", tokens, 3 * C, C);
  bench_linear("linear o", tokens, C, C);
  bench_linear("linear gate_up", tokens, 2 * F, C);
  bench_linear("linear down", tokens, C, F);
  bench_linear("linear lm_head", tokens / 4, V, C);
  const int32_t L = static_cast<int32_t>(tokens);
  bench_attention("attn 1 segment", {L}, H, H, D);
  bench_attention("attn 4 segments", {L / 4, L / 4, L / 4, L - 3 * (L / 4)}, H, H, D);
  bench_attention("attn mixed", {L / 2, L / 4, L / 8, L - L / 2 - L / 4 - L / 8}, H, H, D);
  bench_attention("attn GQA 12/4", {L / 2, L / 4, L / 8, L - L / 2 - L / 4 - L / 8}, H, 4, D);
  return 0;
}
