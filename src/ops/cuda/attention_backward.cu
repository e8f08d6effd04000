// Backward kernels. With P = exp(scale QK^T - lse) recomputed from the forward's lse, dP = dO V^T,
// delta_i = rowsum(dO_i * O_i) and dS = P * (dP - delta):  dV = P^T dO,  dK = scale dS^T Q,
// dQ = scale dS K, all in one pass over key tiles (5 tile products per step): one block per (key tile, kv
// head) sums dK and dV in registers over the queries of the kv head's query heads (GQA), and forms dS K for
// each query tile it visits, adding it to an fp32 [T,H,D] accumulator with atomic reductions; a last kernel
// scales and rounds that to bf16. dK and dV are deterministic; dQ's summation order over key tiles is not,
// so dQ may differ from run to run in the last bits. Blocks run segment by segment, longest work first (a
// device-built order of the key tiles). With a sliding window (kWindowed) a block visits the query tiles up
// to the last query that attends one of its keys, and skips the 16-key chunks before the window of every
// query of a sub-tile. Bidirectional (!kCausal), a block visits every query tile of its segment, and its
// warps of pad keys none.
#include <cmath>

#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/attention_mma.cuh"
#include "ops/cuda/attention_order.cuh"
#include "ops/cuda/vector.cuh"

namespace pt::ops::cuda::attn {

namespace {

constexpr float kLog2e = 1.4426950408889634f;

// delta[h, i] = sum_d dout[i, h, d] * out[i, h, d] for every (token, head) row, and the row of dq_accum
// cleared. A row is D / 8 lanes reading one 16-byte vector each of out and dout; a warp covers
// consecutive rows (its loads coalesce) and each thread holds kDeltaRows rows' loads in flight at once,
// which a row of 128 or 256 bytes alone would leave the memory system too little work to stream.
constexpr int kDeltaRows = 4;
constexpr int kDeltaThreads = 256;

template <int D>
__host__ __device__ constexpr int64_t delta_rows_per_block() {
  return kDeltaThreads / (D / 8) * kDeltaRows;
}

template <int D, bool kTiled>
__global__ void __launch_bounds__(kDeltaThreads) delta_kernel(const Args a, float* dq_accum) {
  constexpr int kLanes = D / 8, kRowsPerPass = kDeltaThreads / kLanes;
  const int64_t rows = static_cast<int64_t>(a.T) * a.H;
  const int64_t first = blockIdx.x * delta_rows_per_block<D>() + threadIdx.x / kLanes;
  const int col = threadIdx.x % kLanes * 8;
  float o[kDeltaRows][8], d[kDeltaRows][8];
#pragma unroll
  for (int r = 0; r < kDeltaRows; ++r) {
    const int64_t row = first + r * kRowsPerPass;
    if (row < rows) {
      load_floats<8>(a.out + row * D + col, o[r]);
      load_floats<8>(a.dout + row * D + col, d[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < kDeltaRows; ++r) {
    const int64_t row = first + r * kRowsPerPass;
    float sum = 0.0f;
    if (row < rows)
#pragma unroll
      for (int k = 0; k < 8; ++k) sum += o[r][k] * d[r][k];
    for (int m = kLanes / 2; m > 0; m /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
    if (row >= rows) continue;
    const int64_t token = row / a.H;
    const int head = static_cast<int>(row % a.H);
    if (col == 0) a.delta[static_cast<int64_t>(head) * a.T + token] = sum;
    // Eight consecutive floats in either layout: the tiled one keeps runs of 8 columns together.
    float4* zero = reinterpret_cast<float4*>(
        dq_accum + (kTiled ? dq_tiled_index<D>(a.T, head, token, col) : row * D + col));
    zero[0] = zero[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// The block: kBackwardKeys keys (16 per warp) of one kv head against every query tile of kRows rows at or
// after them (and, with a window, before window_query_end; bidirectional, every query tile of the segment),
// for each query head of the group. Per step (query tile, head), warps own their 16 keys, so the products
// are computed transposed: S^T = K Q^T, P^T, dV += P^T dO, dP^T = V dO^T, dS^T, dK += dS^T Q (in
// kSubRows-query passes); dS^T then goes to shared memory, and after a barrier the warps split the tile's
// dQ = dS K (16 queries x kDqCols columns each) and add it to dq_accum. Q, dO, lse and delta of the next
// step load (cp.async) during this one.
constexpr int kBackwardWarps = kBackwardKeys / 16;
constexpr int kBackwardThreads = 32 * kBackwardWarps;

template <int D>
struct BackwardShape {
  static constexpr int kRows = kBackwardRows;
  // Queries per S^T .. dK pass within a step: fewer accumulators beside dK and dV (D128 would spill) at the
  // price of loading K's and V's fragments once per pass.
  static constexpr int kSubRows = D == 128 ? 32 : 64;
  static constexpr int kLd = ld<D>(), kLdS = kRows + 8;  // row pitches of the K/V/Q/dO tiles and of dS^T
  static constexpr int kQGroups = kRows / 16, kDqParts = kBackwardWarps / kQGroups, kDqCols = D / kDqParts;
  static constexpr int kSmem =
      (2 * kBackwardKeys * kLd + 4 * kRows * kLd + kBackwardKeys * kLdS) * 2 + 4 * kRows * 4;
  static_assert(kBackwardWarps % kQGroups == 0 && kDqCols % 16 == 0 && 2 * kRows <= kBackwardThreads);
};

template <int D, bool kWindowed, bool kCausal>
__global__ void __launch_bounds__(kBackwardThreads, 1)
    backward_kernel(const Args a, const BackwardScratch scratch) {
  static_assert(kCausal || !kWindowed, "a sliding window is causal");
  using Shape = BackwardShape<D>;
  constexpr int kRows = Shape::kRows, kSubRows = Shape::kSubRows, kLd = Shape::kLd, kLdS = Shape::kLdS;
  const int block = static_cast<int>(blockIdx.x), slot = block / a.Hkv, kv_head = block % a.Hkv;
  if (slot >= scratch.key_tiles[0]) return;
  const int4 seg = a.schedule.items[scratch.key_tiles[1 + slot]];  // {start, real, len, key0}
  const int64_t start = seg.x;
  const int real = seg.y, key0 = seg.w, group = a.H / a.Hkv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int warp_key0 = key0 + warp * 16;
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  if (key0 < real) {
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* sk = reinterpret_cast<__nv_bfloat16*>(smem);
    __nv_bfloat16* sv = sk + kBackwardKeys * kLd;
    __nv_bfloat16* sq = sv + kBackwardKeys * kLd;  // two buffers each of Q and dO
    __nv_bfloat16* sdo = sq + 2 * kRows * kLd;
    __nv_bfloat16* sds = sdo + 2 * kRows * kLd;                          // dS^T: kBackwardKeys x kRows
    float* slse = reinterpret_cast<float*>(sds + kBackwardKeys * kLdS);  // two buffers each of lse, delta
    float* sdelta = slse + 2 * kRows;
    load_tile_async<D, kBackwardKeys, kBackwardThreads>(sk, a.k, start, key0, real, a.Hkv, kv_head);
    load_tile_async<D, kBackwardKeys, kBackwardThreads>(sv, a.v, start, key0, real, a.Hkv, kv_head);
    cp_async_commit();

    // Steps run over the query tiles at or after the keys (causal; bidirectional, from the segment's
    // start) that hold a query attending one of them (window), head by head. query_end > query0: the first
    // query tile always does.
    const int query0 = kCausal ? key0 : 0;
    const int query_end = kWindowed ? window_query_end(key0, kBackwardKeys, real, a.window) : real;
    const int row_tiles = (query_end - query0 + kRows - 1) / kRows, steps = group * row_tiles;
    auto load_step = [&](int step) {
      const int buf = step & 1, head = kv_head * group + step / row_tiles;
      const int row0 = query0 + step % row_tiles * kRows;
      load_tile_async<D, kRows, kBackwardThreads>(sq + buf * kRows * kLd, a.q, start, row0, real, a.H, head);
      load_tile_async<D, kRows, kBackwardThreads>(sdo + buf * kRows * kLd, a.dout, start, row0, real, a.H,
                                                  head);
      if (threadIdx.x < 2 * kRows) {  // lse by the first kRows threads, delta by the next
        const bool is_lse = threadIdx.x < kRows;
        const int r = threadIdx.x % kRows, i = row0 + r;
        const int64_t at = static_cast<int64_t>(head) * a.T + start + (i < real ? i : 0);
        cp_async_4((is_lse ? slse : sdelta) + buf * kRows + r, (is_lse ? a.lse : a.delta) + at,
                   i < real ? 4 : 0);
      }
      cp_async_commit();
    };
    load_step(0);

    const float scale_log2 = a.scale * kLog2e;
    const int m = lane / 8, r = lane % 8;  // ldmatrix roles: matrix and row
    for (int step = 0; step < steps; ++step) {
      // The buffers step + 1 fills were last read before the previous step's second barrier.
      if (step + 1 < steps) {
        load_step(step + 1);
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();  // this step's tiles are visible; every warp is done with the previous step's dS^T
      const int buf = step & 1, head = kv_head * group + step / row_tiles;
      const int row0 = query0 + step % row_tiles * kRows;

      // S^T through dK per kSubRows queries; warps whose keys all lie after every real query of a
      // sub-tile (bidirectional: warps of pad keys, and sub-tiles of pad queries), or (window) before the
      // window of its first query sub0 (last key warp_key0 + 15 <= sub0 - window), have P = dS = 0 there
      // and skip it (its dS^T columns are never read: see dQ below).
#pragma unroll 1
      for (int sub0 = row0; sub0 < row0 + kRows; sub0 += kSubRows) {
        const bool idle =
            kCausal ? warp_key0 >= min(sub0 + kSubRows, real) : warp_key0 >= real || sub0 >= real;
        if (idle || (kWindowed && warp_key0 + 15 + a.window <= sub0)) continue;
        const __nv_bfloat16* q = sq + (buf * kRows + sub0 - row0) * kLd;
        const __nv_bfloat16* dout = sdo + (buf * kRows + sub0 - row0) * kLd;
        const float* lse = slse + buf * kRows + sub0 - row0;
        const float* delta = sdelta + buf * kRows + sub0 - row0;
        float st[kSubRows / 8][4] = {};
        gemm_abt<kSubRows / 8, D>(st, sk + warp * 16 * kLd, q, kLd, kLd);
        // The diagonal (bidirectional: pad keys), the segment's end, or the window's lower edge (j <= i -
        // window for the sub-tile's last query i = sub0 + kSubRows - 1 and the warp's first key j =
        // warp_key0).
        const bool edge = (kCausal ? sub0 < warp_key0 + 16 : warp_key0 + 16 > real) ||
                          sub0 + kSubRows > real || (kWindowed && warp_key0 + a.window < sub0 + kSubRows);
#pragma unroll
        for (int n = 0; n < kSubRows / 8; ++n) {
          const float2 l = *reinterpret_cast<const float2*>(lse + 8 * n + 2 * t);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = warp_key0 + g + 8 * (e / 2), i = sub0 + 8 * n + 2 * t + e % 2;
            const bool masked =
                edge && ((kCausal ? j > i : j >= real) || i >= real || (kWindowed && i - j >= a.window));
            st[n][e] =
                masked ? 0.0f : exp2f(fmaf(st[n][e], scale_log2, -(e % 2 ? l.y : l.x) * kLog2e));  // P^T
          }
        }
        uint32_t frag[kSubRows / 16][4];
        to_a_fragments<kSubRows>(frag, st);
        gemm_rb<D / 8, kSubRows>(dv, frag, dout, kLd);

        float dpt[kSubRows / 8][4] = {};
        gemm_abt<kSubRows / 8, D>(dpt, sv + warp * 16 * kLd, dout, kLd, kLd);
#pragma unroll
        for (int n = 0; n < kSubRows / 8; ++n) {
          const float2 d = *reinterpret_cast<const float2*>(delta + 8 * n + 2 * t);
#pragma unroll
          for (int e = 0; e < 4; ++e) st[n][e] *= dpt[n][e] - (e % 2 ? d.y : d.x);  // dS^T
        }
        to_a_fragments<kSubRows>(frag, st);
        gemm_rb<D / 8, kSubRows>(dk, frag, q, kLd);
        // The A fragments are the warp's dS^T rows: [kk][0] row g, columns 16kk + 2t (+1); [1] row g + 8;
        // [2] and [3] the same rows 8 columns on.
        uint32_t* rows = reinterpret_cast<uint32_t*>(sds + (warp * 16 + g) * kLdS + sub0 - row0) + t;
#pragma unroll
        for (int kk = 0; kk < kSubRows / 16; ++kk) {
          rows[8 * kk] = frag[kk][0];
          rows[8 * kk + 4 * kLdS] = frag[kk][1];
          rows[8 * kk + 4] = frag[kk][2];
          rows[8 * kk + 4 * kLdS + 4] = frag[kk][3];
        }
      }
      __syncthreads();  // dS^T is complete

      // dQ of queries q0..q0+15, columns col0..col0+kDqCols-1: sum over the 16-key chunks that reach them
      // (key <= query, bidirectional key < real; with a window, from the chunk holding q0 - window + 1, the
      // first key of q0's window: chunk c reaches some query iff its last key key0 + 16 c + 15 > q0 -
      // window), all of them rows of warps that took part above (a warp skips a sub-tile only if its last
      // key <= sub0 - window, and sub0 <= q0).
      const int q0 = row0 + 16 * (warp % Shape::kQGroups), col0 = warp / Shape::kQGroups * Shape::kDqCols;
      const int chunks = min(kBackwardWarps, kCausal ? (q0 - key0) / 16 + 1 : (real - key0 + 15) / 16);
      const int first = kWindowed ? max(q0 - a.window + 1 - key0, 0) / 16 : 0;
      if (q0 < real && (!kWindowed || first < chunks)) {  // (a query past every window adds nothing)
        float acc[Shape::kDqCols / 8][4] = {};
        for (int kk = first; kk < chunks; ++kk) {
          uint32_t ds[4];  // A = dS, read transposed from dS^T
          ldmatrix_x4_trans(ds, sds + (kk * 16 + r + (m >> 1) * 8) * kLdS + q0 - row0 + (m & 1) * 8);
#pragma unroll
          for (int n = 0; n < Shape::kDqCols / 8; n += 2) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, sk + (kk * 16 + r + (m & 1) * 8) * kLd + col0 + n * 8 + (m >> 1) * 8);
            mma_bf16(acc[n], ds, b[0], b[1]);
            mma_bf16(acc[n + 1], ds, b[2], b[3]);
          }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int i = q0 + g + 8 * half;
          if (i >= real) continue;
          float* row = scratch.dq_accum + ((start + i) * a.H + head) * D + col0 + 2 * t;
#pragma unroll
          for (int n = 0; n < Shape::kDqCols / 8; ++n)
            red_add_f32x2(row + 8 * n, acc[n][2 * half], acc[n][2 * half + 1]);
        }
      }
    }
  }
  const int warp_keys = min(16, seg.z - warp_key0), warp_real = real - warp_key0;
  const float dk_scales[2] = {a.scale, a.scale}, dv_scales[2] = {1.0f, 1.0f};
  store_rows<D>(a.dk, dk, dk_scales, start + warp_key0, warp_keys, warp_real, a.Hkv, kv_head);
  store_rows<D>(a.dv, dv, dv_scales, start + warp_key0, warp_keys, warp_real, a.Hkv, kv_head);
}

// The backward's work list: the schedule items that start a key tile, segment by segment, the segments by
// decreasing number of query tiles their first key tile visits (after it, and within reach of its keys'
// windows; bidirectional, all of the segment's unless the tile's keys are all pads). key_tiles[0] gets their
// count.
__global__ void __launch_bounds__(kOrderThreads) order_kernel(const Args a, const BackwardScratch scratch) {
  const int window = a.window;
  const bool causal = a.causal;
  const int total = order_segments_by_work(
      a.schedule, kBackwardKeys,
      [window, causal](int4 item) {
        if (!causal) return item.w < item.y ? (item.y + kBackwardRows - 1) / kBackwardRows : 0;
        const int end = window > 0 ? window_query_end(item.w, kBackwardKeys, item.y, window) : item.y;
        return (max(end - item.w, 0) + kBackwardRows - 1) / kBackwardRows;
      },
      scratch.key_tiles + 1, scratch.key_capacity);
  if (threadIdx.x == 0) {
    scratch.key_tiles[0] = min(total, scratch.key_capacity);
    *scratch.next_tile = 0;
  }
}

// dq = scale * dq_accum in bf16, eight elements per thread. Writes nothing for an inconsistent segment
// table (no schedule items), like the other kernels.
template <int D, bool kTiled>
__global__ void __launch_bounds__(256)
    dq_convert_kernel(const Args a, const float* dq_accum, int64_t elements) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i >= elements || *a.schedule.count == 0) return;
  const int64_t at = kTiled ? dq_tiled_index<D>(a.T, static_cast<int>(i / D % a.H), i / (int64_t{a.H} * D),
                                                static_cast<int>(i % D))
                            : i;
  const float4 x = *reinterpret_cast<const float4*>(dq_accum + at);
  const float4 y = *reinterpret_cast<const float4*>(dq_accum + at + 4);
  const float s = a.scale;
  *reinterpret_cast<uint4*>(a.dq + i) = make_uint4(pack_bf16(x.x * s, x.y * s), pack_bf16(x.z * s, x.w * s),
                                                   pack_bf16(y.x * s, y.y * s), pack_bf16(y.z * s, y.w * s));
}

template <int D, bool kWindowed, bool kCausal>
void launch_backward_kernel(const Args& a, const BackwardScratch& scratch, cudaStream_t stream) {
  constexpr int kSmem = BackwardShape<D>::kSmem;
  const auto kernel = backward_kernel<D, kWindowed, kCausal>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  (void)configured;  // a failure resurfaces as the launch error, which the caller checks
  const unsigned blocks = static_cast<unsigned>(scratch.key_capacity) * static_cast<unsigned>(a.Hkv);
  kernel<<<blocks, kBackwardThreads, kSmem, stream>>>(a, scratch);
}

}  // namespace

template <int D, bool kTiled>
void launch_backward_prologue(const Args& a, const BackwardScratch& scratch, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(a.T) * a.H;
  const int64_t blocks = (rows + delta_rows_per_block<D>() - 1) / delta_rows_per_block<D>();
  delta_kernel<D, kTiled><<<static_cast<unsigned>(blocks), kDeltaThreads, 0, stream>>>(a, scratch.dq_accum);
  order_kernel<<<1, kOrderThreads, 0, stream>>>(a, scratch);
}

template <int D, bool kTiled>
void launch_dq_convert(const Args& a, const BackwardScratch& scratch, cudaStream_t stream) {
  const int64_t elements = static_cast<int64_t>(a.T) * a.H * D;
  dq_convert_kernel<D, kTiled>
      <<<static_cast<unsigned>((elements / 8 + 255) / 256), 256, 0, stream>>>(a, scratch.dq_accum, elements);
}

template <int D>
void launch_backward(const Args& a, const BackwardScratch& scratch, cudaStream_t stream) {
  launch_backward_prologue<D, false>(a, scratch, stream);
  with_mask(a, [&](auto windowed, auto causal) {
    launch_backward_kernel<D, decltype(windowed)::value, decltype(causal)::value>(a, scratch, stream);
  });
  launch_dq_convert<D, false>(a, scratch, stream);
}

template void launch_backward_prologue<64, true>(const Args&, const BackwardScratch&, cudaStream_t);
template void launch_backward_prologue<128, true>(const Args&, const BackwardScratch&, cudaStream_t);
template void launch_dq_convert<64, true>(const Args&, const BackwardScratch&, cudaStream_t);
template void launch_dq_convert<128, true>(const Args&, const BackwardScratch&, cudaStream_t);
template void launch_backward<64>(const Args&, const BackwardScratch&, cudaStream_t);
template void launch_backward<128>(const Args&, const BackwardScratch&, cudaStream_t);

}  // namespace pt::ops::cuda::attn
