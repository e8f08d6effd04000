// Throughput of the CUDA varlen causal attention (bf16, fp32 accumulation) on ~32k tokens of SFT-like
// lengths (lognormal, median 330, max 2048), on 32 rows of 1024 (GPT-2 as llm.c trains it) and on one 8k and
// one 32k sequence, at H12 D64 and H16 D128 (and
// GQA 4); and of the bidirectional attention (an encoder's, BERT-base's shape H12 D64 among them) on the
// SFT-like lengths.
// FLOPs counted: forward 4 D H sum_i L_i (L_i + 1) / 2 (QK^T and PV over the causal pairs, 2 flops per
// multiply-add; bidirectional, over the L_i^2 pairs); backward 2.5x forward (the usual convention: dQ, dK,
// dV and the recomputed QK^T, i.e. 5 products, as the backward computes them). Times are per call over
// back-to-back calls with one wait at the end, as the training step queues them (and as the torch peer is
// timed): the segment table is built here, valid by construction, so the calls skip the read-back of its
// device-side check, as the model's do.
// The calls run on the kernel ops/cuda/attention.h picks (wgmma on an H100/H200); --kernels mma,wgmma
// measures each, one row per kernel (the last column names it).
// Usage: bench_attention [--tokens 32768] [--reps 10] [--kernels auto] [--batches sft-like,...]
//                        [--lengths-out FILE]
// --lengths-out writes the SFT-like lengths (one per line) so bench/peers/attention_torch.py measures torch's
// FlashAttention-2 on exactly the same batch (bench/attention.sh runs both and prints the ratios).
#include "ops/attention.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/float16.h"
#include "gpu_bench.h"
#ifdef PACKTRAIN_CUDA
#include "ops/cuda/attention.h"
#endif

namespace {

using namespace pt;
using namespace pt::ops;

#ifdef PACKTRAIN_CUDA
// Selects the kernel by name ("auto", "mma", "wgmma") and returns the name for the table ("auto" resolved);
// throws pt::Error where it cannot run.
std::string use_kernel(const std::string& name) {
  using cuda::AttentionKernel;
  cuda::set_attention_kernel(name == "auto"  ? AttentionKernel::automatic
                             : name == "mma" ? AttentionKernel::mma
                                             : AttentionKernel::wgmma);
  return name == "auto" ? cuda::attention_kernel_name(cuda::attention_kernel()) : name;
}
#else
std::string use_kernel(const std::string&) { return "none"; }
#endif

void upload_random_bf16(const DeviceBuffer& dst, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (uint16_t& x : v) x = float_to_bf16(dist(rng));
  copy_bytes(dst.data(), true, v.data(), false, v.size() * sizeof(uint16_t));
}

// Prints the table's row for one batch and shape, run on `kernel` (use_kernel's name).
void measure(const std::string& kernel, const std::string& name, const std::vector<int32_t>& lengths,
             int64_t H, int64_t Hkv, int64_t D, int reps, bool causal = true) {
  std::vector<int32_t> cu(lengths.size() + 1, 0);
  std::partial_sum(lengths.begin(), lengths.end(), cu.begin() + 1);
  const int64_t T = cu.back(), S = static_cast<int64_t>(lengths.size());
  const size_t q_bytes = static_cast<size_t>(T * H * D) * 2, kv_bytes = static_cast<size_t>(T * Hkv * D) * 2;
  DeviceBuffer q(q_bytes), k(kv_bytes), v(kv_bytes), out(q_bytes), lse(static_cast<size_t>(H * T) * 4),
      dout(q_bytes), dq(q_bytes), dk(kv_bytes), dv(kv_bytes), dcu(cu.size() * 4);
  upload_random_bf16(q, T * H * D, 1);
  upload_random_bf16(k, T * Hkv * D, 2);
  upload_random_bf16(v, T * Hkv * D, 3);
  upload_random_bf16(dout, T * H * D, 4);
  copy_bytes(dcu.data(), true, cu.data(), false, cu.size() * 4);
  const Device gpu = Device::cuda;
  AttentionParams p{Tensor(q.data(), DType::bf16, {T, H, D}, gpu),
                    Tensor(k.data(), DType::bf16, {T, Hkv, D}, gpu),
                    Tensor(v.data(), DType::bf16, {T, Hkv, D}, gpu),
                    Tensor(dcu.data(), DType::i32, {S + 1}, gpu),
                    Tensor(),
                    Tensor(out.data(), DType::bf16, {T, H, D}, gpu),
                    Tensor(lse.data(), DType::f32, {H, T}, gpu),
                    0,
                    /*segments_checked=*/true};
  p.causal = causal;
  AttentionGrads g{
      Tensor(dout.data(), DType::bf16, {T, H, D}, gpu), Tensor(dq.data(), DType::bf16, {T, H, D}, gpu),
      Tensor(dk.data(), DType::bf16, {T, Hkv, D}, gpu), Tensor(dv.data(), DType::bf16, {T, Hkv, D}, gpu)};

  double pairs = 0;  // attended (query, key) pairs per head
  for (int32_t L : lengths) pairs += causal ? 0.5 * double(L) * double(L + 1) : double(L) * double(L);
  const double fwd_flops = 4.0 * double(D) * double(H) * pairs, bwd_flops = 2.5 * fwd_flops;
  const double fwd = bench::gpu_time_ms([&] { attention_forward(p); }, reps) / 1e3;
  const double bwd = bench::gpu_time_ms([&] { attention_backward(p, g); }, reps) / 1e3;
  fmt::print("{:<10} {:<36} {:>8.3f} {:>8.1f} {:>8.3f} {:>8.1f} {:>10.1f}  {}\n", name,
             fmt::format("T={} S={} H={} Hkv={} D={}", T, S, H, Hkv, D), fwd * 1e3, fwd_flops / fwd / 1e12,
             bwd * 1e3, bwd_flops / bwd / 1e12, (fwd_flops + bwd_flops) / (fwd + bwd) / 1e12, kernel);
  std::fflush(stdout);  // row by row: a run cut short by a time limit keeps its rows
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("CUDA varlen attention throughput, causal and bidirectional");
  int64_t tokens = 32768;
  int reps = 10;
  app.add_option("--tokens", tokens, "tokens of the SFT-like batch")->check(CLI::Range(64, 1 << 22));
  app.add_option("--reps", reps, "timed calls per measurement")->check(CLI::Range(1, 1000));
  std::string lengths_out;
  app.add_option("--lengths-out", lengths_out, "write the SFT-like lengths here, one per line");
  std::vector<std::string> kernels = {"auto"};
  app.add_option("--kernels", kernels, "kernels to measure: auto, mma, wgmma")
      ->delimiter(',')
      ->check(CLI::IsMember({"auto", "mma", "wgmma"}));
  std::vector<std::string> batches = {"sft-like", "32 x 1k", "one 8k", "one 32k", "bidir sft"};
  app.add_option("--batches", batches, "batches to measure (all by default)")
      ->delimiter(',')
      ->check(CLI::IsMember(batches));
  CLI11_PARSE(app, argc, argv);
  if (cuda_device_count() == 0) {
    fmt::print("bench_attention: no CUDA GPU in this {} build; nothing to measure\n",
               built_with_cuda() ? "CUDA" : "CPU-only");
    return 0;
  }
  fmt::print("device: {}\n", cuda_device_name(0));
  fmt::print("{:<10} {:<36} {:>8} {:>8} {:>8} {:>8} {:>10}  {}\n", "batch", "shape", "fwd ms", "TFLOP/s",
             "bwd ms", "TFLOP/s", "fwd+bwd TF", "kernel");
  const std::vector<int32_t> sft = bench::sft_batch(tokens), one8k = {8192}, one32k = {32768};
  const std::vector<int32_t> rows1k(32, 1024);
  if (!lengths_out.empty()) {
    std::ofstream out(lengths_out);
    for (int32_t len : sft) out << len << "\n";
  }
  try {
    for (const std::string& choice : kernels) {
      const std::string kernel = use_kernel(choice);
      const auto chosen = [&](const std::string& name) {
        return std::find(batches.begin(), batches.end(), name) != batches.end();
      };
      for (const auto& [name, lengths] : {std::pair{"sft-like", sft}, std::pair{"32 x 1k", rows1k},
                                          std::pair{"one 8k", one8k}, std::pair{"one 32k", one32k}}) {
        if (!chosen(name)) continue;
        measure(kernel, name, lengths, 12, 12, 64, reps);
        measure(kernel, name, lengths, 16, 16, 128, reps);
        measure(kernel, name, lengths, 16, 4, 128, reps);
      }
      if (chosen("bidir sft")) {
        measure(kernel, "bidir sft", sft, 12, 12, 64, reps, /*causal=*/false);
        measure(kernel, "bidir sft", sft, 16, 16, 128, reps, /*causal=*/false);
      }
    }
  } catch (const Error& e) {
    fmt::print(stderr, "bench_attention: {}\n", e.what());
    return 1;
  }
  return 0;
}
