// Our 2:4 sparse GEMM for Hopper (sparse_gemm_sm90.h): compress24 into our operand format and
// y = x W^T on wgmma.mma_async.sp, computed as y^T = W x^T so that the 2:4 weight is the instruction's
// (sparse) A operand: instruction M = weight rows, N = tokens, K = the contraction.
//
// PTX rules relied on (PTX ISA section titles; numbers shift between versions):
//  - "Asynchronous Warpgroup Level Multiply-and-Accumulate Operation using wgmma.mma_async.sp
//    instruction": for .bf16 the shape is m64nNk32 and A is 2:4 sparse along K, packed into M x K/2
//    values; operands d, a-desc, b-desc, sp-meta (a .b32 register), sp-sel (an immediate), scale-d,
//    imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b. A may come from shared memory (a descriptor, used
//    here) or from registers.
//  - "Sparse matrix storage" (of that section): a nibble per group of 4 holds the two 2-bit column indices
//    of its kept values; 0b0000, 0b0101, 0b1010 and 0b1111 (equal indices) are invalid, so a group that
//    keeps fewer than two still names two distinct columns (compress24 writes zero values there).
//  - Its metadata layout for m64nNk32 .f16/.bf16: in each quad of the warpgroup, the sparsity selector
//    names the threads that supply the metadata (0: threads 0 and 1). Thread h (0, 1) of quad g of warp w
//    holds rows 16 w + g (bits 0-15) and 16 w + g + 8 (bits 16-31) of the 64-row A, columns 16 h .. 16 h
//    + 15 of the k32 step, one nibble per group in column order. (CUTLASS's ELayout_64x32 of its sm90
//    sparse GMMA traits reads the same way; selector 0 is what it uses.) Threads 2 and 3 load the same
//    words, which the hardware ignores.
//  - "Matrix Descriptor Format" / "Shared Memory Matrix Layout": the packed A tile [64 x 16] per k32 step
//    is an ordinary K-major bf16 operand, so the descriptors of ops/cuda/wgmma.cuh (128-byte swizzle,
//    base offset 0) apply unchanged: A k-step s starts 32 s bytes into a 128-byte row, B (K-major, 32
//    contraction elements = 64 bytes per row) at column block s / 2, byte 64 (s % 2).
//  - "stmatrix" (Data Movement): .m8n8.x4.trans stores four 8x8 b16 matrices transposed; thread 8 q + j
//    gives the address of row j of matrix q, and each thread's register q holds row lane / 4, columns
//    2 (lane % 4) and + 1 of matrix q: the accumulator fragment layout, so the accumulator tile [weights x
//    tokens] lands in shared memory as [tokens x weights] rows for coalesced stores into y.
//  - "wgmma.fence" / async proxy: as in ops/cuda/wgmma.cuh (fence.proxy.async after cp.async, a barrier,
//    wgmma.fence before each batch; wgmma.wait_group before reusing a stage or reading accumulators).
//
// GEMM tiling: CTA of 256 threads = 2 warpgroups, tile 256 weight rows x 128 tokens; warpgroup wg owns
// weight rows 128 wg .. 128 wg + 127 as two row blocks of 64 (two accumulators of m64n128, 128 f32
// registers). K advances 128 per stage (4 k32 steps x 2 row blocks = 8 wgmma.sp per warpgroup); 3 stages
// of {A values 256 x 64 (32 KiB), x tile 128 x 128 (32 KiB), metadata 4 KiB} filled by cp.async from all
// threads. Step kt issues its group and waits for it (the metadata registers are reloaded next step), and
// after a barrier (both warpgroups past that wait) refills the stage step kt - 1 read with stage kt + 2, so
// copies run two stages ahead of the MMAs.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "ops/cuda/check.h"
#include "ops/cuda/sparse24_encode.cuh"
#include "ops/cuda/sparse_gemm_sm90.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/wgmma.cuh"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kTileN = 256;  // weight rows per CTA
constexpr int kTileM = 128;  // tokens per CTA
constexpr int kTileK = 128;  // contraction per stage: 64 packed values = one 128-byte swizzled row
constexpr int kStages = 3;
constexpr int kABytes = kTileN * kTileK;      // packed bf16 values: kTileN x kTileK / 2 x 2 bytes
constexpr int kBBytes = kTileM * kTileK * 2;  // x tile
constexpr int kMetaBlockBytes = 1024;         // metadata of 64 rows x 128 columns
constexpr int kEBytes = kTileN / 64 * kMetaBlockBytes;
constexpr int kStageBytes = kABytes + kBBytes + kEBytes;
static_assert(kStageBytes % 1024 == 0, "every tile starts on a swizzle atom");
constexpr int kOutPitch = (kTileN + 8) * 2;  // bytes per token row of the staged output (33 16-byte chunks)
constexpr int kSmemBytes = 1024 + kStages * kStageBytes;
static_assert(kTileM * kOutPitch <= kStages * kStageBytes, "the output staging reuses the stages");

struct GemmArgs {
  const __nv_bfloat16* x;
  const __nv_bfloat16* values;
  const unsigned char* meta;
  __nv_bfloat16* y;
  float* raw;  // the probe's f32 accumulators [N, M], or nullptr
  int64_t M, N, K;
  float beta;
};

#if PT_SM90A
using namespace sm90;

#define PT_SP_F8(d, i)                                                                        \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])

// d[64] += A[64 x 32, 2:4 packed to 64 x 16] B[32 x 128]: A and B K-major in shared memory, e the metadata
// register, sparsity selector 0, scale-d 1 (callers zero d first).
__device__ inline void wgmma_sp_m64n128k32(float (&d)[64], uint64_t a, uint64_t b, uint32_t e) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %67, 0;\n"
      "wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, %66, 0, p, 1, 1, 0, 0;\n"
      "}\n"
      : PT_SP_F8(d, 0), PT_SP_F8(d, 8), PT_SP_F8(d, 16), PT_SP_F8(d, 24), PT_SP_F8(d, 32), PT_SP_F8(d, 40),
        PT_SP_F8(d, 48), PT_SP_F8(d, 56)
      : "l"(a), "l"(b), "r"(e), "r"(1));
}
#undef PT_SP_F8

__device__ inline void ld_shared_v4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ inline void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// One thread's share of the copies of a stage, set up once: chunk tid % 8 of packed-value rows tid / 8 +
// 32 i and chunk tid % 16 of token rows tid / 16 + 16 i (i < 8), metadata chunk tid. Rows 32 (16) apart
// keep row % 8 and so the swizzled chunk: the shared offsets step by 32 (16) rows of 128 bytes.
struct Loader {
  const __nv_bfloat16 *a_src, *b_src;  // at contraction block 0
  const unsigned char* e_src;
  const __nv_bfloat16* b_any;  // a valid address for the zero-filled copies of tokens past M
  int64_t a_step, b_step;      // elements between this thread's rows
  int64_t b_real;              // this thread's token rows i with 16 i < b_real exist
  uint32_t a_dst, b_dst, e_dst;

  __device__ Loader(const GemmArgs& a, int64_t n0, int64_t m0) {
    const int tid = static_cast<int>(threadIdx.x);
    const int64_t half_k = a.K / 2, blocks_k = a.K / kTileK;
    a_src = a.values + (n0 + tid / 8) * half_k + tid % 8 * 8;
    b_src = a.x + (m0 + tid / 16) * a.K + tid % 16 * 8;
    e_src = a.meta + (n0 / 64 + tid / 64) * blocks_k * kMetaBlockBytes + tid % 64 * 16;
    b_any = a.x;
    a_step = 32 * half_k, b_step = 16 * a.K;
    b_real = a.M - m0 - tid / 16;
    a_dst = swizzled_offset(tid / 8, tid % 8, kTileN);
    b_dst = kABytes + swizzled_offset(tid / 16, tid % 16, kTileM);
    e_dst = kABytes + kBBytes + static_cast<uint32_t>(tid) * 16;
  }

  // Starts the copies of contraction block kt (128 kt .. 128 kt + 127) into the stage at shared address
  // `stage`: packed values [256 rows][64] and x [128 tokens][128] swizzled as ops/cuda/wgmma.cuh lays
  // tiles out (tokens past M as zeros), and the metadata of the four row blocks as it lies in memory.
  __device__ void load(uint32_t stage, int kt) const {
    static_assert(kTileN * 8 == 8 * kThreads && kTileM * 16 == 8 * kThreads && kEBytes == 16 * kThreads);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      cp_async_16(stage + a_dst + i * 32 * 128, a_src + i * a_step + kt * (kTileK / 2), 16);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const bool real = 16 * i < b_real;
      cp_async_16(stage + b_dst + i * 16 * 128, real ? b_src + i * b_step + kt * kTileK : b_any,
                  real ? 16 : 0);
    }
    cp_async_16(stage + e_dst, e_src + kt * kMetaBlockBytes, 16);
  }
};

// Registers: __launch_bounds__(256, 1) allows 255 per thread; ptxas takes 205 (the accumulators 128), no
// local memory. Shared memory: 3 stages of 68 KiB (one CTA per SM).
__global__ void __launch_bounds__(kThreads, 1) sparse_gemm_kernel(const GemmArgs a) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // swizzle atoms need 1024-byte alignment
  const auto stage_at = [&](int kt) { return base + static_cast<uint32_t>(kt % kStages) * kStageBytes; };

  const int64_t n0 = int64_t{blockIdx.x} * kTileN, m0 = int64_t{blockIdx.y} * kTileM;
  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, warp = tid / 32 % 4, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int blocks_k = static_cast<int>(a.K / kTileK);
  const Loader loader(a, n0, m0);

  // cp.async groups: stages 0 .. kStages - 2 now, then one group (maybe empty) per step, so at step kt
  // the newest kStages - 2 groups are stages kt + 1 .. kt + kStages - 2 and waiting for the rest lands kt.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < blocks_k) loader.load(stage_at(s), s);
    cp_async_commit();
  }

  float acc[2][64];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[r][i] = 0.0f;
  // This thread's 16-byte metadata slot in row block 2 wg of a stage (k32 steps 0-3 as four words); row
  // block 2 wg + 1 is 1 KiB on.
  const uint32_t meta_slot = kABytes + kBBytes + static_cast<uint32_t>(2 * wg * kMetaBlockBytes) +
                             static_cast<uint32_t>((16 * warp + 2 * g + (t & 1)) * 16);
  // The metadata operand is a register the tensor cores read while the wgmma group runs, and ptxas did not
  // guard it: reloading it for step kt + 1 with group kt in flight gave wrong products under load (the
  // first GPU run). So each step waits for its own group before the next reload; stages still prefetch.
  for (int kt = 0; kt < blocks_k; ++kt) {
    cp_async_wait<kStages - 2>();
    fence_proxy_async();
    __syncthreads();
    const uint32_t stage = stage_at(kt), sa = stage, sb = stage + kABytes;
    uint32_t e[2][4];
#pragma unroll
    for (int r = 0; r < 2; ++r) ld_shared_v4(e[r], stage + meta_slot + r * kMetaBlockBytes);
    pin(acc[0]);
    pin(acc[1]);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < kTileK / 32; ++s) {
      const uint64_t b = desc_k_major(sb, kTileM, 0, 2 * s);
#pragma unroll
      for (int r = 0; r < 2; ++r)
        wgmma_sp_m64n128k32(acc[r], desc_k_major(sa, kTileN, 128 * wg + 64 * r, s), b, e[r][s]);
    }
    wgmma_commit();
    wgmma_wait<0>();  // the stage and the metadata registers are free ...
    pin(acc[0]);
    pin(acc[1]);
    __syncthreads();  // ... in both warpgroups: refill the stage read one step ago
    if (kt + kStages - 1 < blocks_k) loader.load(stage_at(kt + kStages - 1), kt + kStages - 1);
    cp_async_commit();
  }
  pin(acc[0]);
  pin(acc[1]);
  cp_async_wait<0>();

  if (a.raw != nullptr) {  // the probe: accumulator fragment d[4 i + 2 h + e'] is row 16 w + g + 8 h,
                           // column 8 i + 2 t + e' of the m64n128 tile
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int i = 0; i < 64; ++i) {
        const int64_t n = n0 + 128 * wg + 64 * r + 16 * warp + g + 8 * (i % 4 / 2);
        const int64_t m = m0 + 8 * (i / 4) + 2 * t + i % 2;
        if (m < a.M) a.raw[n * a.M + m] = acc[r][i];
      }
    return;
  }

  // Epilogue: the 256 x 128 accumulator tile as bf16 [128 tokens][256 weight rows] in shared memory (over
  // the stages, which every MMA is done with after the barrier), then 16-byte rows of y.
  __syncthreads();
  {
    const int q = lane / 8, j = lane % 8;  // this lane addresses row j of matrix q
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int i2 = 0; i2 < 8; ++i2) {
        // Matrix q: weight rows 8 (q % 2) .. + 7 of this warp's 16, tokens 8 (2 i2 + q / 2) .. + 7.
        const int token = 8 * (2 * i2 + q / 2) + j, row = 128 * wg + 64 * r + 16 * warp + 8 * (q % 2);
        const int d = 8 * i2;
        stmatrix_x4_trans(base + static_cast<uint32_t>(token * kOutPitch + row * 2),
                          pack_bf16(acc[r][d], acc[r][d + 1]), pack_bf16(acc[r][d + 2], acc[r][d + 3]),
                          pack_bf16(acc[r][d + 4], acc[r][d + 5]), pack_bf16(acc[r][d + 6], acc[r][d + 7]));
      }
  }
  __syncthreads();
  constexpr int kChunks = kTileN / 8;  // 16-byte chunks per token row
#pragma unroll 4
  for (int c = tid; c < kTileM * kChunks; c += kThreads) {
    const int token = c / kChunks, chunk = c % kChunks;
    if (m0 + token >= a.M) continue;
    uint32_t staged[4];
    ld_shared_v4(staged, base + static_cast<uint32_t>(token * kOutPitch + chunk * 16));
    uint4 v = make_uint4(staged[0], staged[1], staged[2], staged[3]);
    uint4* dst = reinterpret_cast<uint4*>(a.y + (m0 + token) * a.N + n0 + chunk * 8);
    if (a.beta != 0.0f) {
      const uint4 old = *dst;
      const auto* before = reinterpret_cast<const __nv_bfloat162*>(&old);
      auto* sum = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(sum[k]), fo = __bfloat1622float2(before[k]);
        sum[k] = __floats2bfloat162_rn(fmaf(a.beta, fo.x, f.x), fmaf(a.beta, fo.y, f.y));
      }
    }
    *dst = v;
  }
}

#else  // other targets: a stub that wgmma_sparse_gemm_available() never selects

__global__ void sparse_gemm_kernel(const GemmArgs a) { (void)a; }

#endif  // PT_SM90A

// Stores what encode16 made for row n, columns 16 seg .. 16 seg + 15 of an [N, K] operand: packed values
// 8 seg .. 8 seg + 7 of the row, and the 16-bit half (n % 16) / 8 of metadata word
// ((rb * K/128 + kt) * 64 + 16 w + 2 g + h) * 4 + s (little-endian).
__device__ inline void store16(uint4* values, uint16_t* meta, int64_t n, int64_t seg, int64_t K, uint4 packed,
                               unsigned bits) {
  values[n * (K / 16) + seg] = packed;
  const int64_t kt = seg / 8, s = seg % 8 / 2, h = seg % 2, rb = n / 64;
  const int64_t w16 = n % 64 / 16, g = n % 8, half = n % 16 / 8;
  const int64_t word = ((rb * (K / 128) + kt) * 64 + 16 * w16 + 2 * g + h) * 4 + s;
  meta[2 * word + half] = static_cast<uint16_t>(bits);
}

// One thread per row and 16 columns, 16-byte loads. Kept set: mask != 0, or nonzero bits (either sign of
// zero counts as zero) without a mask.
__global__ void compress24_kernel(const uint4* __restrict__ w, const uint4* __restrict__ mask,
                                  uint4* __restrict__ values, uint16_t* __restrict__ meta, int64_t N,
                                  int64_t K, int* overfull) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x, segments = K / 16;
  if (i >= N * segments) return;
  const uint4 lo = w[2 * i], hi = w[2 * i + 1];  // row i / segments, columns 16 (i % segments) ..
  const uint32_t words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  uint16_t v[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) v[k] = static_cast<uint16_t>(words[k / 2] >> (16 * (k % 2)));
  unsigned keep = 0;
  if (mask != nullptr) {
    const uint4 m = mask[i];
    const uint32_t bytes[4] = {m.x, m.y, m.z, m.w};
#pragma unroll
    for (int k = 0; k < 16; ++k) keep |= ((bytes[k / 4] >> (8 * (k % 4)) & 0xFFu) != 0 ? 1u : 0u) << k;
  } else {
    keep = nonzero_bits16(v);
  }
  unsigned bits = 0;
  int bad = 0;
  const uint4 packed = encode16(v, keep, bits, bad);
  store16(values, meta, i / segments, i % segments, K, packed, bits);
  if (bad != 0 && overfull != nullptr) atomicAdd(overfull, bad);
}

// The operand W^T [K, N] from w [N, K]: one thread per row k of W^T (column k of w) and 16 of its columns
// (rows of w). Neighbouring threads take neighbouring k, so each of the 16 strided loads is coalesced.
__global__ void compress24_transposed_kernel(const uint16_t* __restrict__ w, const uint8_t* __restrict__ mask,
                                             uint4* __restrict__ values, uint16_t* __restrict__ meta,
                                             int64_t N, int64_t K, int* overfull) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= K * (N / 16)) return;
  const int64_t k = i % K, seg = i / K;
  uint16_t v[16];
  unsigned keep = 0;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int64_t at = (16 * seg + j) * K + k;
    v[j] = w[at];
    const bool kept = mask != nullptr ? mask[at] != 0 : (v[j] & 0x7FFFu) != 0;
    keep |= (kept ? 1u : 0u) << j;
  }
  unsigned bits = 0;
  int bad = 0;
  const uint4 packed = encode16(v, keep, bits, bad);
  store16(values, meta, k, seg, N, packed, bits);
  if (bad != 0 && overfull != nullptr) atomicAdd(overfull, bad);
}

cudaStream_t stream() { return current_stream(); }

void launch_gemm(const GemmArgs& args) {
  static const cudaError_t configured =
      cudaFuncSetAttribute(sparse_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  PT_CUDA_CHECK(configured);
  const dim3 grid(static_cast<unsigned>(args.N / kTileN),
                  static_cast<unsigned>((args.M + kTileM - 1) / kTileM));
  sparse_gemm_kernel<<<grid, kThreads, kSmemBytes, stream()>>>(args);
  PT_CUDA_CHECK_LAUNCH();
}

void require(int64_t M, int64_t N, int64_t K) {
  const std::string why = wgmma_sparse_gemm_unsupported(M, N, K);
  if (!why.empty()) throw std::invalid_argument("wgmma_sparse_gemm: " + why);
  if (!wgmma_sparse_gemm_available())
    throw std::runtime_error("wgmma_sparse_gemm: no sm_90a kernel for this GPU");
}

}  // namespace

std::string wgmma_sparse_gemm_unsupported(int64_t M, int64_t N, int64_t K) {
  if (M < 1 || M / kTileM > 65535) return "M = " + std::to_string(M) + " tokens is out of range";
  if (N < kTileN || N % kTileN != 0) return "N = " + std::to_string(N) + " is not a multiple of 256";
  if (K < kTileK || K % kTileK != 0) return "K = " + std::to_string(K) + " is not a multiple of 128";
  return "";
}

bool wgmma_sparse_gemm_available() {
  static const bool available = [] {
    cudaFuncAttributes attributes{};
    int device = 0, major = 0;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
           major == 9 && cudaFuncGetAttributes(&attributes, sparse_gemm_kernel) == cudaSuccess &&
           attributes.binaryVersion == 90;
  }();
  return available;
}

void compress24(const void* w, const uint8_t* mask, int64_t N, int64_t K, void* values, void* meta,
                int* overfull) {
  if (N % 64 != 0 || K % 128 != 0) throw std::invalid_argument("compress24: N % 64 and K % 128 must be 0");
  const int64_t threads = N * (K / 16);
  if (threads == 0) return;
  constexpr int kBlock = 256;
  compress24_kernel<<<static_cast<unsigned>((threads + kBlock - 1) / kBlock), kBlock, 0, stream()>>>(
      static_cast<const uint4*>(w), reinterpret_cast<const uint4*>(mask), static_cast<uint4*>(values),
      static_cast<uint16_t*>(meta), N, K, overfull);
  PT_CUDA_CHECK_LAUNCH();
}

void compress24_transposed(const void* w, const uint8_t* mask, int64_t N, int64_t K, void* values, void* meta,
                           int* overfull) {
  if (K % 64 != 0 || N % 128 != 0)
    throw std::invalid_argument("compress24_transposed: K % 64 and N % 128 must be 0");
  const int64_t threads = K * (N / 16);
  if (threads == 0) return;
  constexpr int kBlock = 256;
  compress24_transposed_kernel<<<static_cast<unsigned>((threads + kBlock - 1) / kBlock), kBlock, 0,
                                 stream()>>>(static_cast<const uint16_t*>(w), mask,
                                             static_cast<uint4*>(values), static_cast<uint16_t*>(meta), N, K,
                                             overfull);
  PT_CUDA_CHECK_LAUNCH();
}

void wgmma_sparse_gemm(const void* x, const void* values, const void* meta, void* y, int64_t M, int64_t N,
                       int64_t K, float beta) {
  require(M, N, K);
  launch_gemm({static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(values),
               static_cast<const unsigned char*>(meta), static_cast<__nv_bfloat16*>(y), nullptr, M, N, K,
               beta});
}

std::string wgmma_sparse_gemm_raw(const void* x, const void* values, const void* meta, float* acc, int64_t M,
                                  int64_t N, int64_t K) {
  std::string why = wgmma_sparse_gemm_unsupported(M, N, K);
  if (!why.empty()) return why;
  if (!wgmma_sparse_gemm_available()) return "no sm_90a kernel for this GPU (the build or the device)";
  launch_gemm({static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(values),
               static_cast<const unsigned char*>(meta), nullptr, acc, M, N, K, 0.0f});
  PT_CUDA_CHECK(cudaStreamSynchronize(stream()));
  return "";
}

}  // namespace pt::ops::cuda
