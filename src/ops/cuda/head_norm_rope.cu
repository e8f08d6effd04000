#include <algorithm>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/param_sums.cuh"
#include "ops/cuda/rope_angles.cuh"
#include "ops/cuda/scratch.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kRowsPerBlock = 384;  // (token, head) rows a block aims for: 48 a team of 16 lanes
constexpr int64_t kMaxAnglesBytes = 36
                                    << 10;  // the cos and sin table: with the rest, within the default 48 KiB

// One launch's tensors, index 0 for q's heads and 1 for k's; a token's rows are q's H heads, then k's Hkv.
template <class T, class W>
struct Rows {
  const T* x[2];  // q_pre, k_pre
  const W* w[2];  // the norms' weights
  float* rstd[2];
  const T* dy[2];  // backward: dq, dk
  T* out[2];       // forward: q, k; backward: dq_pre, dk_pre
  int heads[2];
};

// A team of kLanes lanes holds one row of D = kLanes kVec columns, lane l its columns [l kVec, (l + 1) kVec),
// so the rotation's partner of column i < D/2, i + D/2, sits in lane l ^ kLanes / 2.
template <int kLanes>
__device__ __forceinline__ unsigned team_mask() {
  return kLanes == 32 ? 0xffffffffu : ((1u << kLanes % 32) - 1) << (threadIdx.x % 32 / kLanes * kLanes);
}

template <int kLanes>
__device__ __forceinline__ float team_sum(float v) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(team_mask<kLanes>(), v, offset);
  return v;
}

// v (the lane's columns) turned by the block's angles of `token`: out = v cos -+ partner sin in the low and
// high half. With sin negated (rope_angles' sign -1) this is the transposed rotation.
template <int kVec, int kLanes>
__device__ __forceinline__ void rotate(float (&v)[kVec], const float* cos_t, const float* sin_t, int token,
                                       int lane) {
  constexpr int kHalf = kLanes * kVec / 2;
  const int i0 = lane * kVec % kHalf;
  const float *c = cos_t + token * kHalf + i0, *s = sin_t + token * kHalf + i0;
  const bool low = lane < kLanes / 2;
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const float partner = __shfl_xor_sync(team_mask<kLanes>(), v[k], kLanes / 2);
    v[k] = v[k] * c[k] + (low ? -partner : partner) * s[k];
  }
}

// The rows a block takes: those of tokens [t0, t0 + tokens), team j the rows j, j + teams, ... in order, in
// groups of kUnroll whose loads are all in flight before the first is used.
constexpr int kUnroll = 4;
constexpr int kBackwardBlocksPerSm = 4;  // its registers capped at 128 a thread: 16 warps a multiprocessor
struct BlockRows {
  int64_t t0;
  int tokens, per_token, heads_q;
  __device__ BlockRows(int64_t T_, int tokens_per_block, const int (&heads)[2])
      : t0(int64_t{blockIdx.x} * tokens_per_block),
        tokens(static_cast<int>(min(int64_t{tokens_per_block}, T_ - t0))),
        per_token(heads[0] + heads[1]),
        heads_q(heads[0]) {}
  __device__ int count() const { return tokens * per_token; }
};

// Where block row j lies: its token within the block, q (0) or k (1), and its row of that tensor.
struct RowAt {
  int token, which;
  int64_t row;
  __device__ RowAt(const BlockRows& b, const int (&heads)[2], int j) {
    token = j / b.per_token;
    const int head = j - token * b.per_token;
    which = head < b.heads_q ? 0 : 1;
    row = (b.t0 + token) * heads[which] + head - which * b.heads_q;
  }
};

// Forward: y = x rstd w per row, rotated in registers before the one store.
template <class T, class W, int kVec, int kLanes>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(Rows<T, W> r, RopeTable f, const int32_t* __restrict__ pos, bool rotating, float eps,
                   int64_t T_, int tokens_per_block) {
  extern __shared__ double shared[];
  constexpr int D = kLanes * kVec;
  const BlockRows b(T_, tokens_per_block, r.heads);
  float *cos_t = nullptr, *sin_t = nullptr;
  if (rotating) rope_angles(f, pos, b.t0, b.tokens, D / 2, 1.0f, shared, cos_t, sin_t);
  const int teams = kThreads / kLanes, team = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  float w0[kVec], w1[kVec];
  load_floats<kVec>(r.w[0] + lane * kVec, w0);
  load_floats<kVec>(r.w[1] + lane * kVec, w1);
  for (int j0 = team; j0 < b.count(); j0 += teams * kUnroll) {
    Pack<T, kVec> xs[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (const int j = j0 + u * teams; j < b.count()) {
        const RowAt at(b, r.heads, j);
        xs[u] = load_pack<kVec>(r.x[at.which] + at.row * D + lane * kVec);
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u * teams;
      if (j >= b.count()) break;
      const RowAt at(b, r.heads, j);
      float v[kVec], sum_sq = 0;
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = load(&xs[u].v[k]), sum_sq += v[k] * v[k];
      const float rstd = rsqrtf(team_sum<kLanes>(sum_sq) / float(D) + eps);
      if (lane == 0) r.rstd[at.which][at.row] = rstd;
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = v[k] * rstd * (at.which ? w1[k] : w0[k]);
      if (rotating) rotate<kVec, kLanes>(v, cos_t, sin_t, at.token, lane);
      store_floats<kVec>(r.out[at.which] + at.row * D + lane * kVec, v);
    }
  }
}

// Backward: the transposed rotation of dy in registers, then RMSNorm's backward, dx = rstd (w g - x rstd^2
// mean(w g x)) with g the turned dy; each lane adds g x rstd of its columns over its team's rows in row order
// (q's and k's apart), and the block adds its teams' sums in team order into partial[block] = (q's D
// columns, k's D): with the fixed row ranges, the weights' gradients come out the same on every run.
template <class T, class W, int kVec, int kLanes>
__global__ void __launch_bounds__(kThreads, kBackwardBlocksPerSm)
    backward_kernel(Rows<T, W> r, RopeTable f, const int32_t* __restrict__ pos, bool rotating,
                    float* __restrict__ partial, int64_t T_, int tokens_per_block, int angles_bytes) {
  extern __shared__ double shared[];
  constexpr int D = kLanes * kVec;
  const BlockRows b(T_, tokens_per_block, r.heads);
  float *cos_t = nullptr, *sin_t = nullptr;
  if (rotating) rope_angles(f, pos, b.t0, b.tokens, D / 2, -1.0f, shared, cos_t, sin_t);
  const int teams = kThreads / kLanes, team = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  // The weights in shared memory, [2][D] past the angles and the teams' sums, rather than in registers.
  float* sums = reinterpret_cast<float*>(reinterpret_cast<char*>(shared) + angles_bytes);  // [teams][2][D]
  float* weights = sums + teams * 2 * D;
  for (int c = threadIdx.x; c < 2 * D; c += blockDim.x) weights[c] = load(r.w[c / D] + c % D);
  __syncthreads();
  float dw0[kVec] = {}, dw1[kVec] = {};
  for (int j0 = team; j0 < b.count(); j0 += teams * kUnroll) {
    Pack<T, kVec> gs[kUnroll], xs[kUnroll];
    float rstds[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (const int j = j0 + u * teams; j < b.count()) {
        const RowAt at(b, r.heads, j);
        gs[u] = load_pack<kVec>(r.dy[at.which] + at.row * D + lane * kVec);
        xs[u] = load_pack<kVec>(r.x[at.which] + at.row * D + lane * kVec);
        rstds[u] = r.rstd[at.which][at.row];
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u * teams;
      if (j >= b.count()) break;
      const RowAt at(b, r.heads, j);
      float g[kVec], x[kVec], dot = 0;
#pragma unroll
      for (int k = 0; k < kVec; ++k) g[k] = load(&gs[u].v[k]), x[k] = load(&xs[u].v[k]);
      if (rotating) rotate<kVec, kLanes>(g, cos_t, sin_t, at.token, lane);
      const float* w = weights + at.which * D + lane * kVec;
#pragma unroll
      for (int k = 0; k < kVec; ++k) dot += g[k] * w[k] * x[k];
      const float rstd = rstds[u], coef = rstd * rstd * team_sum<kLanes>(dot) / float(D);
      float out[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        out[k] = rstd * (w[k] * g[k] - x[k] * coef);
        (at.which ? dw1[k] : dw0[k]) += g[k] * x[k] * rstd;
      }
      store_floats<kVec>(r.out[at.which] + at.row * D + lane * kVec, out);
    }
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    sums[(team * 2) * D + lane * kVec + k] = dw0[k];
    sums[(team * 2 + 1) * D + lane * kVec + k] = dw1[k];
  }
  __syncthreads();
  for (int c = threadIdx.x; c < 2 * D; c += blockDim.x) {
    float sum = 0;
    for (int j = 0; j < teams; ++j) sum += sums[j * 2 * D + c];
    partial[int64_t{blockIdx.x} * 2 * D + c] = sum;
  }
}

// The second pass: grid row 0 sums q's columns of the partials into dq_weight, row 1 k's into dk_weight.
template <class W>
__global__ void weight_grad_kernel(const float* __restrict__ partial, int64_t partials, int64_t D,
                                   W* __restrict__ dq_weight, W* __restrict__ dk_weight) {
  const bool k = blockIdx.y == 1;
  column_sum(partial + (k ? D : 0), partials, 2 * D, D, true, k ? dk_weight : dq_weight);
}

// How a launch covers the rows, or lanes = 0 where the shapes or alignment rule the fused kernels out.
struct Launch {
  int lanes = 0, tokens = 0, angles_bytes = 0;
  unsigned blocks = 0;
};

template <class E>
Launch plan_launch(const HeadNormRope& p, std::initializer_list<const void*> pointers) {
  const int64_t T = p.q_pre.shape[0], D = p.q_pre.shape[2], heads = p.q_pre.shape[1] + p.k_pre.shape[1];
  constexpr int kVec = kPack16<E>;
  Launch l;
  const int64_t lanes = D / kVec;
  if (D % kVec != 0 || (lanes != 8 && lanes != 16 && lanes != 32) || !aligned16(pointers) || heads == 0 ||
      p.k_weight.dtype != p.q_weight.dtype)
    return l;
  l.lanes = static_cast<int>(lanes);
  const int64_t by_bytes = (kMaxAnglesBytes - rope_angles_bytes(0, D / 2)) /
                           (rope_angles_bytes(1, D / 2) - rope_angles_bytes(0, D / 2));
  l.tokens = static_cast<int>(std::clamp<int64_t>(std::min(kRowsPerBlock / heads, by_bytes), 1, T));
  l.angles_bytes = p.freq ? static_cast<int>(rope_angles_bytes(l.tokens, D / 2) + 15) / 16 * 16 : 0;
  l.blocks = blocks_for(T, l.tokens);
  return l;
}

template <class E, class W>
Rows<E, W> rows_of(const HeadNormRope& p, const Tensor& dq, const Tensor& dk, const Tensor& q_out,
                   const Tensor& k_out) {
  return {{data<E>(p.q_pre), data<E>(p.k_pre)},
          {data<W>(p.q_weight), data<W>(p.k_weight)},
          {data<float>(p.rstd_q), data<float>(p.rstd_k)},
          {dq.empty() ? nullptr : data<E>(dq), dk.empty() ? nullptr : data<E>(dk)},
          {data<E>(q_out), data<E>(k_out)},
          {static_cast<int>(p.q_pre.shape[1]), static_cast<int>(p.k_pre.shape[1])}};
}

// The kernel instances for rows of 8, 16 or 32 lanes.
template <class E, class W>
auto forward_for(int lanes) {
  constexpr int kVec = kPack16<E>;
  return lanes == 8    ? forward_kernel<E, W, kVec, 8>
         : lanes == 16 ? forward_kernel<E, W, kVec, 16>
                       : forward_kernel<E, W, kVec, 32>;
}

template <class E, class W>
auto backward_for(int lanes) {
  constexpr int kVec = kPack16<E>;
  return lanes == 8    ? backward_kernel<E, W, kVec, 8>
         : lanes == 16 ? backward_kernel<E, W, kVec, 16>
                       : backward_kernel<E, W, kVec, 32>;
}

Tensor rows_view(const Tensor& x) { return x.reshape({x.shape[0] * x.shape[1], x.shape[2]}); }

const int32_t* positions(const HeadNormRope& p) { return p.freq ? data<int32_t>(p.position_ids) : nullptr; }

}  // namespace

void head_norm_rope_forward(const HeadNormRope& p, const Tensor& q, const Tensor& k) {
  const int64_t T = p.q_pre.shape[0];
  if (T == 0) return;
  require_f32("head_norm_rope_forward", "rstd", p.rstd_q.dtype);
  require_f32("head_norm_rope_forward", "rstd", p.rstd_k.dtype);
  dispatch_with_param("head_norm_rope_forward", "q_pre", p.q_pre, p.q_weight, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    const Launch l =
        plan_launch<E>(p, {p.q_pre.data, p.k_pre.data, p.q_weight.data, p.k_weight.data, q.data, k.data});
    if (l.lanes == 0) {
      rmsnorm_forward(rows_view(p.q_pre), p.q_weight, p.eps, rows_view(q), p.rstd_q);
      rmsnorm_forward(rows_view(p.k_pre), p.k_weight, p.eps, rows_view(k), p.rstd_k);
      if (p.freq) rope_rotate(q, k, p.position_ids, *p.freq, +1, q, k);
      return;
    }
    const RopeTable f = p.freq ? rope_table(*p.freq) : RopeTable{};
    forward_for<E, W>(l.lanes)<<<l.blocks, kThreads, static_cast<size_t>(l.angles_bytes), current_stream()>>>(
        rows_of<E, W>(p, Tensor(), Tensor(), q, k), f, positions(p), p.freq != nullptr, float(p.eps), T,
        l.tokens);
    PT_CUDA_CHECK_LAUNCH();
  });
}

void head_norm_rope_backward(const HeadNormRope& p, const Tensor& dq, const Tensor& dk, const Tensor& dq_pre,
                             const Tensor& dk_pre, const Tensor& dq_weight, const Tensor& dk_weight) {
  const int64_t T = p.q_pre.shape[0], D = p.q_pre.shape[2];
  require_f32("head_norm_rope_backward", "rstd", p.rstd_q.dtype);
  require_f32("head_norm_rope_backward", "rstd", p.rstd_k.dtype);
  if (T == 0) return;
  dispatch_with_param("head_norm_rope_backward", "q_pre", p.q_pre, p.q_weight, [&](auto t, auto w) {
    using E = decltype(t);
    using W = decltype(w);
    const Launch l = plan_launch<E>(p, {p.q_pre.data, p.k_pre.data, p.q_weight.data, p.k_weight.data, dq.data,
                                        dk.data, dq_pre.data, dk_pre.data});
    if (l.lanes == 0 || dq_weight.dtype != p.q_weight.dtype || dk_weight.dtype != p.q_weight.dtype) {
      // The norms' backward reads the turned gradients from dq_pre and dk_pre.
      if (p.freq) rope_rotate(dq, dk, p.position_ids, *p.freq, -1, dq_pre, dk_pre);
      const Tensor gq = p.freq ? dq_pre : dq, gk = p.freq ? dk_pre : dk;
      rmsnorm_backward(rows_view(gq), rows_view(p.q_pre), p.q_weight, p.rstd_q, rows_view(dq_pre),
                       Write::overwrite, dq_weight, Write::accumulate);
      rmsnorm_backward(rows_view(gk), rows_view(p.k_pre), p.k_weight, p.rstd_k, rows_view(dk_pre),
                       Write::overwrite, dk_weight, Write::accumulate);
      return;
    }
    const RopeTable f = p.freq ? rope_table(*p.freq) : RopeTable{};
    ScratchPlan plan;
    const size_t at = plan.reserve<float>(int64_t{l.blocks} * 2 * D);
    plan.allocate();
    float* partial = plan.at<float>(at);
    const int teams = kThreads / l.lanes;
    const auto shared = static_cast<size_t>(l.angles_bytes + (teams + 1) * 2 * D * int64_t{sizeof(float)});
    backward_for<E, W>(l.lanes)<<<l.blocks, kThreads, shared, current_stream()>>>(
        rows_of<E, W>(p, dq, dk, dq_pre, dk_pre), f, positions(p), p.freq != nullptr, partial, T, l.tokens,
        l.angles_bytes);
    PT_CUDA_CHECK_LAUNCH();
    weight_grad_kernel<<<dim3(blocks_for(D, 32), 2), dim3(32, kColumnSumRows), 0, current_stream()>>>(
        partial, l.blocks, D, data<W>(dq_weight), data<W>(dk_weight));
    PT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace pt::ops::cuda
