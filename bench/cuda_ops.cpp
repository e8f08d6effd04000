// Throughput of the CUDA backend's ops on shapes of a ~110M-parameter Llama (hidden 768, 12 heads of 64,
// FFN 2048, vocab 32000; --hidden, --ffn and --head-dim change the first three, e.g. 2048, 8192 and 64 for
// llama3.2-1b's layers, 1024, 3072 and 128 for qwen3-0.6b's) at T tokens per micro-batch: GB/s for
// memory-bound ops (bytes each op must move at least once), TFLOP/s for GEMMs. Activations bf16, master
// weights, gradients and optimizer state f32. Usage: bench_cuda_ops [--tokens 8192] [--iters 20] [--hidden
// 768] [--ffn 2048] [--head-dim 64]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/device_buffer.h"
#include "core/float16.h"
#include "gpu_bench.h"
#include "ops/adamw.h"
#include "ops/bias.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/grad_norm.h"
#include "ops/head_norm_rope.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

namespace {

using namespace pt;
using namespace pt::ops;

int iters = 20;

double time_ms(const std::function<void()>& fn) { return bench::gpu_time_ms(fn, iters); }

// amount is bytes for "GB/s" and floating-point operations for "TFLOP/s".
void report(const std::string& op, const std::string& shape, double ms, double amount,
            const std::string& unit) {
  const double per_second = amount / (ms / 1e3);
  fmt::print("{:<22} {:<32} {:>9.3f} ms {:>9.1f} {}\n", op, shape, ms,
             per_second / (unit == "GB/s" ? 1e9 : 1e12), unit);
}

using bench::Pool;

std::vector<int32_t> random_ids(int64_t n, int64_t below) {
  std::mt19937 rng(1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % below);
  return ids;
}

void bench_linear(Pool& pool, const std::string& name, int64_t M, int64_t N, int64_t K, DType dtype) {
  const Tensor x = pool.make(dtype, {M, K}), w = pool.make(dtype, {N, K}), y = pool.make(dtype, {M, N});
  const Tensor dy = pool.make(dtype, {M, N}), dx = pool.make(dtype, {M, K}),
               dw = pool.make(DType::f32, {N, K});
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const std::string shape = fmt::format("{} [{},{}]x[{},{}]^T", dtype_name(dtype), M, K, N, K);
  report(name + " fwd", shape, time_ms([&] { linear_forward(x, w, y); }), flops, "TFLOP/s");
  report(name + " bwd", shape,
         time_ms([&] { linear_backward(dy, x, w, dx, Write::overwrite, dw, Write::accumulate); }), 2 * flops,
         "TFLOP/s");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CUDA op throughput on 110M-Llama shapes"};
  int64_t T = 8192;
  app.add_option("--tokens", T, "tokens per micro-batch (T)")->check(CLI::Range(64, 1 << 20));
  app.add_option("--iters", iters, "timed calls per op")->check(CLI::Range(1, 10000));
  int64_t C = 768, F = 2048, D = 64;
  app.add_option("--hidden", C, "hidden size")->check(CLI::Range(64, 16384));
  app.add_option("--ffn", F, "FFN size")->check(CLI::Range(64, 65536));
  app.add_option("--head-dim", D, "attention head size, dividing the hidden size")
      ->check(CLI::Range(16, 256));
  CLI11_PARSE(app, argc, argv);
  if (C % D != 0) {
    fmt::print(stderr, "--head-dim {} does not divide --hidden {}\n", D, C);
    return 2;
  }
  if (cuda_device_count() == 0) {
    fmt::print("no CUDA device{}: nothing to benchmark\n", built_with_cuda() ? "" : " (CPU-only build)");
    return 0;
  }
  fmt::print("device: {}, T = {}, {} timed calls per op\n", cuda_device_name(0), T, iters);

  const int64_t V = 32000, H = C / D;
  const DType bf = DType::bf16, f32 = DType::f32;
  const double act = double(T * C) * 2;  // bytes of one bf16 [T,C] activation
  Pool pool;

  const Tensor ids = pool.ints(random_ids(T, V)), table = pool.make(bf, {V, C});
  const Tensor x = pool.make(bf, {T, C}), y = pool.make(bf, {T, C}), dx = pool.make(bf, {T, C});
  const Tensor dtable = pool.make(f32, {V, C});
  report("embedding fwd", fmt::format("bf16 [T,{}]", C), time_ms([&] { embedding_forward(ids, table, x); }),
         2 * act, "GB/s");
  report("embedding bwd", fmt::format("bf16 -> f32 [{},{}]", V, C),
         time_ms([&] { embedding_backward(ids, x, dtable, Write::accumulate); }),
         act + 2.0 * double(T * C * 4), "GB/s");

  const Tensor w = pool.make(f32, {C}), dw = pool.make(f32, {C}), rstd = pool.make(f32, {T});
  report("rmsnorm fwd", fmt::format("bf16 [T,{}]", C), time_ms([&] { rmsnorm_forward(x, w, 1e-5, y, rstd); }),
         2 * act, "GB/s");
  report("rmsnorm bwd", fmt::format("bf16 [T,{}]", C),
         time_ms([&] { rmsnorm_backward(y, x, w, rstd, dx, Write::overwrite, dw, Write::accumulate); }),
         3 * act, "GB/s");
  // As a pre-norm block calls it: dx adds into the residual stream's gradient.
  report("rmsnorm bwd, dx +=", fmt::format("bf16 [T,{}]", C),
         time_ms([&] { rmsnorm_backward(y, x, w, rstd, dx, Write::accumulate, dw, Write::accumulate); }),
         4 * act, "GB/s");
  // LayerNorm as a post-norm block (BERT) calls it, the bias before it summed from dx in its pass or apart.
  const Tensor lw = pool.make(f32, {C}), lb = pool.make(f32, {C}), ldw = pool.make(f32, {C}),
               ldb = pool.make(f32, {C}), ldxb = pool.make(f32, {C}), mean = pool.make(f32, {T});
  layernorm_forward(x, lw, lb, 1e-5, y, mean, rstd);
  report("layernorm bwd", fmt::format("bf16 [T,{}]", C), time_ms([&] {
           layernorm_backward(y, x, lw, mean, rstd, dx, Write::overwrite, ldw, ldb, Write::accumulate);
         }),
         3 * act, "GB/s");
  report("layernorm bwd + dx_bias", fmt::format("bf16 [T,{}]", C), time_ms([&] {
           layernorm_backward(y, x, lw, mean, rstd, dx, Write::overwrite, ldw, ldb, Write::accumulate, ldxb);
         }),
         3 * act, "GB/s");
  report("layernorm bwd, then bias_backward", fmt::format("bf16 [T,{}]", C), time_ms([&] {
           layernorm_backward(y, x, lw, mean, rstd, dx, Write::overwrite, ldw, ldb, Write::accumulate);
           bias_backward(dx, ldxb, Write::accumulate);
         }),
         4 * act, "GB/s");
  // Qwen3's per-head q norm: rows of one head.
  const Tensor wh = pool.make(f32, {D}), dwh = pool.make(f32, {D}), rstd_h = pool.make(f32, {T * H});
  const Tensor xh = x.reshape({T * H, D}), yh = y.reshape({T * H, D}), dxh = dx.reshape({T * H, D});
  report("rmsnorm bwd heads", fmt::format("bf16 [T*{},{}]", H, D), time_ms([&] {
           rmsnorm_backward(yh, xh, wh, rstd_h, dxh, Write::overwrite, dwh, Write::accumulate);
         }),
         3 * act, "GB/s");

  // The same rows normed and rotated in one pass (Qwen3), q and k of H heads each.
  const Tensor positions = pool.ints(random_ids(T, 2048)), kh = pool.make(bf, {T, H, D}),
               rstd_kh = pool.make(f32, {T * H}), dwkh = pool.make(f32, {D});
  const RopeFrequencies head_freq = RopeFrequencies::plain(D, 1e6);
  HeadNormRope heads{x.reshape({T, H, D}), y.reshape({T, H, D}), wh, wh, rstd_h, rstd_kh, positions};
  heads.freq = &head_freq;
  heads.eps = 1e-6;
  report("q/k norm+rope fwd", fmt::format("bf16 2x [T,{},{}]", H, D), time_ms([&] {
           head_norm_rope_forward(heads, dx.reshape({T, H, D}), kh);
         }),
         4 * act, "GB/s");
  report("q/k norm+rope bwd", fmt::format("bf16 2x [T,{},{}]", H, D), time_ms([&] {
           head_norm_rope_backward(heads, dx.reshape({T, H, D}), kh, dx.reshape({T, H, D}), kh, dwh, dwkh);
         }),
         6 * act, "GB/s");

  report("add (residual)", fmt::format("bf16 [T,{0}] += [T,{0}]", C), time_ms([&] { add(y, dx); }), 3 * act,
         "GB/s");

  const Tensor q = pool.make(bf, {T, H, D}), k = pool.make(bf, {T, H, D}),
               pos = pool.ints(random_ids(T, 2048));
  const RopeFrequencies freq = RopeFrequencies::plain(D, 1e4);
  report("rope fwd (in place)", fmt::format("bf16 [T,{},{}]", H, D),
         time_ms([&] { rope_forward(q, pos, freq, q); }), 2 * act, "GB/s");
  report("rope fwd q+k", fmt::format("bf16 2x [T,{},{}], one launch", H, D),
         time_ms([&] { rope_forward_qk(q, k, pos, freq, q, k); }), 4 * act, "GB/s");
  report("rope bwd q+k", fmt::format("bf16 2x [T,{},{}], one launch", H, D),
         time_ms([&] { rope_backward_qk(q, k, pos, freq, q, k); }), 4 * act, "GB/s");

  const Tensor h = pool.make(bf, {T, 2 * F}), a = pool.make(bf, {T, F}), dh = pool.make(bf, {T, 2 * F});
  const double act_f = double(T * F) * 2;
  report("swiglu fwd", fmt::format("bf16 [T,2x{}]", F), time_ms([&] { swiglu_forward(h, a); }), 3 * act_f,
         "GB/s");
  report("swiglu bwd", fmt::format("bf16 [T,2x{}]", F), time_ms([&] { swiglu_backward(a, h, dh); }),
         5 * act_f, "GB/s");

  // GELU at GPT-2's and BERT's MLP width (4 C), exact and tanh forms: both unfused where a GEMM epilogue
  // cannot take them (BERT's erf GELU always).
  // Pre-activations spread as a layer's are (the erf's cost depends on |h|).
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<uint16_t> pre_activations(static_cast<size_t>(T * 4 * C));
  for (auto& v : pre_activations) v = float_to_bf16(normal(rng));
  const Tensor gh = pool.bf16(pre_activations, {T, 4 * C});
  const Tensor ga = pool.make(bf, {T, 4 * C}), gdh = pool.make(bf, {T, 4 * C});
  const double act_g = double(T * 4 * C) * 2;
  const std::string gshape = fmt::format("bf16 [T,{}]", 4 * C);
  report("gelu_erf fwd", gshape, time_ms([&] { gelu_erf_forward(gh, ga); }), 2 * act_g, "GB/s");
  report("gelu_erf bwd", gshape, time_ms([&] { gelu_erf_backward(ga, gh, gdh); }), 3 * act_g, "GB/s");
  // BERT's fc bias gradient: taken in the backward's pass, against the backward then bias_backward.
  const Tensor gdb = pool.make(f32, {4 * C});
  report("gelu_erf bwd + dbias", gshape,
         time_ms([&] { gelu_erf_backward(ga, gh, gdh, gdb, Write::accumulate); }), 3 * act_g, "GB/s");
  report("gelu_erf bwd, then bias_backward", gshape, time_ms([&] {
           gelu_erf_backward(ga, gh, gdh);
           bias_backward(gdh, gdb, Write::accumulate);
         }),
         4 * act_g, "GB/s");
  report("gelu (tanh) fwd", gshape, time_ms([&] { gelu_forward(gh, ga); }), 2 * act_g, "GB/s");
  report("gelu (tanh) bwd", gshape, time_ms([&] { gelu_backward(ga, gh, gdh); }), 3 * act_g, "GB/s");

  bench_linear(pool, "linear qkv", T, 3 * C, C, bf);
  bench_linear(pool, "linear o", T, C, C, bf);
  bench_linear(pool, "linear gate_up", T, 2 * F, C, bf);
  bench_linear(pool, "linear down", T, C, F, bf);
  bench_linear(pool, "linear lm_head", T, V, C, bf);
  bench_linear(pool, "linear gate_up", T, 2 * F, C, f32);

  const Tensor logits = pool.make(bf, {T, V}), targets = pool.ints(random_ids(T, V));
  // In place: each logit read once and its gradient written once (pass 2's reread should come from L2).
  report("cross_entropy", "bf16 [T,32000] in place",
         time_ms([&] { cross_entropy(logits, targets, 1.0 / double(T), logits); }), 2.0 * double(T * V) * 2,
         "GB/s");
  // GPT-2's LM head chunk: 50257 classes in rows padded to 50304.
  const Tensor gpt2_logits = pool.make(bf, {T, 50304});
  report("cross_entropy", "bf16 [T,50257] rows of 50304",
         time_ms([&] { cross_entropy(gpt2_logits, targets, 1.0 / double(T), gpt2_logits, 50257); }),
         2.0 * double(T * 50304) * 2, "GB/s");

  // ~110M parameters as 12 layers of 9 tensors plus embeddings, all f32.
  std::vector<int64_t> sizes = {V * C, V * C, C};
  for (int l = 0; l < 12; ++l)
    for (int64_t n : {C, C * C, C * C, C * C, C * C, C, 2 * F * C, C * F}) sizes.push_back(n);
  std::vector<AdamWTensor> params;
  std::vector<Tensor> grads;
  int64_t total = 0;
  for (int64_t n : sizes) {
    params.push_back(
        {pool.make(f32, {n}), pool.make(f32, {n}), pool.make(f32, {n}), pool.make(f32, {n}), true});
    grads.push_back(params.back().grad);
    total += n;
  }
  const std::string pshape = fmt::format("{} tensors, {:.1f}M f32", sizes.size(), double(total) / 1e6);
  int64_t step = 0;
  report("adamw", pshape, time_ms([&] { adamw_step(params, {}, ++step); }), 28.0 * double(total), "GB/s");
  report("global_norm", pshape, time_ms([&] { global_norm(grads); }), 4.0 * double(total), "GB/s");

  // The bf16 working copy of the f32 master weights, refreshed every step.
  const Tensor master = pool.make(f32, {total}), working = pool.make(bf, {total});
  const std::string cshape = fmt::format("{:.1f}M elements", double(total) / 1e6);
  report("cast f32 -> bf16", cshape, time_ms([&] { cast(master, working); }), 6.0 * double(total), "GB/s");
  report("cast bf16 -> f32", cshape, time_ms([&] { cast(working, master); }), 6.0 * double(total), "GB/s");
  return 0;
}
