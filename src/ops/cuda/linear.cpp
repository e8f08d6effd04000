// Linear layers on cuBLASLt. Row-major y[M,N] = x[M,K] W[N,K]^T is the column-major product
// y^T = W x^T, so every call below is a column-major GEMM on the row-major buffers as they lie:
//   forward  y^T[N,M]  = op_T(W) x^T        (m=N, n=M, k=K)
//   dx       dx^T[K,M] = W^T dy^T           (m=K, n=M, k=N)
//   dw       dW^T[K,N] = x^T op_T(dy^T)     (m=K, n=N, k=M)
// Accumulation is fp32 (CUBLAS_COMPUTE_32F: no TF32), inputs are f32 or bf16, and beta = 1 adds to the
// output. With packing the token count (n of forward and dx, k of dw) changes every step, so the
// heuristic's algorithm is cached per bucket of n and k (8 per power of two) with transposes, m, leading
// dimensions, types, pointer alignments and the epilogue (bias, GELU, GELU gradient) exact; each exact
// shape gets its own descriptors and reuses its bucket's algorithm once cublasLtMatmulAlgoCheck accepts it
// there (else it runs the heuristic itself); a new bucket first tries a nearby bucket's (searched_nearby).
// GPT-2's GELU rides in the epilogue, on the column-major views above: the forward's D = act^T [N,M] with
// aux = h^T (GELU's input, bias added), the dx GEMM's D = dh^T [K,M] = gelu'(aux) * (W^T dy^T), aux = h^T.
#include <cublasLt.h>

#include <algorithm>
#include <bit>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/stream.h"
#include "ops/linear.h"

namespace pt::ops::cuda {

namespace {

constexpr size_t kWorkspaceBytes = kCublasLtWorkspaceBytes;
constexpr int kHeuristicResults = 8;  // the heuristic's best first; later ones stand in where one is unsafe

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("linear: ") + what + " failed: " + cublasLtGetStatusName(status) + " (" +
                cublasLtGetStatusString(status) + ")");
}

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    default:
      throw Error(std::string("linear: ") + dtype_name(dtype) + " is not supported on cuda; use f32 or bf16");
  }
}

// The largest power of two (up to 256) dividing the address: cuBLASLt kernels may assume it.
uint32_t alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

// The GELU (tanh form) in the epilogue: none, the forward (D = gelu(C), C kept in aux) or the gradient
// (D = gelu'(aux) * C).
enum class Gelu : uint8_t { none, forward, backward };

struct Gemm {
  bool trans_a, trans_b;
  int64_t m, n, k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* c;
  int64_t ldc;
  DType ab_type, c_type;
  bool accumulate;
  const void* bias = nullptr;  // [m] of c_type, added to every column of C in the epilogue
  Gelu gelu = Gelu::none;
  void* aux = nullptr;  // with gelu: GELU's input [m,n] of c_type, leading dimension ld_aux
  int64_t ld_aux = 0;
  const void* c_in = nullptr;  // with accumulate: C read from here (c's layout) instead of c, D written to c
  // Strided batch: `batch` products sharing A, the i-th's B and C i stride_* elements past b and c.
  int batch = 1;
  int64_t stride_b = 0, stride_c = 0;
};

cublasLtEpilogue_t epilogue_of(const Gemm& g) {
  switch (g.gelu) {
    case Gelu::forward:
      return g.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case Gelu::backward:
      return CUBLASLT_EPILOGUE_DGELU;
    case Gelu::none:
      break;
  }
  return g.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

// The epilogue, the aux matrix's leading dimension and alignment close the key: plans never mix epilogues.
using PlanKey =
    std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, DType, DType, uint32_t,
               uint32_t, uint32_t, bool, Gelu, int64_t, uint32_t, int, int64_t, int64_t>;

constexpr size_t kKeyN = 3, kKeyK = 4;  // where n and k sit in a PlanKey

PlanKey key_of(const Gemm& g) {
  return {g.trans_a,
          g.trans_b,
          g.m,
          g.n,
          g.k,
          g.lda,
          g.ldb,
          g.ldc,
          g.ab_type,
          g.c_type,
          alignment(g.a),
          alignment(g.b),
          g.c_in ? std::min(alignment(g.c), alignment(g.c_in)) : alignment(g.c),
          g.bias != nullptr,
          g.gelu,
          g.ld_aux,
          g.aux ? alignment(g.aux) : 0,
          g.batch,
          g.stride_b,
          g.stride_c};
}

// x rounded up to a multiple of 2^(floor(log2 x) - 3), at least 16: 8 buckets per power of two.
int64_t bucket(int64_t x) {
  const int log2 = static_cast<int>(std::bit_width(static_cast<uint64_t>(x))) - 1;
  const int64_t step = std::max(int64_t{16}, int64_t{1} << std::max(0, log2 - 3));
  return (x + step - 1) / step * step;
}

PlanKey bucket_of(PlanKey key) {
  std::get<kKeyN>(key) = bucket(std::get<kKeyN>(key));
  std::get<kKeyK>(key) = bucket(std::get<kKeyK>(key));
  return key;
}

// Exact shapes kept before the cache is emptied (a long run with packing meets thousands of token counts).
constexpr size_t kMaxPlans = 1024;

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  // false: cuBLASLt has no algorithm for this GELU epilogue (kept, so that it is not searched again).
  bool runs = true;
};

cublasLtMatrixLayout_t layout(DType dtype, int64_t rows, int64_t cols, int64_t ld, int batch = 1,
                              int64_t stride = 0) {
  cublasLtMatrixLayout_t l = nullptr;
  check_cublas(cublasLtMatrixLayoutCreate(&l, cuda_type(dtype), static_cast<uint64_t>(rows),
                                          static_cast<uint64_t>(cols), ld),
               "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    check_cublas(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
        "setting the batch count");
    check_cublas(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                  sizeof stride),
                 "setting the batch stride");
  }
  return l;
}

// The process-wide cuBLASLt handle, workspace and plan cache. Never destroyed: the CUDA context may be
// gone by the time static destructors run.
class Lt {
 public:
  static Lt& get() {
    static Lt* lt = new Lt();
    return *lt;
  }

  // False where a GELU epilogue has no algorithm (nothing is queued then).
  bool run(const Gemm& g) {
    const std::lock_guard lock(mutex_);
    const Plan& plan = plan_for(g);
    if (!plan.runs) return false;
    // The descriptor is read when the matmul is queued, so its bias and aux matrix may change per call.
    if (g.bias)
      check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                  sizeof g.bias),
                   "setting the bias");
    if (g.aux)
      check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                  &g.aux, sizeof g.aux),
                   "setting the GELU input");
    const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
    check_cublas(
        cublasLtMatmul(handle_, plan.desc, &alpha, g.a, plan.a, g.b, plan.b, &beta, g.c_in ? g.c_in : g.c,
                       plan.c, g.c, plan.c, &plan.algo, workspace_, kWorkspaceBytes, current_stream()),
        "cublasLtMatmul");
    return true;
  }

 private:
  struct Found {
    cublasLtMatmulAlgo_t algo;
    bool searched;  // by the heuristic for this bucket, not borrowed from a nearby one
  };

  Lt() {
    check_cublas(cublasLtCreate(&handle_), "cublasLtCreate");
    PT_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  }

  const Plan& plan_for(const Gemm& g) {
    const PlanKey key = key_of(g);
    if (auto it = plans_.find(key); it != plans_.end()) return it->second;
    if (plans_.size() >= kMaxPlans) {
      for (auto& entry : plans_) destroy(entry.second);
      plans_.clear();
    }
    if (algos_.size() >= kMaxPlans) algos_.clear();
    Plan plan = describe(g);
    try {
      const PlanKey bucket_key = bucket_of(key);
      const auto known = algos_.find(bucket_key);
      const std::optional<cublasLtMatmulAlgo_t> near =
          known == algos_.end() ? searched_nearby(bucket_key) : std::nullopt;
      if (known != algos_.end() && runs(plan, known->second.algo, g.k)) {
        plan.algo = known->second.algo;
      } else if (near && runs(plan, *near, g.k)) {
        plan.algo = *near;
        algos_.emplace(bucket_key, Found{plan.algo, false});
      } else if (const std::optional<cublasLtMatmulAlgo_t> found = heuristic(g, key, plan)) {
        plan.algo = *found;
        algos_.emplace(bucket_key, Found{plan.algo, true});  // keeps a bucket's first algorithm
      } else if (g.gelu != Gelu::none) {                     // the caller runs the GEMM and the GELU apart
        destroy(plan);
        plan.runs = false;
      } else {
        throw Error("linear: cuBLASLt has no algorithm for a " + std::string(dtype_name(g.ab_type)) +
                    " GEMM m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) +
                    " k=" + std::to_string(g.k) + " into " + dtype_name(g.c_type));
      }
    } catch (...) {
      destroy(plan);
      throw;
    }
    return plans_.emplace(key, plan).first->second;
  }

  // A bucket met for the first time borrows the algorithm the heuristic found for the nearest bucket of the
  // same GEMM within 1.5x in n and k: packing meets new token counts for many steps, and the first launch
  // of a kernel the heuristic picks anew loads it (2-9 ms each on an H100: a BERT step of 30 ms took 42).
  // Borrowed algorithms are never lent on, so a run whose batches grow searches again past 1.5x.
  std::optional<cublasLtMatmulAlgo_t> searched_nearby(const PlanKey& bucket_key) const {
    constexpr double kReach = 1.5;
    const auto rest = [](PlanKey k) {
      std::get<kKeyN>(k) = std::get<kKeyK>(k) = 0;
      return k;
    };
    const auto ratio = [](int64_t a, int64_t b) {
      return static_cast<double>(std::max(a, b)) / static_cast<double>(std::min(a, b));
    };
    const PlanKey mine = rest(bucket_key);
    std::optional<cublasLtMatmulAlgo_t> best;
    double best_distance = kReach * kReach;
    for (const auto& [key, found] : algos_) {
      if (!found.searched || rest(key) != mine) continue;
      const double rn = ratio(std::get<kKeyN>(key), std::get<kKeyN>(bucket_key)),
                   rk = ratio(std::get<kKeyK>(key), std::get<kKeyK>(bucket_key));
      if (rn <= kReach && rk <= kReach && rn * rk < best_distance) best_distance = rn * rk, best = found.algo;
    }
    return best;
  }

  // The descriptor and layouts of one exact shape (cheap, no search).
  static Plan describe(const Gemm& g) {
    Plan plan;
    check_cublas(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                 "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                            tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                 "setting TRANSA");
    check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                 "setting TRANSB");
    if (const cublasLtEpilogue_t epilogue = epilogue_of(g); epilogue != CUBLASLT_EPILOGUE_DEFAULT)
      check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                  sizeof epilogue),
                   "setting the epilogue");
    if (g.bias) {
      const cudaDataType_t bias_type = cuda_type(g.c_type);
      check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                  sizeof bias_type),
                   "setting the bias type");
      check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                                  sizeof g.bias),
                   "setting the bias");
    }
    if (g.gelu != Gelu::none) {  // h, GELU's input, in D's type: the epilogue's aux matrix
      const cudaDataType_t aux_type = cuda_type(g.c_type);
      check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                  &g.aux, sizeof g.aux),
                   "setting the GELU input");
      check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &g.ld_aux,
                                                  sizeof g.ld_aux),
                   "setting the GELU input's leading dimension");
      check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                                  &aux_type, sizeof aux_type),
                   "setting the GELU input's type");
    }
    plan.a = g.trans_a ? layout(g.ab_type, g.k, g.m, g.lda, g.batch, 0)
                       : layout(g.ab_type, g.m, g.k, g.lda, g.batch, 0);
    plan.b = g.trans_b ? layout(g.ab_type, g.n, g.k, g.ldb, g.batch, g.stride_b)
                       : layout(g.ab_type, g.k, g.n, g.ldb, g.batch, g.stride_b);
    plan.c = layout(g.c_type, g.m, g.n, g.ldc, g.batch, g.stride_c);
    return plan;
  }

  // Descriptors are host objects that cuBLASLt reads when a matmul is queued, so they may go while the
  // GPU still runs matmuls described by them.
  static void destroy(Plan& plan) {
    if (plan.c) cublasLtMatrixLayoutDestroy(plan.c);
    if (plan.b) cublasLtMatrixLayoutDestroy(plan.b);
    if (plan.a) cublasLtMatrixLayoutDestroy(plan.a);
    if (plan.desc) cublasLtMatmulDescDestroy(plan.desc);
    plan = Plan{};
  }

  // Whether algo (found for another shape of the bucket) runs this exact shape within the workspace.
  bool runs(const Plan& plan, const cublasLtMatmulAlgo_t& algo, int64_t k) const {
    cublasLtMatmulHeuristicResult_t result{};
    return cublasLtMatmulAlgoCheck(handle_, plan.desc, plan.a, plan.b, plan.c, plan.c, &algo, &result) ==
               CUBLAS_STATUS_SUCCESS &&
           result.workspaceSize <= kWorkspaceBytes && splits_right(algo, k);
  }

  // cuBLAS 13.0 on an H100 split an odd k = 4097 two ways and dropped its last element (a weight gradient
  // without its last token; bench_cublaslt_algos): two-way split-K runs even k only. Three- and more-way
  // splits summed every element of the odd k tried (4097, 16371).
  static bool splits_right(const cublasLtMatmulAlgo_t& algo, int64_t k) {
    int split = 1;
    size_t written = 0;
    check_cublas(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &split,
                                                      sizeof split, &written),
                 "reading an algorithm's split-K");
    return split != 2 || k % 2 == 0;
  }

  // The heuristic's first algorithm that splits k right; none where cuBLASLt has none for the GEMM.
  std::optional<cublasLtMatmulAlgo_t> heuristic(const Gemm& g, const PlanKey& key, const Plan& plan) const {
    cublasLtMatmulPreference_t pref = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t workspace = kWorkspaceBytes;
    const uint32_t align_a = std::get<10>(key), align_b = std::get<11>(key), align_c = std::get<12>(key);
    check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace, sizeof workspace),
                 "setting the workspace size");
    check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                      &align_a, sizeof align_a),
                 "setting the alignment of A");
    check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                      &align_b, sizeof align_b),
                 "setting the alignment of B");
    check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                      &align_c, sizeof align_c),
                 "setting the alignment of C");
    check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                      &align_c, sizeof align_c),
                 "setting the alignment of D");
    cublasLtMatmulHeuristicResult_t results[kHeuristicResults]{};
    int found = 0;
    const auto search = [&] {
      found = 0;
      if (cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
                                         kHeuristicResults, results, &found) != CUBLAS_STATUS_SUCCESS)
        found = 0;
      return std::find_if(results, results + found, [&](const cublasLtMatmulHeuristicResult_t& r) {
        return splits_right(r.algo, g.k);
      });
    };
    auto result = search();
    if (result == results + found) {  // every one split an odd k two ways: ask for no split at all
      const uint32_t unsplit = CUBLASLT_REDUCTION_SCHEME_NONE;
      check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                        &unsplit, sizeof unsplit),
                   "excluding split-K");
      result = search();
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (result == results + found) return std::nullopt;
    return result->algo;
  }

  std::mutex mutex_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<PlanKey, Plan> plans_;   // per exact shape
  std::map<PlanKey, Found> algos_;  // per bucket (bucket_of)
};

// C (=|+=) op(A) op(B), C read from c_in where given; an empty inner dimension leaves C = 0, C unchanged or
// c_in's copy. A GELU epilogue needs every dimension non-empty (the fused ops below see to it); false where
// cuBLASLt has no algorithm for it.
bool gemm(const Gemm& g) {
  if (g.m == 0 || g.n == 0) return true;
  if (g.batch > 1) return Lt::get().run(g);  // callers batch non-empty products only
  if (g.k == 0) {
    const size_t pitch = static_cast<size_t>(g.ldc * dtype_size(g.c_type));
    if (!g.accumulate)
      PT_CUDA_CHECK(cudaMemsetAsync(g.c, 0, pitch * static_cast<size_t>(g.n), current_stream()));
    else if (g.c_in && g.c_in != g.c)
      PT_CUDA_CHECK(cudaMemcpy2DAsync(g.c, pitch, g.c_in, pitch,
                                      static_cast<size_t>(g.m * dtype_size(g.c_type)),
                                      static_cast<size_t>(g.n), cudaMemcpyDeviceToDevice, current_stream()));
    return true;
  }
  // cuBLAS 13.0 answers a transposed B whose n is not a multiple of 16 with sm80 kernels: GPT-2's LM head
  // dW (n = 50257 vocab rows, k = 8192 tokens) took 1.25 ms on an H100 against 0.80 ms for n = 50256
  // (bench_cublaslt_algos). So a large such n runs as its aligned columns and a narrow tail.
  // (From 1024 columns on, an unmeasured bound: a narrow GEMM gains little and pays a second launch.)
  constexpr int64_t kAlignedColumns = 16, kSplitFrom = 1024;
  if (g.trans_b && g.gelu == Gelu::none && g.n >= kSplitFrom && g.n % kAlignedColumns != 0) {
    Gemm bulk = g, tail = g;
    bulk.n = g.n / kAlignedColumns * kAlignedColumns;
    tail.n = g.n - bulk.n;
    // Column j of op(B) = B^T is B's row j (j elements on); column j of C starts j * ldc elements on.
    tail.b = static_cast<const char*>(g.b) + bulk.n * dtype_size(g.ab_type);
    tail.c = static_cast<char*>(g.c) + bulk.n * g.ldc * dtype_size(g.c_type);
    if (g.c_in) tail.c_in = static_cast<const char*>(g.c_in) + bulk.n * g.ldc * dtype_size(g.c_type);
    return Lt::get().run(bulk) && Lt::get().run(tail);
  }
  return Lt::get().run(g);
}

// cuBLASLt's GELU aux matrix: leading dimension (in elements) divisible by 8 and at least D's rows, and we
// ask for a 16-byte aligned start as its other operands have.
bool aux_fits(const Tensor& h, int64_t ld) { return ld % 8 == 0 && alignment(h.data) >= 16; }

// y = x W^T, added to C (c_in, or y itself) when accumulating, plus the bias in the epilogue where it fits
// (linear_forward's rule), else after.
void forward_gemm(const Tensor& x, const Tensor& w, const Tensor& y, bool accumulate, const void* c_in,
                  const Tensor& bias) {
  const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
  const bool epilogue = !bias.empty() && bias.dtype == y.dtype && alignment(bias.data) >= 16 && K > 0;
  Gemm g{true, false, N, M, K, w.data, K, x.data, K, y.data, y.shape[1], x.dtype, y.dtype, accumulate};
  g.bias = epilogue ? bias.data : nullptr;
  g.c_in = c_in;
  gemm(g);
  if (!bias.empty() && !epilogue) bias_add(y, bias);
}

// dw [N,K] (=|+=) dy^T x, computed column-major as dw^T [K,N] = x^T op_T(dy^T).
Gemm weight_grad_gemm(const Tensor& dy, const Tensor& x, const Tensor& dw, Write mode) {
  const int64_t M = x.shape[0], K = x.shape[1], N = dw.shape[0], ldy = dy.shape[1];
  const bool accumulate = mode == Write::accumulate;
  return {false, true, K, N, M, x.data, K, dy.data, ldy, dw.data, K, x.dtype, dw.dtype, accumulate};
}

}  // namespace

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& y, Write mode, const Tensor& bias) {
  forward_gemm(x, w, y, mode == Write::accumulate, nullptr, bias);
}

void linear_residual_forward(const Tensor& x, const Tensor& w, const Tensor& residual, const Tensor& y,
                             const Tensor& bias) {
  forward_gemm(x, w, y, true, residual.data, bias);
}

void linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& dx, Write dx_mode,
                     const Tensor& dw, Write dw_mode) {
  const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0], ldy = dy.shape[1];
  if (!dx.empty())
    gemm({false, false, K, M, N, w.data, K, dy.data, ldy, dx.data, K, x.dtype, dx.dtype,
          dx_mode == Write::accumulate});
  if (!dw.empty()) gemm(weight_grad_gemm(dy, x, dw, dw_mode));
}

// One batched GEMM when the dy and the dw are each equally spaced (x shared), else one each.
void linear_weight_grads(std::span<const Tensor> dy, const Tensor& x, std::span<const Tensor> dw,
                         Write mode) {
  // The elements between consecutive tensors' starts where it is one positive stride, else 0.
  const auto stride = [](std::span<const Tensor> t) -> int64_t {
    const int64_t size = dtype_size(t[0].dtype);
    const auto at = [&](size_t i) { return reinterpret_cast<intptr_t>(t[i].data); };
    const int64_t bytes = t.size() > 1 ? at(1) - at(0) : 0;
    for (size_t i = 1; i < t.size(); ++i)
      if (at(i) - at(i - 1) != bytes) return 0;
    return bytes > 0 && bytes % size == 0 ? bytes / size : 0;
  };
  const int64_t stride_dy = stride(dy), stride_dw = stride(dw);
  if (dy.size() > 1 && x.shape[0] > 0 && stride_dy > 0 && stride_dw > 0) {
    Gemm g = weight_grad_gemm(dy[0], x, dw[0], mode);
    g.batch = static_cast<int>(dy.size());
    g.stride_b = stride_dy;
    g.stride_c = stride_dw;
    gemm(g);
    return;
  }
  for (size_t i = 0; i < dy.size(); ++i) gemm(weight_grad_gemm(dy[i], x, dw[i], mode));
}

// The bias epilogue takes the bias in D's type (linear_forward's rule): an f32 bias beside bf16 h goes the
// unfused way.
bool linear_gelu_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& h,
                         const Tensor& act) {
  const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
  const bool bias_fits = bias.empty() || (bias.dtype == h.dtype && alignment(bias.data) >= 16);
  if (M > 0 && N > 0 && K > 0 && bias_fits && aux_fits(h, N)) {
    Gemm g{true, false, N, M, K, w.data, K, x.data, K, act.data, N, x.dtype, act.dtype, false};
    g.bias = bias.empty() ? nullptr : bias.data;
    g.gelu = Gelu::forward;
    g.aux = h.data;
    g.ld_aux = N;
    if (gemm(g)) return true;
  }
  cuda::linear_forward(x, w, h, Write::overwrite, bias);  // qualified: ops::linear_forward is a candidate
  cuda::gelu_forward(h, act);
  return false;
}

// DGELU_BGRAD would also give the up projection's bias gradient, but it overwrites it in D's type (bf16)
// while our f32 gradients accumulate over micro-batches: rather than an f32 scratch and an add, the simpler
// bias_backward pass on dh stays (it sums in f32, as before). dh is overwritten (beta = 0), as the MLP's
// backward needs.
bool linear_dgelu_backward(const Tensor& dy, const Tensor& w, const Tensor& h, const Tensor& dh) {
  const int64_t M = h.shape[0], K = h.shape[1], N = w.shape[0], ldy = dy.shape[1];
  if (M > 0 && N > 0 && K > 0 && aux_fits(h, K)) {
    Gemm g{false, false, K, M, N, w.data, K, dy.data, ldy, dh.data, K, h.dtype, dh.dtype, false};
    g.gelu = Gelu::backward;
    g.aux = h.data;
    g.ld_aux = K;
    if (gemm(g)) return true;
  }
  // linear_backward's dx with h standing in for the layer's input (its shape and type; no dw, so unread).
  cuda::linear_backward(dy, h, w, dh, Write::overwrite, Tensor(), Write::overwrite);
  cuda::gelu_backward(dh, h, dh, Tensor(), Write::overwrite);
  return false;
}

}  // namespace pt::ops::cuda
