// Every algorithm cuBLASLt's heuristic offers for one weight-gradient GEMM of a linear layer, each timed and
// checked against an f64 reference on sampled entries: which of them gets the shape wrong, and how (a dropped
// last token shows as an error equal to the last row's contribution), and which is fastest. The layout is
// ops/cuda/linear.cpp's dW: dW^T[K,N] = x^T op_T(dy^T), m = K, n = N, k = M tokens, bf16 inputs, fp32
// compute; "accumulate" adds to dW (beta 1, as the LM head's chunks do), LDY is dy's row stride (>= N);
// "bgradb" asks for the bias gradient (dy summed over tokens, f32) in the epilogue, checked as dW is: whether
// the algorithms that can fuse it are as fast as those that cannot.
//   bench_cublaslt_algos [M N K [bf16|f32 output [LDY [accumulate] [bgradb]]]]  (default 4097 192 320 bf16)
// e.g. GPT-2's LM head over one 8192-token chunk: bench_cublaslt_algos 8192 50257 768 f32 50304 accumulate
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, cublasLtGetStatusString(s));
    std::exit(1);
  }
}

template <typename T>
T config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  T value{};
  size_t written = 0;
  check(cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof value, &written),
        "algo config");
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t M = argc > 3 ? std::atoll(argv[1]) : 4097, N = argc > 3 ? std::atoll(argv[2]) : 192,
                K = argc > 3 ? std::atoll(argv[3]) : 320;
  const bool bf16_out = argc > 4 ? std::string(argv[4]) == "bf16" : true;
  const int64_t ldy = argc > 5 ? std::atoll(argv[5]) : N;
  bool accumulate = false, bgradb = false;
  for (int i = 6; i < argc; ++i) {
    accumulate |= std::string(argv[i]) == "accumulate";
    bgradb |= std::string(argv[i]) == "bgradb";
  }
  if (ldy < N) {
    std::fprintf(stderr, "LDY %lld is below N %lld\n", (long long)ldy, (long long)N);
    return 2;
  }

  // bf16 inputs in [-1, 1], dW's start value too when accumulating.
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<__nv_bfloat16> x(static_cast<size_t>(M * K)), dy(static_cast<size_t>(M * ldy)),
      start(static_cast<size_t>(N * K));
  for (auto& v : x) v = __float2bfloat16(uniform(rng));
  for (auto& v : dy) v = __float2bfloat16(uniform(rng));
  for (auto& v : start) v = __float2bfloat16(accumulate ? uniform(rng) : 0.0f);
  // The reference sums the exact values in f64 for sampled entries of dW: the corners (where a tail tile
  // goes wrong) and random ones.
  struct Entry {
    int64_t n, k;
    double want = 0, last = 0;
  };
  std::vector<Entry> entries{{0, 0}, {N - 1, K - 1}, {N - 1, 0}, {0, K - 1}};
  std::vector<double> dbias(static_cast<size_t>(N));  // with bgradb: dy summed over tokens
  for (int64_t t = 0; bgradb && t < M; ++t)
    for (int64_t n = 0; n < N; ++n) dbias[n] += __bfloat162float(dy[t * ldy + n]);
  std::uniform_int_distribution<int64_t> pick_n(0, N - 1), pick_k(0, K - 1);
  while (entries.size() < 512) entries.push_back({pick_n(rng), pick_k(rng)});
  for (auto& e : entries) {
    e.want = __bfloat162float(start[e.n * K + e.k]);
    for (int64_t t = 0; t < M; ++t)
      e.want += double(__bfloat162float(dy[t * ldy + e.n])) * __bfloat162float(x[t * K + e.k]);
    e.last = double(__bfloat162float(dy[(M - 1) * ldy + e.n])) * __bfloat162float(x[(M - 1) * K + e.k]);
  }

  void *d_x, *d_dy, *d_dw, *d_start, *d_dbias, *workspace;
  const size_t out_size = bf16_out ? 2 : 4, workspace_bytes = 32u << 20, dw_count = start.size();
  check(cudaMalloc(&d_x, x.size() * 2), "cudaMalloc");
  check(cudaMalloc(&d_dy, dy.size() * 2), "cudaMalloc");
  check(cudaMalloc(&d_dw, dw_count * out_size), "cudaMalloc");
  check(cudaMalloc(&d_start, dw_count * out_size), "cudaMalloc");
  check(cudaMalloc(&d_dbias, N * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&workspace, workspace_bytes), "cudaMalloc");
  check(cudaMemcpy(d_x, x.data(), x.size() * 2, cudaMemcpyHostToDevice), "upload");
  check(cudaMemcpy(d_dy, dy.data(), dy.size() * 2, cudaMemcpyHostToDevice), "upload");
  if (bf16_out) {
    check(cudaMemcpy(d_start, start.data(), dw_count * 2, cudaMemcpyHostToDevice), "upload");
  } else {
    std::vector<float> start32(dw_count);
    for (size_t j = 0; j < dw_count; ++j) start32[j] = __bfloat162float(start[j]);
    check(cudaMemcpy(d_start, start32.data(), dw_count * 4, cudaMemcpyHostToDevice), "upload");
  }

  cublasLtHandle_t handle;
  check(cublasLtCreate(&handle), "cublasLtCreate");
  cublasLtMatmulDesc_t desc;
  check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const cublasOperation_t no = CUBLAS_OP_N, yes = CUBLAS_OP_T;
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &no, sizeof no), "transa");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &yes, sizeof yes), "transb");
  const cudaDataType_t out_type = bf16_out ? CUDA_R_16BF : CUDA_R_32F;
  if (bgradb) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BGRADB;
    const cudaDataType_t bias_type = CUDA_R_32F;
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
          "epilogue");
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                         sizeof bias_type),
          "bias type");
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &d_dbias, sizeof d_dbias),
          "bias pointer");
  }
  cublasLtMatrixLayout_t a, b, c;
  check(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, K, M, K), "layout a");    // x^T [K, M]
  check(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, N, M, ldy), "layout b");  // dy^T [N, M], transposed
  check(cublasLtMatrixLayoutCreate(&c, out_type, K, N, K), "layout c");       // dW^T [K, N]
  cublasLtMatmulPreference_t pref;
  check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const uint64_t bytes = workspace_bytes;
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                             sizeof bytes),
        "workspace");
  cublasLtMatmulHeuristicResult_t results[16];
  int found = 0;
  check(cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, pref, 16, results, &found), "heuristic");

  std::printf("dW[%lld,%lld] over %lld tokens (dy stride %lld), %s output%s%s: %d algorithms\n", (long long)N,
              (long long)K, (long long)M, (long long)ldy, bf16_out ? "bf16" : "f32",
              accumulate ? ", accumulated" : "", bgradb ? ", bias gradient in the epilogue" : "", found);
  std::printf(
      "rank   id  tile stages splitk reduction swizzle custom  workspace        ms  TFLOP/s  rel.error  "
      "(last token's share)%s\n",
      bgradb ? "  dbias rel.error" : "");
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  auto matmul = [&](const cublasLtMatmulAlgo_t& algo) {
    check(cublasLtMatmul(handle, desc, &alpha, d_x, a, d_dy, b, &beta, d_dw, c, d_dw, c, &algo, workspace,
                         workspace_bytes, nullptr),
          "cublasLtMatmul");
  };
  for (int i = 0; i < found; ++i) {
    const cublasLtMatmulAlgo_t& algo = results[i].algo;
    // Timed first (accumulating into whatever dW holds), then one checked run from the start value.
    matmul(algo);
    cudaEvent_t begin, end;
    check(cudaEventCreate(&begin), "event");
    check(cudaEventCreate(&end), "event");
    check(cudaEventRecord(begin), "event");
    constexpr int kRuns = 20;
    for (int r = 0; r < kRuns; ++r) matmul(algo);
    check(cudaEventRecord(end), "event");
    check(cudaEventSynchronize(end), "event");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, begin, end), "event");
    cudaEventDestroy(begin);
    cudaEventDestroy(end);
    ms /= kRuns;

    if (accumulate)
      check(cudaMemcpy(d_dw, d_start, dw_count * out_size, cudaMemcpyDeviceToDevice), "reset");
    else
      check(cudaMemset(d_dw, 0xff, dw_count * out_size), "poison");
    check(cudaMemset(d_dbias, 0xff, N * sizeof(float)), "poison");
    matmul(algo);
    check(cudaDeviceSynchronize(), "run");
    double diff = 0, scale = 0, last_diff = 0;
    for (const Entry& e : entries) {
      float g = 0;
      const size_t at = static_cast<size_t>(e.n * K + e.k);
      if (bf16_out) {
        __nv_bfloat16 v;
        check(cudaMemcpy(&v, static_cast<char*>(d_dw) + at * 2, 2, cudaMemcpyDeviceToHost), "download");
        g = __bfloat162float(v);
      } else {
        check(cudaMemcpy(&g, static_cast<char*>(d_dw) + at * 4, 4, cudaMemcpyDeviceToHost), "download");
      }
      diff = std::max(diff, std::isfinite(g) ? std::abs(g - e.want) : INFINITY);
      last_diff = std::max(last_diff, std::abs(g - (e.want - e.last)));
      scale = std::max(scale, std::abs(e.want));
    }
    double bias_diff = 0, bias_scale = 0;
    if (bgradb) {
      std::vector<float> got(static_cast<size_t>(N));
      check(cudaMemcpy(got.data(), d_dbias, N * sizeof(float), cudaMemcpyDeviceToHost), "download");
      for (int64_t n = 0; n < N; ++n) {
        bias_diff = std::max(bias_diff, std::isfinite(got[n]) ? std::abs(got[n] - dbias[n]) : INFINITY);
        bias_scale = std::max(bias_scale, std::abs(dbias[n]));
      }
    }
    std::printf("%4d %4d %5d %6d %6d %9d %7d %6d %10zu %9.4f %8.1f  %9.2e  %s", i,
                config<int>(algo, CUBLASLT_ALGO_CONFIG_ID), config<int>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                config<int>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                config<int>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                config<int>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                config<int>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                config<int>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), results[i].workspaceSize, ms,
                2.0 * static_cast<double>(M * N * K) / (ms * 1e9), diff / scale,
                last_diff < diff ? "closer to the sum without the last token" : "");
    if (bgradb) std::printf("  %9.2e", bias_diff / bias_scale);
    std::printf("\n");
  }
  return 0;
}
