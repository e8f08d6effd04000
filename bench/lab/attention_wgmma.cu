// Kernel lab: varlen causal attention forward with Hopper warpgroup MMA (wgmma), FlashAttention-3 style.
// Status (2026-12-02): compiled and reviewed against the PTX ISA, not yet run on a GPU. Run
// `bench_attention_lab --probe` (its layouts), then `--check-only` (against the production kernel), then
// the timing; it moves into ops/cuda/ only once it checks out and beats the production kernel.
//
// One CTA of 256 threads per (query tile of kBlockM = 128 rows of one segment, head): warpgroup wg (threads
// 128 wg .. 128 wg + 127) owns query rows 64 wg .. 64 wg + 63 of the tile. K and V tiles of kBlockN = 128
// keys stream through two shared-memory stages filled by cp.async from all threads (the first version:
// no producer warp, no TMA, no mbarriers); every K/V load of step j + 1 is in flight while step j computes.
// Per step and warpgroup:
//   S[64 x 128] = Q[64 x D] K^T     wgmma m64n128k16, A = Q and B = K both from shared memory (K-major)
//   mask (causal, segment end), online softmax in registers (running max and sum per row, base 2)
//   O[64 x D] += P[64 x 128] V       wgmma m64nDk16, A = P from registers (bf16), B = V from shared memory
//                                    read transposed (MN-major, imm-trans-b = 1)
// and lse = max * scale + log(sum) per row at the end, as the production kernel (ops/cuda/attention_*).
// Not yet FA3: the two warpgroups meet at block barriers and wait for each of their MMAs, so the tensor
// cores idle during softmax. Next steps once this version checks out: a producer warp loading K/V with TMA
// into mbarrier-guarded stages (per-segment bounds via the tensor map's OOB fill or a masked last tile),
// named barriers instead of __syncthreads, and S(j+1) = Q K(j+1)^T issued before softmax(j) (two S buffers).
//
// Shared layout of every tile (Q: kBlockM rows, K and V: kBlockN rows; a row is one token's D values):
// [D/64 column blocks][rows][64 bf16 = 128 bytes], 128-byte swizzled: inside each 8-row group (1024 bytes)
// the 16-byte chunk c of row r sits at chunk c ^ (r % 8). This is wgmma's "128B swizzling" atom
// (Swizzle<3,4,3> on byte addresses: bits 4-6 ^= bits 7-9), so every tile starts on a 1024-byte boundary.
// K and V share the layout: K is read K-major (its rows are the N dimension, the contraction runs along
// the row), V is read MN-major (its rows are the contraction dimension, N runs along the row).
//
// Encoding rules from the PTX ISA, section 9.7.15.5.1 "Register Fragments and Shared Memory Matrix
// Layouts": the accumulator and register-A fragments of m64nNk16 (figures "WGMMA .m64nNk16 register
// fragment layout for matrix A / accumulator D"), the canonical layouts and the meaning of the leading /
// stride byte offsets per major-ness (9.7.15.5.1.2.1), and the descriptor bit fields (9.7.15.5.1.2.2
// "Matrix Descriptor Format"); cross-checked against the descriptor's field list in CUTLASS
// (cute/arch/mma_sm90_desc.hpp, cute/atom/mma_traits_sm90_gmma.hpp make_gmma_desc and the CLayout /
// ALayout fragment layouts). The async-proxy fence after generic shared-memory writes is from 9.7.15.7.1
// ("wgmma.fence") and the PTX memory-consistency model (proxies). Section numbers are those of PTX ISA 9.x;
// they shift between versions, the titles do not. Each rule is restated, with its source, at the code that
// depends on it. The layout arithmetic (load_tile's swizzle against the descriptors' canonical layouts, both
// operands, both head dims, every k-step) was also checked exhaustively off-GPU by an emulation of the PTX
// address formula; what only a GPU can confirm is that the hardware follows that formula (--probe).
//
// Localising a failure: lse depends only on S = Q K^T (Q/K layout, desc_k_major, the accumulator layout,
// masking and softmax), out also on P and V (the register-A fragment, desc_v). lse right and out wrong
// points at desc_v or the P fragments; both wrong at every length points at load_tile's swizzle or
// desc_k_major; errors only on segments longer than one step (128 keys) point at the pipeline (stages,
// cp.async group counting, barriers). Before any of that, bench_attention_lab --probe runs one tile of both
// products on exact integer inputs (probe_kernel below) and prints which elements land wrong.
#include "attention_wgmma.h"

#include <cuda_bf16.h>

#include <climits>
#include <cmath>
#include <string>

#include "core/error.h"
#include "ops/cuda/block_scan.cuh"

// wgmma and setmaxnreg exist only in the arch-specific sm_90a target; elsewhere the kernel is a stub.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PT_LAB_SM90A 1
#else
#define PT_LAB_SM90A 0
#endif

namespace pt::lab {

namespace {

constexpr int kBlockM = 128;  // query rows per CTA: two consumer warpgroups of 64 rows
constexpr int kBlockN = 128;  // keys per step
constexpr int kThreads = 256;
constexpr int kScheduleThreads = 1024;

// Status words the schedule and the forward kernel leave in scratch after the work list.
enum StatusWord { kCount = 0, kBadSegment = 1, kNeedsSm90a = 2, kStatusWords = 4 };

// Shared memory: the Q tile, then two stages of {K tile, V tile}, plus slack to align the base to 1024.
template <int D>
__host__ __device__ constexpr int tile_bytes(int rows) {
  return rows * D * 2;
}
template <int D>
constexpr int smem_bytes() {
  return 1024 + tile_bytes<D>(kBlockM) + 2 * 2 * tile_bytes<D>(kBlockN);
}

int capacity_for(int T, int segments) {
  return static_cast<int>((int64_t{T} + int64_t{segments} * (kBlockM - 1)) / kBlockM);
}

struct Args {
  const __nv_bfloat16 *q, *k, *v;
  __nv_bfloat16* out;
  float* lse;
  const int4* items;  // {segment start token, real tokens, length, first row of the tile}
  int* status;
  int T, H, Hkv;
  float scale;
};

// The production schedule (ops/cuda/attention_schedule.cu) with kBlockM-row tiles: items in segment
// order, ceil(len / kBlockM) per segment; an inconsistent table leaves zero items and names the segment.
__global__ void __launch_bounds__(kScheduleThreads)
    schedule_kernel(const int32_t* cu, const int32_t* valid_lens, int segments, int tokens, int4* items,
                    int capacity, int* status) {
  __shared__ int bad;
  if (threadIdx.x == 0) {
    bad = (cu[0] != 0 || cu[segments] != tokens) ? 0 : INT_MAX;
    status[kNeedsSm90a] = 0;
  }
  __syncthreads();
  int base = 0;
  for (int chunk = 0; chunk < segments; chunk += kScheduleThreads) {
    const int s = chunk + static_cast<int>(threadIdx.x);
    int start = 0, len = 0, real = 0;
    if (s < segments) {
      start = cu[s];
      len = cu[s + 1] - start;
      real = valid_lens ? valid_lens[s] : len;
      if (start < 0 || len < 0 || cu[s + 1] > tokens || real < 0 || real > len) {
        atomicMin(&bad, s);
        len = real = 0;
      }
    }
    const int tiles = (len + kBlockM - 1) / kBlockM;
    int total = 0;
    const int first = base + ops::cuda::block_exclusive_scan<kScheduleThreads>(tiles, &total);
    for (int t = 0; t < tiles && first + t < capacity; ++t)
      items[first + t] = make_int4(start, real, len, t * kBlockM);
    base += total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    status[kCount] = (bad != INT_MAX || base > capacity) ? 0 : base;
    status[kBadSegment] = bad;
  }
}

#if PT_LAB_SM90A

constexpr float kLog2e = 1.4426950408889634f;

// Byte offset of 16-byte chunk `chunk` (0 .. D/8-1) of row `row` in a [D/64][rows][64] bf16 tile with the
// 128-byte swizzle (see the file comment).
__device__ inline uint32_t swizzled_offset(int row, int chunk, int rows) {
  return static_cast<uint32_t>((chunk / 8) * rows * 128 + row * 128 + ((chunk % 8) ^ (row % 8)) * 16);
}

__device__ inline uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Starts copying rows [row0, row0 + kRows) of one head of a [T, heads, D] tensor, segment-relative to the
// token `start`, into the swizzled tile at shared address `tile`; rows at or past `limit` (the segment's
// real tokens) become zeros so that masked products never meet another segment's values or NaN.
template <int D, int kRows>
__device__ inline void load_tile(uint32_t tile, const __nv_bfloat16* src, int64_t start, int row0, int limit,
                                 int heads, int head) {
  constexpr int kChunks = D / 8;
  static_assert(kRows * kChunks % kThreads == 0);
#pragma unroll
  for (int i = 0; i < kRows * kChunks / kThreads; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads, r = c / kChunks, chunk = c % kChunks;
    const bool real = row0 + r < limit;
    const int64_t token = start + (real ? row0 + r : 0);  // a valid address even when nothing is read
    asm volatile(
        "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(tile + swizzled_offset(r, chunk, kRows)),
        "l"(src + (token * heads + head) * D + chunk * 8), "r"(real ? 16 : 0)
        : "memory");
  }
}
// cp.async.wait_group N (PTX "cp.async.wait_group / cp.async.wait_all"): waits until at most the N most
// recent groups of this thread are pending; it makes this thread's copies complete and visible to this thread
// only, hence the barrier after.
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// cp.async (non-bulk) writes through the generic proxy and wgmma reads shared memory through the async proxy
// (PTX 9.7.15 overview step 2 and 9.7.15.7.1: "an async proxy fence must be used to establish an ordering
// between prior writes to shared memory matrices and subsequent reads of the same matrices in a
// wgmma.mma_async"). So: cp.async.wait_group (the writes are done), fence.proxy.async by every writing
// thread, then the CTA barrier that hands the tile to both warpgroups, the order CUTLASS uses for thread-
// written shared memory read by the async proxy (fence_view_async_shared, then a barrier). The reverse
// direction (a stage refilled by cp.async after wgmma read it) needs no proxy fence: wgmma.wait_group
// returns once the MMAs, their shared-memory reads included, have completed (9.7.15.7.3), and a barrier
// after it orders every warpgroup's wait before any thread's refill (CUTLASS's cp.async GMMA mainloop
// sm90_mma_multistage_gmma_ss refills a stage right after warpgroup_wait<0> the same way).
__device__ inline void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Matrix descriptor (PTX 9.7.15.5.1.2.2): bits 0-13 (start address & 0x3FFFF) >> 4, 16-29 leading-dimension
// byte offset >> 4, 32-45 stride-dimension byte offset >> 4, 49-51 base offset, 62-63 swizzle mode (1 =
// 128-byte swizzle; CUTLASS LayoutType::B128 = 1). The base offset is 0 "when the repeating pattern ...
// starts" on a 1024-byte boundary (128-byte swizzle), else (pattern start >> 7) & 7: every tile here starts
// on a 1024-byte boundary (the aligned base, tile sizes multiples of 1024), and the only starts that are not
// are the K-major k-step advances of 32, 64 or 96 bytes, whose bits 7-9 stay 0 (CUTLASS likewise keeps
// base_offset 0 and advances the start address; its debug check is exactly (start & 0b1110000000) == 0).
__device__ inline uint64_t make_desc(uint32_t start, uint32_t leading_bytes, uint32_t stride_bytes) {
  return static_cast<uint64_t>((start & 0x3FFFF) >> 4) | static_cast<uint64_t>(leading_bytes >> 4) << 16 |
         static_cast<uint64_t>(stride_bytes >> 4) << 32 | uint64_t{1} << 62;
}

// K-major operand, k-step kk (contraction elements 16 kk .. 16 kk + 15) of a swizzled tile whose column
// blocks are `rows` rows apart, starting at the tile's row `first_row` (a multiple of 8). Canonical
// K-major 128B layout ((8,m),(T,2k)):((8T,SBO),(1,T)), T = 8 bf16: rows 128 bytes apart, 8-row groups
// SBO = 1024 bytes apart ("the offset from the first 8 rows to the next 8 rows", 9.7.15.5.1.2.1.2); the
// leading byte offset is unused for swizzled K-major layouts ("not used, assumed to be 1", 9.7.15.5.1.2.1.1;
// CUTLASS make_gmma_desc<Major::K> encodes 1 = 16 bytes). The 16 elements of a k-step are 32 bytes of a
// 128-byte row: block kk / 4, bytes 32 (kk % 4) on. The swizzle applies to the final address bits (16-byte
// chunk bits 4-6 ^= row bits 7-9), so a start 32 (kk % 4) bytes into the atom reads logical chunks
// 2 (kk % 4) and 2 (kk % 4) + 1 of row r at chunks (2 (kk % 4) + c) ^ (r % 8), where load_tile put them.
// This is how CUTLASS's DescriptorIterator (start address + k offset) and DeepGEMM walk K inside an atom.
__device__ inline uint64_t desc_k_major(uint32_t tile, int rows, int first_row, int kk) {
  return make_desc(tile + static_cast<uint32_t>((kk / 4) * rows * 128 + first_row * 128 + (kk % 4) * 32), 16,
                   1024);
}

// V as the MN-major B operand of O = P V (imm-trans-b = 1), k-step kk (keys 16 kk .. 16 kk + 15). Canonical
// MN-major 128B layout ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): 64 consecutive d values per 128-byte row, the
// next 64 d values (column block) LBO = kBlockN * 128 bytes on, each key row 128 bytes on, the next 8 keys
// SBO = 1024 bytes on. A k-step covers 16 keys = 2048 bytes, a whole number of atoms. For MN-major the two
// offsets swap roles against K-major: PTX 9.7.15.5.1.2.1.1 "MN-Major, swizzled layouts: [LBO is the] offset
// from the first (swizzle-byte-size/16) rows to the next (swizzle-byte-size/16) rows" (8 rows of 128-bit
// elements = 64 bf16 along N), 9.7.15.5.1.2.1.2 "[SBO is the] offset from the first 8 columns to the next 8
// columns" (8 keys along K); CUTLASS make_gmma_desc<Major::MN> for B128, ((8,n),(8,k)):((1,LBO),(8,SBO)) in
// 16-byte units, agrees. At D = 64 (N = 64) LBO is never used.
__device__ inline uint64_t desc_v(uint32_t tile, int kk) {
  return make_desc(tile + static_cast<uint32_t>(kk * 16 * 128), kBlockN * 128, 1024);
}

__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// wgmma.fence (PTX 9.7.15.7.1) orders earlier register accesses before a wgmma.mma_async that uses the same
// registers as accumulator or as A fragments; wgmma.wait_group (9.7.15.7.3) must precede any access to them
// after the MMA. The compiler does not know either: an empty volatile asm that "writes" every register pins
// the array's accesses on the right side of the fence / wait (CUTLASS's warpgroup_fence_operand, which FA3
// applies to the accumulators and to the register-A operand alike).
template <int N>
__device__ inline void pin(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N, int M>
__device__ inline void pin(uint32_t (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

#define PT_LAB_F8(d, i)                                                                       \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])

// Accumulator fragment of m64nNk16 (f32), per thread of the warpgroup with w = warp % 4, g = lane / 4,
// t = lane % 4: d[4i + 2h + e] is row 16 w + g + 8 h, column 8 i + 2 t + e (h, e in {0, 1}).
// PTX 9.7.15.5.1.1.1 figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix D"; CUTLASS
// CLayout_64xN
// ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512)) over (m + 64 n) says the same. The softmax (row max and sum
// over the quad of threads t = 0..3 that share g), the mask and the final store all index it this way.

// d[64] += A[64 x 16] B[16 x 128] with A and B K-major in shared memory (descriptors a and b). Operands after
// the descriptors (PTX 9.7.15.5.2): scale-d (predicate; false computes D = A B), imm-scale-a/b (1: no
// negation), imm-trans-a/b (0: K-major). scale-d stays true: the caller zeroes d before the first k-step,
// which ptxas folds into a zero-accumulator first HGMMA (RZ in the SASS), the same as scale-d = 0 there.
__device__ inline void wgmma_m64n128k16_ss(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : PT_LAB_F8(d, 0), PT_LAB_F8(d, 8), PT_LAB_F8(d, 16), PT_LAB_F8(d, 24), PT_LAB_F8(d, 32),
        PT_LAB_F8(d, 40), PT_LAB_F8(d, 48), PT_LAB_F8(d, 56)
      : "l"(a), "l"(b), "r"(1));
}

// Register A fragment of m64nNk16 (bf16), per thread as above: a[0] row 16 w + g, columns 2 t, 2 t + 1;
// a[1] row + 8, same columns; a[2] row 16 w + g, columns 2 t + 8, 2 t + 9; a[3] row + 8, those columns
// (the low half of each register holds the lower column, elements a0..a7 low to high). PTX 9.7.15.5.1.1.1
// figure "register fragment layout for matrix A": the mma.sync m16n8k16 A layout per warp, warp w owning
// rows 16 w ..; CUTLASS defines ALayout_64x16 as CLayout_64x16, i.e. a 64 x 16 block of the accumulator
// is already an A fragment (see to_a_fragments). The rs form has no imm-trans-a (A in registers is K-major).

// d[N/2] += A[64 x 16] (registers) B[16 x N], B MN-major in shared memory (descriptor b, imm-trans-b 1).
template <int N>
__device__ inline void wgmma_m64nNk16_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b) {
  static_assert(N == 64 || N == 128);
  if constexpr (N == 64) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n"
        "}\n"
        : PT_LAB_F8(d, 0), PT_LAB_F8(d, 8), PT_LAB_F8(d, 16), PT_LAB_F8(d, 24)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  } else {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n"
        "}\n"
        : PT_LAB_F8(d, 0), PT_LAB_F8(d, 8), PT_LAB_F8(d, 16), PT_LAB_F8(d, 24), PT_LAB_F8(d, 32),
          PT_LAB_F8(d, 40), PT_LAB_F8(d, 48), PT_LAB_F8(d, 56)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
}

#undef PT_LAB_F8

__device__ inline uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The accumulator of a 64 x 128 product as the register A operand of eight k-steps: k-step kk (columns
// 16 kk .. 16 kk + 15, accumulator column blocks 2 kk and 2 kk + 1) is s[8 kk .. 8 kk + 7] in order.
__device__ inline void to_a_fragments(const float (&s)[64], uint32_t (&p)[8][4]) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) p[kk][r] = pack_bf16(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

// Max and sum over the four threads of a quad, which together hold one accumulator row.
__device__ inline float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// A tile of pads only (row0 >= real): out rows zero and lse 0, as the production kernel writes them.
template <int D>
__device__ void write_pad_tile(const Args& a, int64_t start, int row0, int rows, int head) {
  constexpr int kChunks = D / 8;
  for (int c = static_cast<int>(threadIdx.x); c < rows * kChunks; c += kThreads) {
    const int64_t token = start + row0 + c / kChunks;
    *reinterpret_cast<uint4*>(a.out + (token * a.H + head) * D + (c % kChunks) * 8) = make_uint4(0, 0, 0, 0);
  }
  for (int r = static_cast<int>(threadIdx.x); r < rows; r += kThreads)
    a.lse[static_cast<int64_t>(head) * a.T + start + row0 + r] = 0.0f;
}

#endif  // PT_LAB_SM90A

// Registers: __launch_bounds__(256, 1) lets ptxas use up to 255 per thread; the build reports 212 (D = 128)
// and 154 (D = 64) with no local memory (cuobjdump --dump-resource-usage: LOCAL:0). setmaxnreg (PTX
// "setmaxnreg") only moves registers between warpgroups of a warp-specialised kernel (producer down,
// consumers up); with two identical consumer warpgroups and no producer there is nothing to move, so it is
// not used yet.
template <int D>
__global__ void __launch_bounds__(kThreads, 1) forward_kernel(const Args a) {
#if PT_LAB_SM90A
  if (static_cast<int>(blockIdx.x) >= a.status[kCount]) return;
  const int4 seg = a.items[blockIdx.x];  // {start, real, len, row0}
  const int64_t start = seg.x;
  const int real = seg.y, len = seg.z, row0 = seg.w;
  // GQA: query head h reads kv head h / (H / Hkv), as ops/cuda/attention_forward.cu.
  const int head = static_cast<int>(blockIdx.y), kv_head = head / (a.H / a.Hkv);
  if (row0 >= real) {
    write_pad_tile<D>(a, start, row0, min(kBlockM, len - row0), head);
    return;
  }

  // The 128-byte swizzle pattern repeats every 1024 bytes and the descriptors assume base offset 0, so every
  // tile starts on a 1024-byte boundary: the dynamic base (only 16-byte aligned, and placed after any static
  // shared memory) is rounded up inside the 1024 bytes of slack that smem_bytes() adds.
  extern __shared__ unsigned char smem_raw[];
  constexpr uint32_t kQBytes = tile_bytes<D>(kBlockM), kKVBytes = tile_bytes<D>(kBlockN);
  const uint32_t sq = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const auto sk = [&](int stage) { return sq + kQBytes + static_cast<uint32_t>(stage) * 2 * kKVBytes; };
  const auto sv = [&](int stage) { return sk(stage) + kKVBytes; };

  const int wg = static_cast<int>(threadIdx.x) / 128, warp = static_cast<int>(threadIdx.x) / 32 % 4;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int wg_row0 = row0 + 64 * wg;               // the warpgroup's first query row in the segment
  const int thread_row0 = wg_row0 + 16 * warp + g;  // this thread's rows: thread_row0 and thread_row0 + 8

  // cp.async groups in commit order: Q, K0, V0, then K(j+1), V(j+1) at the top of step j. Waits: step j with
  // a prefetch has V(j), K(j+1), V(j+1) as its three newest groups, so wait_group 3 completes K(j) (and Q),
  // wait_group 2 then V(j); the last step has K(j), V(j) newest: wait_group 1, then 0. Rows at or past the
  // segment's real length are zero-filled (src-size 0), never read from another segment.
  load_tile<D, kBlockM>(sq, a.q, start, row0, real, a.H, head);
  cp_async_commit();
  const int key_end = min(real, row0 + kBlockM);  // causal: the tile's last query sees keys < row0 + kBlockM
  const int steps = (key_end + kBlockN - 1) / kBlockN;
  load_tile<D, kBlockN>(sk(0), a.k, start, 0, real, a.Hkv, kv_head);
  cp_async_commit();
  load_tile<D, kBlockN>(sv(0), a.v, start, 0, real, a.Hkv, kv_head);
  cp_async_commit();

  const float scale_log2 = a.scale * kLog2e;
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  for (int j = 0; j < steps; ++j) {
    const int stage = j & 1, key0 = j * kBlockN;
    const bool prefetch = j + 1 < steps;
    if (prefetch) {  // into the other stage, which the trailing barrier of step j - 1 released
      load_tile<D, kBlockN>(sk(stage ^ 1), a.k, start, key0 + kBlockN, real, a.Hkv, kv_head);
      cp_async_commit();
      load_tile<D, kBlockN>(sv(stage ^ 1), a.v, start, key0 + kBlockN, real, a.Hkv, kv_head);
      cp_async_commit();
      cp_async_wait<3>();  // Q and K(j) have landed; V(j), K(j+1), V(j+1) may be in flight
    } else {
      cp_async_wait<1>();
    }
    fence_proxy_async();
    __syncthreads();

    // S = Q K^T for the warpgroup's 64 rows and the step's 128 keys.
    float s[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) s[i] = 0.0f;
    pin(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_m64n128k16_ss(s, desc_k_major(sq, kBlockM, 64 * wg, kk), desc_k_major(sk(stage), kBlockN, 0, kk));
    wgmma_commit();
    wgmma_wait<0>();  // the softmax reads s (PTX 9.7.15.7.3: no accumulator access before the wait)
    pin(s);

    // Mask in the accumulator layout: s[4 i + e] is row thread_row0 + 8 (e / 2), key key0 + 8 i + 2 t + e
    // % 2. Every real row sees key 0 in step 0, so no row's max stays -inf past it.
    if (key0 + kBlockN - 1 > wg_row0 || key0 + kBlockN > real) {  // the diagonal or the segment's end
#pragma unroll
      for (int i = 0; i < kBlockN / 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = thread_row0 + 8 * (e / 2), key = key0 + 8 * i + 2 * t + e % 2;
          if (key > row || key >= real) s[4 * i + e] = -INFINITY;
        }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = row_max[h];
#pragma unroll
      for (int i = 0; i < kBlockN / 8; ++i) m = fmaxf(m, fmaxf(s[4 * i + 2 * h], s[4 * i + 2 * h + 1]));
      m = quad_max(m);
      // Rows with every score masked so far keep max -inf; subtracting 0 instead avoids inf - inf.
      const float base = m == -INFINITY ? 0.0f : m * scale_log2;
      const float rescale = exp2f(row_max[h] * scale_log2 - base);
      row_max[h] = m;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kBlockN / 8; ++i)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[4 * i + e] = exp2f(fmaf(s[4 * i + e], scale_log2, -base));
          sum += s[4 * i + e];
        }
      row_sum[h] = row_sum[h] * rescale + sum;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) o[4 * n + 2 * h] *= rescale, o[4 * n + 2 * h + 1] *= rescale;
    }
    uint32_t p[kBlockN / 16][4];
    to_a_fragments(s, p);

    if (prefetch)
      cp_async_wait<2>();  // V(j) has landed
    else
      cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();

    // The rescaled o and the freshly written p are wgmma registers: both before the fence (PTX 9.7.15.7.1).
    pin(o);
    pin(p);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) wgmma_m64nNk16_rs<D>(o, p[kk], desc_v(sv(stage), kk));
    wgmma_commit();
    wgmma_wait<0>();  // o is rescaled next step, and this stage's V (and K) reads must be complete
    pin(o);
    __syncthreads();  // both warpgroups are done with this stage before step j + 1 refills it
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] = quad_sum(row_sum[h]);
    const int row = thread_row0 + 8 * h;
    if (row >= len) continue;  // past the segment: another segment's tokens
    const bool keep = row < real;
    const float inv = keep && row_sum[h] > 0.0f ? 1.0f / row_sum[h] : 0.0f;
    __nv_bfloat16* dst = a.out + ((start + row) * a.H + head) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dst + 8 * n) =
          __floats2bfloat162_rn(o[4 * n + 2 * h] * inv, o[4 * n + 2 * h + 1] * inv);
    // Natural-log units: row_sum = sum exp2((s - max) scale log2e) = sum exp((s - max) scale).
    if (t == 0)
      a.lse[static_cast<int64_t>(head) * a.T + start + row] =
          keep ? row_max[h] * a.scale + logf(row_sum[h]) : 0.0f;
  }
#else
  // Built for another architecture: say so instead of computing anything.
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) a.status[kNeedsSm90a] = 1;
#endif
}

// Layout probe: one CTA runs one step of the forward kernel's MMA path on plain inputs (q, k, v bf16 [128,
// D], p bf16 [128, 128], all row-major) and writes the f32 accumulators out through the assumed accumulator
// layout: s = Q K^T [128, 128] (load_tile, desc_k_major, wgmma_m64n128k16_ss) and o = P V [128, D] (P
// through to_a_fragments, desc_v, wgmma_m64nNk16_rs). flag: 1 when the sm_90a code ran, 2 for the stub.
template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    probe_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                 const __nv_bfloat16* p_in, float* s_out, float* o_out, int* flag) {
#if PT_LAB_SM90A
  extern __shared__ unsigned char smem_raw[];
  constexpr uint32_t kBytes = tile_bytes<D>(kBlockN);
  const uint32_t sq = (smem_u32(smem_raw) + 1023u) & ~1023u, sk = sq + kBytes, sv = sk + kBytes;
  load_tile<D, kBlockM>(sq, q, 0, 0, kBlockM, 1, 0);
  load_tile<D, kBlockN>(sk, k, 0, 0, kBlockN, 1, 0);
  load_tile<D, kBlockN>(sv, v, 0, 0, kBlockN, 1, 0);
  cp_async_commit();
  cp_async_wait<0>();
  fence_proxy_async();
  __syncthreads();

  const int wg = static_cast<int>(threadIdx.x) / 128, warp = static_cast<int>(threadIdx.x) / 32 % 4;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int row0 = 64 * wg + 16 * warp + g;  // rows row0 and row0 + 8
  float s[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) s[i] = 0.0f;
  pin(s);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wgmma_m64n128k16_ss(s, desc_k_major(sq, kBlockM, 64 * wg, kk), desc_k_major(sk, kBlockN, 0, kk));
  wgmma_commit();
  wgmma_wait<0>();
  pin(s);
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int row = row0 + 8 * (i % 4 / 2), col = 8 * (i / 4) + 2 * t + i % 2;
    s_out[row * kBlockN + col] = s[i];
    s[i] =
        __bfloat162float(p_in[row * kBlockN + col]);  // P in the accumulator layout, as the softmax leaves it
  }
  uint32_t p[kBlockN / 16][4];
  to_a_fragments(s, p);
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  pin(o);
  pin(p);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk) wgmma_m64nNk16_rs<D>(o, p[kk], desc_v(sv, kk));
  wgmma_commit();
  wgmma_wait<0>();
  pin(o);
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o_out[(row0 + 8 * (i % 4 / 2)) * D + 8 * (i / 4) + 2 * t + i % 2] = o[i];
  if (threadIdx.x == 0) *flag = 1;
#else
  if (threadIdx.x == 0) *flag = 2;
#endif
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw Error(std::string("lab_attention_forward: ") + what + " failed: " + cudaGetErrorName(err) + " (" +
                cudaGetErrorString(err) + ")");
}

template <int D>
void launch_forward(const Args& a, int capacity, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<D>();
  static const cudaError_t configured =
      cudaFuncSetAttribute(forward_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  check(configured, "raising the dynamic shared memory limit");
  forward_kernel<D>
      <<<dim3(static_cast<unsigned>(capacity), static_cast<unsigned>(a.H)), kThreads, kSmem, stream>>>(a);
}

}  // namespace

size_t lab_scratch_bytes(int T, int segments) {
  return sizeof(int4) * static_cast<size_t>(capacity_for(T, segments)) + sizeof(int) * kStatusWords;
}

void lab_attention_forward(const LabAttention& p, void* scratch, cudaStream_t stream) {
  if (p.D != 64 && p.D != 128)
    throw Error("lab_attention_forward: head dims 64 and 128 are supported, got " + std::to_string(p.D));
  if (p.H <= 0 || p.Hkv <= 0 || p.H % p.Hkv != 0)
    throw Error("lab_attention_forward: query heads must be a positive multiple of kv heads, got H=" +
                std::to_string(p.H) + " Hkv=" + std::to_string(p.Hkv));
  if (p.segments <= 0 || p.T <= 0)
    throw Error("lab_attention_forward: needs at least one segment and one token");
  const int capacity = capacity_for(p.T, p.segments);
  auto* items = static_cast<int4*>(scratch);
  int* status = reinterpret_cast<int*>(items + capacity);
  schedule_kernel<<<1, kScheduleThreads, 0, stream>>>(p.cu_seqlens, p.valid_lens, p.segments, p.T, items,
                                                      capacity, status);
  check(cudaGetLastError(), "launching the schedule");
  Args a{static_cast<const __nv_bfloat16*>(p.q),
         static_cast<const __nv_bfloat16*>(p.k),
         static_cast<const __nv_bfloat16*>(p.v),
         static_cast<__nv_bfloat16*>(p.out),
         p.lse,
         items,
         status,
         p.T,
         p.H,
         p.Hkv,
         p.scale > 0 ? p.scale : 1.0f / std::sqrt(static_cast<float>(p.D))};
  if (p.D == 64)
    launch_forward<64>(a, capacity, stream);
  else
    launch_forward<128>(a, capacity, stream);
  check(cudaGetLastError(), "launching the forward kernel");
}

std::string lab_layout_probe(int D, const void* q, const void* k, const void* v, const void* p, float* s,
                             float* o) {
  if (D != 64 && D != 128)
    throw Error("lab_layout_probe: head dims 64 and 128 are supported, got " + std::to_string(D));
  int* flag = nullptr;
  check(cudaMalloc(&flag, sizeof(int)), "allocating the probe flag");
  check(cudaMemset(flag, 0, sizeof(int)), "clearing the probe flag");
  const auto launch = [&](auto kernel, int smem) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
          "raising the probe's shared memory limit");
    kernel<<<1, kThreads, smem>>>(static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
                                  static_cast<const __nv_bfloat16*>(v), static_cast<const __nv_bfloat16*>(p),
                                  s, o, flag);
  };
  if (D == 64)
    launch(probe_kernel<64>, 1024 + 3 * tile_bytes<64>(kBlockN));
  else
    launch(probe_kernel<128>, 1024 + 3 * tile_bytes<128>(kBlockN));
  check(cudaGetLastError(), "launching the probe");
  int ran = 0;
  const cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaSuccess)
    check(cudaMemcpy(&ran, flag, sizeof(int), cudaMemcpyDeviceToHost), "reading the flag");
  cudaFree(flag);
  check(err, "running the probe");
  if (ran == 2) return "the probe ran the stub: the build has no sm_90a device code";
  if (ran != 1) return "the probe kernel did not report back";
  return "";
}

std::string lab_status(const void* scratch, int T, int segments, cudaStream_t stream) {
  check(cudaStreamSynchronize(stream), "running the kernels");
  int status[kStatusWords];
  const auto* items = static_cast<const int4*>(scratch);
  check(cudaMemcpy(status, items + capacity_for(T, segments), sizeof(status), cudaMemcpyDeviceToHost),
        "reading the status words");
  if (status[kNeedsSm90a])
    return "the lab kernel needs sm_90a device code (an H100/H200 and a build with "
           "-gencode arch=compute_90a,code=sm_90a); this run executed the stub";
  if (status[kBadSegment] != INT_MAX)
    return "inconsistent cu_seqlens / valid_lens at segment " + std::to_string(status[kBadSegment]);
  return "";
}

}  // namespace pt::lab
