// Hopper (sm_90a) building blocks: warpgroup MMA (wgmma.mma_async) with operands in 128-byte swizzled
// shared memory, its matrix descriptors and fences, the accumulator / register-A fragment layouts, and
// cp.async tile loads into the swizzled layout. Used by the sm_90a attention kernels; the layouts were
// checked on an H200 by a probe of one tile of S = Q K^T and O = P V (bench/lab history) and by the
// attention tests against the CPU reference; the forms only the backward uses (N = 64 and 32, MN-major A,
// MN-major B from a column offset) by bench_wgmma_probe.
//
// Encoding rules from the PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" (the accumulator
// and register-A fragments of m64nNk16, the canonical layouts, the leading / stride byte offsets per
// major-ness, "Matrix Descriptor Format"), and "wgmma.fence" / the memory-consistency model (proxies) for
// the fences. Section numbers shift between PTX versions; the titles do not.
//
// Shared layout of every tile: [columns / 64][rows][64 bf16 = 128 bytes], 128-byte swizzled: inside each
// 8-row group (1024 bytes) the 16-byte chunk c of row r sits at chunk c ^ (r % 8). This is wgmma's "128B
// swizzling" atom, so every tile starts on a 1024-byte boundary. A tile whose rows run along the
// contraction is read K-major; one whose rows are the contraction index is read MN-major (transposed).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/cuda/fragments.cuh"

// wgmma exists only in the arch-specific sm_90a target; kernels built for other targets compile to stubs.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PT_SM90A 1
#else
#define PT_SM90A 0
#endif

namespace pt::ops::cuda::sm90 {

#if PT_SM90A

__device__ inline uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Byte offset of 16-byte chunk `chunk` (0 .. columns/8 - 1) of row `row` in a swizzled tile of `rows` rows.
__device__ inline uint32_t swizzled_offset(int row, int chunk, int rows) {
  return static_cast<uint32_t>((chunk / 8) * rows * 128 + row * 128 + ((chunk % 8) ^ (row % 8)) * 16);
}

// cp.async of 16 bytes into shared address dst; src_bytes 0 writes zeros (src must still be a valid address).
__device__ inline void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
// cp.async of 4 bytes (.ca: .cg takes only 16), for per-row scalars; src_bytes 0 writes zeros.
__device__ inline void cp_async_4(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
// cp.async.wait_group N waits until at most the N most recent groups of this thread are pending; the
// copies are then visible to this thread only, hence a barrier after it.
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// mbarriers (PTX "Parallel Synchronization and Communication Instructions: mbarrier") for warp-specialized
// kernels: a producer's cp.async copies complete a phase by themselves (cp.async.mbarrier.arrive.noinc: the
// barrier's count includes one arrival per producer thread); consumers release a stage once it is read, one
// arrival per warpgroup where only their MMAs read it, one per thread where threads read it themselves. A
// phase of parity P has completed when mbarrier_wait(bar, P) returns.
__device__ inline void mbarrier_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialized barriers visible to the other threads' and the async proxy's barrier operations
// (a __syncthreads follows).
__device__ inline void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ inline void mbarrier_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar)
               : "memory");
}
// Arrives on bar when every cp.async this thread issued so far has landed.
__device__ inline void cp_async_mbarrier_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ inline void mbarrier_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "retry:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra retry;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ inline void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// TMA (PTX "cp.async.bulk.tensor"): one thread copies a box of a tensor map (ops/cuda/tensor_map.h, a
// __grid_constant__ kernel parameter) to shared memory through the async proxy; the copy counts its bytes
// against the mbarrier's transaction count, which the issuing thread raised first (arrive_expect_tx). MMAs
// read such a tile without a proxy fence; a tile that threads wrote or read through the generic proxy is
// fenced (fence_proxy_async) by them before the barrier that hands it to the next copy.
__device__ inline void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ inline void tma_load_3d(uint32_t dst, const void* map, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// Bulk reductions (PTX "cp.reduce.async.bulk"): adds `bytes` (a multiple of 16, both addresses 16-byte
// aligned) of f32 from shared memory into global memory through the async proxy, in the thread's bulk async
// group. The source must be written and fenced (fence_proxy_async) first; wait_read<N> frees it for reuse,
// wait<N> waits for the global writes as well.
__device__ inline void bulk_reduce_add_f32(float* dst, uint32_t src, int bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
               "r"(src), "r"(bytes)
               : "memory");
}
__device__ inline void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ inline void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
template <int kPending>
__device__ inline void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Warp specialization: a producer warpgroup gives registers back (setmaxnreg.dec) so that the consumer
// warpgroups can take more (setmaxnreg.inc) than the launch's even share; each executed by a whole
// warpgroup.
template <int kRegisters>
__device__ inline void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ inline void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

// cp.async and plain stores write shared memory through the generic proxy; wgmma reads it through the async
// proxy. Writers fence (fence.proxy.async), then a barrier hands the tile to the MMA warpgroups. The reverse
// direction (refilling a stage after wgmma read it) needs no proxy fence: wgmma.wait_group returns once the
// MMAs, shared-memory reads included, are complete, and a barrier after it orders the refill.
__device__ inline void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Matrix descriptor: bits 0-13 (start address & 0x3FFFF) >> 4, 16-29 leading-dimension byte offset >> 4,
// 32-45 stride-dimension byte offset >> 4, 49-51 base offset (0: every swizzle pattern starts on a
// 1024-byte boundary; K-major k-step advances of 32, 64, 96 bytes keep address bits 7-9 zero), 62-63
// swizzle mode (1 = 128-byte swizzle).
__device__ inline uint64_t make_desc(uint32_t start, uint32_t leading_bytes, uint32_t stride_bytes) {
  return static_cast<uint64_t>((start & 0x3FFFF) >> 4) | static_cast<uint64_t>(leading_bytes >> 4) << 16 |
         static_cast<uint64_t>(stride_bytes >> 4) << 32 | uint64_t{1} << 62;
}

// K-major operand: k-step kk (contraction elements 16 kk .. 16 kk + 15) of a swizzled tile of `rows` rows,
// from its row `first_row` (a multiple of 8). Canonical K-major 128B layout: rows 128 bytes apart, 8-row
// groups SBO = 1024 bytes apart; LBO is unused for swizzled K-major layouts (encoded as 16 bytes). The 16
// elements of a k-step are 32 bytes of a 128-byte row: column block kk / 4, bytes 32 (kk % 4) on; the
// hardware applies the swizzle to the final address bits, so a start inside the atom reads the chunks where
// the loads (TMA's 128-byte swizzle, attention_sm90.cuh's tma_tile) put them.
__device__ inline uint64_t desc_k_major(uint32_t tile, int rows, int first_row, int kk) {
  return make_desc(tile + static_cast<uint32_t>((kk / 4) * rows * 128 + first_row * 128 + (kk % 4) * 32), 16,
                   1024);
}

// MN-major operand (imm-trans = 1): k-step kk (tile rows 16 kk .. 16 kk + 15 are the contraction index) of
// a swizzled tile of `rows` rows, its N (or M) values from tile column first_col on. Canonical MN-major
// 128B layout: 64 consecutive N (or M) values per 128-byte row, the next 64 (column block) LBO = rows * 128
// bytes on, the next 8 contraction rows SBO = 1024 bytes on. A k-step covers 16 rows = 2048 bytes, a whole
// number of atoms. first_col: a multiple of 64 (a column block), or 32 on from one for an N = 32 operand:
// a start 64 bytes into the atom, which (as the K-major k-step starts) keeps address bits 7-9 and so the
// base offset 0, the hardware swizzling the final addresses (bench_wgmma_probe checks this form).
__device__ inline uint64_t desc_mn_major(uint32_t tile, int rows, int kk, int first_col = 0) {
  return make_desc(
      tile + static_cast<uint32_t>((first_col / 64) * rows * 128 + (first_col % 64) * 2 + kk * 16 * 128),
      static_cast<uint32_t>(rows) * 128, 1024);
}

__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// wgmma.fence orders earlier register accesses before a wgmma that uses the same registers (accumulator or
// register A); wgmma.wait_group must precede any access after it. The compiler knows neither: an empty
// volatile asm that "writes" every register pins the array's accesses on the right side of the fence/wait.
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

// Accumulator fragment of m64nNk16 (f32), per thread of the warpgroup with w = warp % 4, g = lane / 4,
// t = lane % 4: d[4i + 2h + e] is row 16 w + g + 8 h, column 8 i + 2 t + e (h, e in {0, 1}).
// Register A fragment of m64nNk16 (bf16): a[0] row 16 w + g, columns 2 t, 2 t + 1; a[1] row + 8; a[2] row
// 16 w + g, columns 2 t + 8, 2 t + 9; a[3] row + 8 (lower column in the low half). So a 64 x 16 block of
// the accumulator is already an A fragment (to_a_fragments).

#define PT_WGMMA_F8(d, i)                                                                     \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])

// d[N/2] += A[64 x 16] B[16 x N], A and B in shared memory (accumulate false: d = A B, which spares the
// zeroing instructions that would make ptxas serialize a wgmma still in flight on other registers). The
// operands after the descriptors: scale-d (accumulate), imm-scale-a/b 1, imm-trans-a/b kTransA /
// kTransB (0: K-major, 1: MN-major; the transposed forms exist for bf16/f16 only, which this is).
template <int N, int kTransA = 0, int kTransB = 0>
__device__ inline void wgmma_m64nNk16_ss(float (&d)[N / 2], uint64_t a, uint64_t b, bool accumulate = true) {
  static_assert(N == 32 || N == 64 || N == 128);
  if constexpr (N == 32) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
        "%16, %17, p, 1, 1, %19, %20;\n"
        "}\n"
        : PT_WGMMA_F8(d, 0), PT_WGMMA_F8(d, 8)
        : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)), "n"(kTransA), "n"(kTransB));
  } else if constexpr (N == 64) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, %35, %36;\n"
        "}\n"
        : PT_WGMMA_F8(d, 0), PT_WGMMA_F8(d, 8), PT_WGMMA_F8(d, 16), PT_WGMMA_F8(d, 24)
        : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)), "n"(kTransA), "n"(kTransB));
  } else {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, %67, %68;\n"
        "}\n"
        : PT_WGMMA_F8(d, 0), PT_WGMMA_F8(d, 8), PT_WGMMA_F8(d, 16), PT_WGMMA_F8(d, 24), PT_WGMMA_F8(d, 32),
          PT_WGMMA_F8(d, 40), PT_WGMMA_F8(d, 48), PT_WGMMA_F8(d, 56)
        : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)), "n"(kTransA), "n"(kTransB));
  }
}

// d[N/2] += A[64 x 16] (registers) B[16 x N], B MN-major in shared memory (imm-trans-b 1). The register-A
// form has no imm-trans-a: A in registers is K-major.
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
        : PT_WGMMA_F8(d, 0), PT_WGMMA_F8(d, 8), PT_WGMMA_F8(d, 16), PT_WGMMA_F8(d, 24)
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
        : PT_WGMMA_F8(d, 0), PT_WGMMA_F8(d, 8), PT_WGMMA_F8(d, 16), PT_WGMMA_F8(d, 24), PT_WGMMA_F8(d, 32),
          PT_WGMMA_F8(d, 40), PT_WGMMA_F8(d, 48), PT_WGMMA_F8(d, 56)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
}

#undef PT_WGMMA_F8

// A 64 x (16 kSteps) accumulator as the register A operand of kSteps k-steps: k-step kk (columns 16 kk ..
// 16 kk + 15, accumulator column blocks 2 kk and 2 kk + 1) is s[8 kk .. 8 kk + 7] in order.
template <int kSteps>
__device__ inline void to_a_fragments(const float (&s)[8 * kSteps], uint32_t (&p)[kSteps][4]) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) p[kk][r] = pack_bf16(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

#endif  // PT_SM90A

}  // namespace pt::ops::cuda::sm90
