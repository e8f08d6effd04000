// Host side of the CUDA attention: checks what only this backend requires, carves the per-call scratch
// (work list, status words, the backward's delta, dQ accumulator and key-tile order) from the shared
// scratch buffer, launches the schedule and the kernels for the head dim, and turns an inconsistent
// segment table into a pt::Error.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <string>

#include "ops/cuda/attention.h"
#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/attention_mma.cuh"
#include "ops/cuda/scratch.h"

namespace pt::ops::cuda {

namespace {

void check(cudaError_t err, const char* op, const char* what) {
  if (err != cudaSuccess)
    throw Error(std::string(op) + ": " + what + " failed: " + cudaGetErrorName(err) + " (" +
                cudaGetErrorString(err) + ")");
}

void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw Error(std::string(op) + ": " + what);
}

size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

struct Call {
  const char* op;
  attn::Args args{};
  int head_dim = 0, segments = 0, rows = attn::kTile;  // rows: of a schedule item
  const int32_t *cu = nullptr, *valid = nullptr;
  bool segments_checked = false;
};

Call prepare(const char* op, const AttentionParams& p, int rows = attn::kTile) {
  Call c{op};
  c.rows = rows;
  require(p.q.dtype == DType::bf16, op,
          std::string("the cuda backend takes bf16 q, k, v and out (fp32 accumulation inside), got ") +
              dtype_name(p.q.dtype) + "; convert to bf16 or run on cpu");
  c.head_dim = static_cast<int>(p.q.size(2));
  require(c.head_dim == 64 || c.head_dim == 128, op,
          "the cuda backend supports head dims 64 and 128, got " + std::to_string(c.head_dim));
  const int64_t T = p.q.size(0), H = p.q.size(1);
  require(T * H * c.head_dim < INT_MAX && p.cu_seqlens.size(0) < INT_MAX / attn::kTile, op,
          "more than 2^31 elements per tensor is not supported");
  for (const Tensor* t : {&p.q, &p.k, &p.v, &p.out})
    require(reinterpret_cast<uintptr_t>(t->data) % 16 == 0, op,
            "q, k, v and out must be 16-byte aligned for vector loads");
  c.segments = static_cast<int>(p.cu_seqlens.size(0)) - 1;
  c.segments_checked = p.segments_checked;
  c.cu = static_cast<const int32_t*>(p.cu_seqlens.data);
  c.valid = p.valid_lens.empty() ? nullptr : static_cast<const int32_t*>(p.valid_lens.data);
  attn::Args& a = c.args;
  a.q = static_cast<const __nv_bfloat16*>(p.q.data);
  a.k = static_cast<const __nv_bfloat16*>(p.k.data);
  a.v = static_cast<const __nv_bfloat16*>(p.v.data);
  a.out = static_cast<__nv_bfloat16*>(p.out.data);
  a.lse = static_cast<float*>(p.lse.data);
  a.T = static_cast<int>(T);
  a.H = static_cast<int>(H);
  a.Hkv = static_cast<int>(p.k.size(1));
  a.scale = static_cast<float>(p.softmax_scale > 0 ? p.softmax_scale : 1.0 / std::sqrt(double(c.head_dim)));
  // No segment is longer than T: a window of T or more changes nothing, and the causal kernels run. Below
  // T, the kernels' window arithmetic stays far from int overflow.
  a.window = p.window > 0 && p.window < T ? p.window : 0;
  a.causal = p.causal;
  a.schedule.capacity = (a.T + c.segments * (rows - 1)) / rows;
  a.schedule.rows = rows;
  return c;
}

// Runs `launch` over a fresh schedule with `extra_bytes` more scratch (passed to `launch`, 256-byte
// aligned), then (unless the caller checked the segment table) waits and reports an inconsistent
// cu_seqlens / valid_lens.
template <class Launch>
void run(Call& c, size_t extra_bytes, Launch&& launch) {
  if (c.args.T == 0 || c.segments <= 0) {
    require(c.args.T == 0, c.op, "cu_seqlens has no segments but there are tokens");
    return;
  }
  ScratchPlan plan;
  const size_t items_at = plan.reserve<int4>(c.args.schedule.capacity);
  const size_t status_at = plan.reserve<int>(attn::kStatusWords);
  const size_t extra_at = plan.reserve<char>(static_cast<int64_t>(extra_bytes));
  plan.allocate();
  auto* items = plan.at<int4>(items_at);
  auto* status = plan.at<int>(status_at);
  attn::launch_schedule(c.cu, c.valid, c.segments, c.args.T, c.rows, items, c.args.schedule.capacity, status,
                        nullptr);
  c.args.schedule.items = items;
  c.args.schedule.count = status + attn::kCount;
  launch(plan.at<char>(extra_at));
  check(cudaGetLastError(), c.op, "kernel launch");
  if (c.segments_checked) return;

  int host_status[attn::kStatusWords];
  check(cudaMemcpy(host_status, status, sizeof(host_status), cudaMemcpyDeviceToHost), c.op,
        "running the attention kernels");
  const int bad = host_status[attn::kBadSegment];
  if (bad == INT_MAX) return;
  int bounds[2], first_last[2], real = -1;
  check(cudaMemcpy(bounds, c.cu + bad, sizeof(bounds), cudaMemcpyDeviceToHost), c.op, "reading cu_seqlens");
  check(cudaMemcpy(&first_last[0], c.cu, sizeof(int), cudaMemcpyDeviceToHost), c.op, "reading cu_seqlens");
  check(cudaMemcpy(&first_last[1], c.cu + c.segments, sizeof(int), cudaMemcpyDeviceToHost), c.op,
        "reading cu_seqlens");
  if (c.valid)
    check(cudaMemcpy(&real, c.valid + bad, sizeof(int), cudaMemcpyDeviceToHost), c.op, "reading valid_lens");
  throw Error(
      std::string(c.op) + ": cu_seqlens must rise from 0 to the token count " + std::to_string(c.args.T) +
      " (it runs " + std::to_string(first_last[0]) + " .. " + std::to_string(first_last[1]) +
      ") and valid_lens stay within each segment; segment " + std::to_string(bad) + " spans [" +
      std::to_string(bounds[0]) + ", " + std::to_string(bounds[1]) + ")" +
      (c.valid ? " with valid length " + std::to_string(real) : std::string()) + "; nothing was written");
}

AttentionKernel parse_attention_kernel(const char* text) {
  const std::string s = text ? text : "";
  if (s.empty() || s == "auto") return AttentionKernel::automatic;
  if (s == "mma") return AttentionKernel::mma;
  if (s == "wgmma") return AttentionKernel::wgmma;
  throw Error("PACKTRAIN_ATTENTION_KERNEL must be auto, mma or wgmma, got '" + s + "'");
}

AttentionKernel& chosen_kernel() {
  static AttentionKernel chosen = parse_attention_kernel(std::getenv("PACKTRAIN_ATTENTION_KERNEL"));
  return chosen;
}

}  // namespace

const char* attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::automatic:
      return "auto";
    case AttentionKernel::mma:
      return "mma";
    case AttentionKernel::wgmma:
      return "wgmma";
  }
  return "?";
}

bool attention_kernel_available(AttentionKernel kernel) {
  return kernel != AttentionKernel::wgmma || attn::forward_sm90_available();
}

namespace {

// Throws, naming where the choice came from, when this GPU or build cannot run `kernel`.
void require_available(AttentionKernel kernel, const char* chosen_by) {
  if (!attention_kernel_available(kernel))
    throw Error(std::string(chosen_by) + ": attention kernel " + attention_kernel_name(kernel) +
                " needs an sm_90 GPU and a build with sm_90a code; use auto or mma");
}

}  // namespace

void set_attention_kernel(AttentionKernel kernel) {
  require_available(kernel, "set_attention_kernel");
  chosen_kernel() = kernel;
}

AttentionKernel attention_kernel() {
  const AttentionKernel chosen = chosen_kernel();
  if (chosen == AttentionKernel::automatic)
    return attn::forward_sm90_available() ? AttentionKernel::wgmma : AttentionKernel::mma;
  require_available(chosen, "PACKTRAIN_ATTENTION_KERNEL");
  return chosen;
}

void attention_forward(const AttentionParams& p) {
  const bool wgmma = attention_kernel() == AttentionKernel::wgmma;
  Call c = prepare("attention_forward", p, wgmma ? attn::kSm90Rows : attn::kTile);
  // The wgmma forward's work list: the order of the schedule items, and its claim counter.
  if (wgmma)
    require(int64_t{c.args.schedule.capacity} * c.args.H < INT_MAX, c.op, "too many query tiles times heads");
  const size_t order_bytes = wgmma ? sizeof(int) * (static_cast<size_t>(c.args.schedule.capacity) + 1) : 0;
  run(c, order_bytes, [&](char* extra) {
    int* order = reinterpret_cast<int*>(extra);
    if (wgmma)
      c.head_dim == 64 ? attn::launch_forward_sm90<64>(c.args, order, nullptr)
                       : attn::launch_forward_sm90<128>(c.args, order, nullptr);
    else
      c.head_dim == 64 ? attn::launch_forward<64>(c.args, nullptr)
                       : attn::launch_forward<128>(c.args, nullptr);
  });
}

void attention_backward(const AttentionParams& p, const AttentionGrads& g) {
  const bool wgmma = attention_kernel() == AttentionKernel::wgmma;
  Call c = prepare("attention_backward", p);
  attn::Args& a = c.args;
  a.dout = static_cast<const __nv_bfloat16*>(g.dout.data);
  a.dq = static_cast<__nv_bfloat16*>(g.dq.data);
  a.dk = static_cast<__nv_bfloat16*>(g.dk.data);
  a.dv = static_cast<__nv_bfloat16*>(g.dv.data);
  for (const Tensor* t : {&g.dout, &g.dq, &g.dk, &g.dv})
    require(reinterpret_cast<uintptr_t>(t->data) % 16 == 0, c.op,
            "dout, dq, dk and dv must be 16-byte aligned for vector loads");
  // The backward's work list holds the schedule items that start a key tile: a bound on their count.
  const int64_t key_capacity = std::min<int64_t>(
      a.schedule.capacity,
      (int64_t{a.T} + int64_t{c.segments} * (attn::kBackwardKeys - 1)) / attn::kBackwardKeys);
  require(key_capacity * a.Hkv < INT_MAX, c.op, "too many key tiles times kv heads for one grid");
  const size_t rows = static_cast<size_t>(a.T) * a.H;
  const size_t delta_bytes = round_up(sizeof(float) * rows);
  // The wgmma backward's tiled layout (its bulk reductions) keeps kBackwardRows rows of slack past T per head
  // and half.
  const size_t accum_rows = wgmma ? static_cast<size_t>(a.T + attn::kBackwardRows) * a.H : rows;
  const size_t accum_bytes = round_up(sizeof(float) * accum_rows * c.head_dim);
  const size_t tiles_bytes = sizeof(int) * (2 + static_cast<size_t>(key_capacity));  // + the counter
  run(c, delta_bytes + accum_bytes + tiles_bytes, [&](char* extra) {
    a.delta = reinterpret_cast<float*>(extra);
    int* tiles = reinterpret_cast<int*>(extra + delta_bytes + accum_bytes);
    const attn::BackwardScratch scratch{reinterpret_cast<float*>(extra + delta_bytes), tiles,
                                        tiles + 1 + key_capacity, static_cast<int>(key_capacity)};
    if (wgmma)
      c.head_dim == 64 ? attn::launch_backward_sm90<64>(a, scratch, nullptr)
                       : attn::launch_backward_sm90<128>(a, scratch, nullptr);
    else
      c.head_dim == 64 ? attn::launch_backward<64>(a, scratch, nullptr)
                       : attn::launch_backward<128>(a, scratch, nullptr);
  });
}

}  // namespace pt::ops::cuda
