// Every algorithm cuBLASLt's heuristic offers for one weight-gradient GEMM of a linear layer, each run and
// checked against an f64 reference: which of them gets the shape wrong, and how (a dropped last token
// shows as an error equal to the last row's contribution). The layout is ops/cuda/linear.cpp's dW:
// dW^T[K,N] = x^T op_T(dy^T), m = K, n = N, k = M tokens, bf16 inputs, fp32 compute.
//   bench_cublaslt_algos [M N K [bf16|f32 output]]      (default 4097 192 320 bf16)
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

  // bf16 inputs in [-1, 1]; the reference sums their exact values in f64.
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<__nv_bfloat16> x(static_cast<size_t>(M * K)), dy(static_cast<size_t>(M * N));
  for (auto& v : x) v = __float2bfloat16(uniform(rng));
  for (auto& v : dy) v = __float2bfloat16(uniform(rng));
  std::vector<double> want(static_cast<size_t>(N * K), 0.0), last(want.size());
  for (int64_t t = 0; t < M; ++t)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(__bfloat162float(dy[t * N + n])) * __bfloat162float(x[t * K + k]);
        want[n * K + k] += p;
        if (t == M - 1) last[n * K + k] = p;
      }

  void *d_x, *d_dy, *d_dw, *workspace;
  const size_t out_size = bf16_out ? 2 : 4, workspace_bytes = 32u << 20;
  check(cudaMalloc(&d_x, x.size() * 2), "cudaMalloc");
  check(cudaMalloc(&d_dy, dy.size() * 2), "cudaMalloc");
  check(cudaMalloc(&d_dw, want.size() * out_size), "cudaMalloc");
  check(cudaMalloc(&workspace, workspace_bytes), "cudaMalloc");
  check(cudaMemcpy(d_x, x.data(), x.size() * 2, cudaMemcpyHostToDevice), "upload");
  check(cudaMemcpy(d_dy, dy.data(), dy.size() * 2, cudaMemcpyHostToDevice), "upload");

  cublasLtHandle_t handle;
  check(cublasLtCreate(&handle), "cublasLtCreate");
  cublasLtMatmulDesc_t desc;
  check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const cublasOperation_t no = CUBLAS_OP_N, yes = CUBLAS_OP_T;
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &no, sizeof no), "transa");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &yes, sizeof yes), "transb");
  const cudaDataType_t out_type = bf16_out ? CUDA_R_16BF : CUDA_R_32F;
  cublasLtMatrixLayout_t a, b, c;
  check(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, K, M, K), "layout a");  // x^T [K, M]
  check(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, N, M, N), "layout b");  // dy^T [N, M], transposed
  check(cublasLtMatrixLayoutCreate(&c, out_type, K, N, K), "layout c");     // dW^T [K, N]
  cublasLtMatmulPreference_t pref;
  check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const uint64_t bytes = workspace_bytes;
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                             sizeof bytes),
        "workspace");
  cublasLtMatmulHeuristicResult_t results[16];
  int found = 0;
  check(cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, pref, 16, results, &found), "heuristic");

  std::printf("dW[%lld,%lld] over %lld tokens, %s output: %d algorithms\n", (long long)N, (long long)K,
              (long long)M, bf16_out ? "bf16" : "f32", found);
  std::printf(
      "rank   id  tile stages splitk reduction swizzle custom  workspace  rel.error  (last token's share)\n");
  const float alpha = 1.0f, beta = 0.0f;
  std::vector<uint16_t> got16(want.size());
  std::vector<float> got32(want.size());
  for (int i = 0; i < found; ++i) {
    const cublasLtMatmulAlgo_t& algo = results[i].algo;
    check(cudaMemset(d_dw, 0xff, want.size() * out_size), "poison");
    check(cublasLtMatmul(handle, desc, &alpha, d_x, a, d_dy, b, &beta, d_dw, c, d_dw, c, &algo, workspace,
                         workspace_bytes, nullptr),
          "cublasLtMatmul");
    check(cudaDeviceSynchronize(), "run");
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "event");
    check(cudaEventCreate(&stop), "event");
    check(cudaEventRecord(start), "event");
    constexpr int kRuns = 20;
    for (int r = 0; r < kRuns; ++r)
      check(cublasLtMatmul(handle, desc, &alpha, d_x, a, d_dy, b, &beta, d_dw, c, d_dw, c, &algo, workspace,
                           workspace_bytes, nullptr),
            "cublasLtMatmul");
    check(cudaEventRecord(stop), "event");
    check(cudaEventSynchronize(stop), "event");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "event");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (bf16_out)
      check(cudaMemcpy(got16.data(), d_dw, want.size() * 2, cudaMemcpyDeviceToHost), "download");
    else
      check(cudaMemcpy(got32.data(), d_dw, want.size() * 4, cudaMemcpyDeviceToHost), "download");
    double diff = 0, scale = 0, last_diff = 0;
    for (size_t j = 0; j < want.size(); ++j) {
      float g = got32[j];
      if (bf16_out) {
        __nv_bfloat16_raw raw{got16[j]};
        g = __bfloat162float(__nv_bfloat16(raw));
      }
      diff = std::max(diff, std::isfinite(g) ? std::abs(g - want[j]) : INFINITY);
      last_diff = std::max(last_diff, std::abs(g - (want[j] - last[j])));
      scale = std::max(scale, std::abs(want[j]));
    }
    std::printf("%4d %4d %5d %6d %6d %9d %7d %6d %10zu %8.4f  %9.2e  %s\n", i,
                config<int>(algo, CUBLASLT_ALGO_CONFIG_ID), config<int>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                config<int>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                config<int>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                config<int>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                config<int>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                config<int>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), results[i].workspaceSize, ms / kRuns,
                diff / scale, last_diff < diff ? "closer to the sum without the last token" : "");
  }
  return 0;
}
