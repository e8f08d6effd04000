// cuSPARSELt behind the three GEMMs of a 2:4 sparse linear layer. Each GEMM is written canonically as a
// row-major product D[m,n] = op(P) op(Q) of row-major operands as they lie (P the token-major one):
//   forward      y[M,N]  = x[M,K] op_T(W[N,K])       m=M n=N k=K   W sparse
//   input grad   dx[M,K] = dy[M,N] W[N,K]            m=M n=K k=N   W sparse
//   weight grad  dw[N,K] = op_T(g[M,N]) x[M,K]       m=N n=K k=M   g sparse
// cuSPARSELt takes the sparse operand as its A or its B. When the canonical order puts it in the other
// position, the product is computed transposed, D^T[n,m] = op'(Q) op'(P) with both ops flipped, into D's
// memory seen column-major. The 2:4 groups always run along k, so one dense W gives the forward and the
// input-gradient copies through different ops, and the MVUE output g needs no transpose either.
// Where the 2:4 operand is cuSPARSELt's A, our cusparselt_pack24 writes its compressed form (reading W^T
// and g^T from W and g as they lie), checked against cuSPARSELt's own compression at start-up; the f32
// weight gradient, which cuSPARSELt does not produce from bf16 operands, is its bf16 product added in.
// Beside cuSPARSELt, the forward and the input gradient can run on our own wgmma.sp kernel
// (ops/cuda/sparse_gemm_sm90.h), whose operand format one cheap pass writes from W (and from W^T).
#include "ops/cuda/sparse_gemm.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#ifdef PACKTRAIN_CUSPARSELT
#include <cusparseLt.h>

#include "core/device.h"
#include "core/device_buffer.h"
#endif

#include "core/log.h"
#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/cusparselt_pack.h"
#include "ops/cuda/sparse_gemm_sm90.h"
#include "ops/cuda/stream.h"

namespace pt::ops::cuda {

struct SparseWeight::Forms {
#ifdef PACKTRAIN_CUSPARSELT
  struct Form {
    DeviceBuffer data;
    bool fresh = false;
  };
  std::map<std::pair<SparseGemmKind, bool>, Form> by_use;  // (GEMM, the 2:4 operand is cuSPARSELt's A)
  // Our kernel's operands: W packed along K (forward) and W^T packed along N (input gradient).
  struct Packed {
    DeviceBuffer values, meta;
    bool fresh = false;
  };
  Packed wgmma_forward, wgmma_input_grad;
#endif
};

namespace {

std::atomic<int64_t> g_sparse_calls{0}, g_dense_calls{0}, g_decisions{0}, g_searches{0};

std::mutex g_mode_mutex;
std::optional<SparseGemmMode> g_mode_override;

// A weight gradient's output gradient g pruned by MVUE24 on demand: our packer prunes the rows of the
// sparse kernel as it packs them (cusparselt_pack24_mvue), so only rows that a dense GEMM or cuSPARSELt's
// own compression reads are pruned into `out` (which may be g itself).
// only_if_sparse: MVUE only buys speed for a sparse GEMM, so where the call runs dense g stays unpruned.
struct Pruning {
  Tensor g, out;
  uint64_t seed = 0;
  bool only_if_sparse = false;
  int64_t pruned_from = 0;  // rows [pruned_from, M) of out hold the pruned g

  Pruning(const Tensor& g_, const Tensor& out_, uint64_t seed_, bool only_if_sparse_)
      : g(g_), out(out_), seed(seed_), only_if_sparse(only_if_sparse_), pruned_from(g_.shape[0]) {}
  // The pruned gradient, valid from row r0 (a multiple of 4) on.
  const Tensor& from(int64_t r0) {
    if (r0 < pruned_from) {
      mvue24(g.rows(r0, pruned_from), seed, out.rows(r0, pruned_from), r0);
      pruned_from = r0;
    }
    return out;
  }
};

struct Call {
  SparseGemmKind kind;
  Tensor act;                      // the token-major operand: x (forward), dy (input grad), g (weight grad)
  Tensor x;                        // weight grad only
  SparseWeight* weight = nullptr;  // forward and input grad
  Tensor out;
  Write mode;
  const std::string& name;
  int64_t M, N, K;
  Pruning* pruning = nullptr;  // weight grad: act is the unpruned g, to be pruned by MVUE24
  bool prepacked = false;      // ... and its grid rows are already in the plan's packed operand

  // The weight gradient's g, pruned from row r0 on where MVUE is asked for.
  const Tensor& g_from(int64_t r0) const { return pruning ? pruning->from(r0) : act; }
  // This call as it runs on the dense path: without pruning where it prunes only for a sparse GEMM.
  Call dense_form() const {
    Call d = *this;
    if (pruning && pruning->only_if_sparse) d.pruning = nullptr;
    return d;
  }
};

// The call's GEMM over rows [r0, r1) on cuBLASLt, into out: those rows of the output (forward, input
// grad) or all of dw (weight grad, summing over those rows only).
void dense(const Call& c, int64_t r0, int64_t r1, const Tensor& out, Write mode) {
  switch (c.kind) {
    case SparseGemmKind::forward:
      return linear_forward(c.act.rows(r0, r1), c.weight->dense(), out, mode, Tensor());
    case SparseGemmKind::input_grad:  // linear_backward takes its [M,K] shape and dtype from x: out has both
      return linear_backward(c.act.rows(r0, r1), out, c.weight->dense(), out, mode, Tensor(), mode);
    case SparseGemmKind::weight_grad:  // ... and N from w, which it reads only for dx: out is [N,K]
      return linear_backward(c.g_from(r0).rows(r0, r1), c.x.rows(r0, r1), out, Tensor(), mode, out, mode);
  }
}

#ifdef PACKTRAIN_CUSPARSELT

void check_lt(cusparseStatus_t status, const char* what) {
  if (status != CUSPARSE_STATUS_SUCCESS)
    throw Error(std::string("cuSPARSELt: ") + what + " failed: " + cusparseLtGetErrorName(status) + " (" +
                cusparseLtGetErrorString(status) + ")");
}

cudaDataType lt_type(DType dtype) { return dtype == DType::f32 ? CUDA_R_32F : CUDA_R_16BF; }

cusparseOperation_t lt_op(bool trans) {
  return trans ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
}

constexpr uint32_t kAlignment = 16;  // bytes; eligible() checks every pointer
// cuSPARSELt 0.8's GEMMs read whole k-tiles of a compressed operand: where the contraction is not a
// multiple of their tile (64 and 128 seen) they read up to 512 bytes past the size it reports
// (compute-sanitizer). Compressed buffers keep this much zeroed slack after it.
constexpr size_t kCompressedSlack = 16 << 10;

// dst grown (if need be) to a compressed operand of `bytes` and the slack after it.
void* fit_compressed(DeviceBuffer& dst, size_t bytes) {
  if (dst.bytes() < bytes + kCompressedSlack) dst = DeviceBuffer(bytes + kCompressedSlack);
  return dst.data();
}

// A row-major matrix as stored, and whether the product reads it transposed.
struct Stored {
  int64_t rows = 0, cols = 0;
  bool trans = false;
};

// One GEMM as cuSPARSELt is asked to compute it: D[m,n] = op(A) op(B), D row-major, or column-major
// when `swapped` (A is then the canonical Q: the transposed product). `packed`: the 2:4 A is written by
// cusparselt_pack24 as a row-major op-N matrix, from the transpose of the stored tensor when
// `pack_transposed` (W^T for the input gradient, g^T for the weight gradient).
struct Arrangement {
  Stored a, b;
  bool sparse_a = false;
  bool swapped = false;
  bool packed = false, pack_transposed = false;
  int64_t m = 0, n = 0;
  // The weight gradient's g^T written by our packer: where MVUE pruning can happen on the way.
  bool packs_transposed() const { return packed && pack_transposed; }
};

// The canonical arrangement with the 2:4 operand in the asked position; with own_pack, a 2:4 A whose
// shape cusparselt_pack24 takes is recast as the row-major op-N matrix that it writes.
Arrangement arrange(SparseGemmKind kind, int64_t M, int64_t N, int64_t K, bool sparse_a, bool own_pack) {
  Stored p, q;
  int64_t m = 0, n = 0;
  bool p_sparse = false;
  switch (kind) {
    case SparseGemmKind::forward:
      p = {M, K, false}, q = {N, K, true}, m = M, n = N;
      break;
    case SparseGemmKind::input_grad:
      p = {M, N, false}, q = {N, K, false}, m = M, n = K;
      break;
    case SparseGemmKind::weight_grad:
      p = {M, N, true}, q = {M, K, false}, m = N, n = K, p_sparse = true;
      break;
  }
  Arrangement arr =
      p_sparse == sparse_a
          ? Arrangement{p, q, sparse_a, false, false, false, m, n}
          : Arrangement{
                {q.rows, q.cols, !q.trans}, {p.rows, p.cols, !p.trans}, sparse_a, true, false, false, n, m};
  if (sparse_a && own_pack) {
    const Stored a = arr.a;
    const int64_t rows = a.trans ? a.cols : a.rows, cols = a.trans ? a.rows : a.cols;
    if (cusparselt_pack_fits(rows, cols))
      arr.a = {rows, cols, false}, arr.packed = true, arr.pack_transposed = a.trans;
  }
  return arr;
}

// cuSPARSELt objects, destroyed only when a plan under construction is abandoned.
struct MatDesc {
  cusparseLtMatDescriptor_t d{};
  bool live = false;
  MatDesc() = default;
  MatDesc(const MatDesc&) = delete;
  MatDesc& operator=(const MatDesc&) = delete;
  ~MatDesc() {
    if (live) cusparseLtMatDescriptorDestroy(&d);
  }
  void init(const cusparseLtHandle_t& h, const Stored& s, bool sparse, DType dtype) {
    if (sparse)
      check_lt(cusparseLtStructuredDescriptorInit(&h, &d, s.rows, s.cols, s.cols, kAlignment, lt_type(dtype),
                                                  CUSPARSE_ORDER_ROW, CUSPARSELT_SPARSITY_50_PERCENT),
               "cusparseLtStructuredDescriptorInit");
    else
      check_lt(cusparseLtDenseDescriptorInit(&h, &d, s.rows, s.cols, s.cols, kAlignment, lt_type(dtype),
                                             CUSPARSE_ORDER_ROW),
               "cusparseLtDenseDescriptorInit");
    live = true;
  }
};

// The kernel cusparseLtMatmulSearch picked for one bucket, applied to the plans of its other sizes.
struct AlgConfig {
  int id = 0, split_k = 1, split_k_buffers = 1;
  cusparseLtSplitKMode_t split_k_mode = CUSPARSELT_SPLIT_K_MODE_ONE_KERNEL;
};

struct Plan {
  Arrangement arr;
  DType out = DType::bf16;  // D's type: bf16 for an f32 weight gradient too (converted after)
  MatDesc a, b, d;
  cusparseLtMatmulDescriptor_t matmul{};
  cusparseLtMatmulAlgSelection_t alg{};
  cusparseLtMatmulPlan_t plan{};
  bool alg_live = false, plan_live = false;
  size_t workspace = 0;
  AlgConfig config;  // cuSPARSELt's default kernel unless searched

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (plan_live) cusparseLtMatmulPlanDestroy(&plan);
    if (alg_live) cusparseLtMatmulAlgSelectionDestroy(&alg);
  }
};

// Device memory that only grows. cudaFree waits for the device, so no queued kernel still uses it.
class GrowBuffer {
 public:
  void* get(size_t bytes) {
    if (bytes > capacity_) {
      if (data_) PT_CUDA_CHECK(cudaFree(data_));
      data_ = nullptr;
      capacity_ = 0;
      PT_CUDA_CHECK(cudaMalloc(&data_, bytes));
      capacity_ = bytes;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// Stream-ordered memory for the duration of one autotuning decision.
class Transient {
 public:
  explicit Transient(size_t bytes) { PT_CUDA_CHECK(cudaMallocAsync(&data_, bytes, current_stream())); }
  Transient(const Transient&) = delete;
  Transient& operator=(const Transient&) = delete;
  ~Transient() { cudaFreeAsync(data_, current_stream()); }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

class Event {
 public:
  Event() { PT_CUDA_CHECK(cudaEventCreate(&e_)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { cudaEventDestroy(e_); }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_{};
};

// One way to run a candidate for timing: prepare (untimed, may be empty), then run.
struct Timed {
  std::function<void()> prepare, run;
};

// Median milliseconds of each candidate on the current stream, timed in turn round after round after a
// warm-up round, so that a clock drifting under load (the GPU heating up) moves all of them alike.
std::vector<double> interleaved_median_ms(const std::vector<Timed>& candidates) {
  constexpr int kRounds = 5;
  const cudaStream_t stream = current_stream();
  Event start, stop;
  std::vector<std::vector<float>> ms(candidates.size());
  for (int round = -1; round < kRounds; ++round)
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i].prepare) candidates[i].prepare();
      PT_CUDA_CHECK(cudaEventRecord(start.get(), stream));
      candidates[i].run();
      PT_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
      PT_CUDA_CHECK(cudaEventSynchronize(stop.get()));
      float t = 0;
      PT_CUDA_CHECK(cudaEventElapsedTime(&t, start.get(), stop.get()));
      if (round >= 0) ms[i].push_back(t);
    }
  std::vector<double> median;
  for (std::vector<float>& m : ms) {
    std::sort(m.begin(), m.end());
    median.push_back(m[kRounds / 2]);
  }
  return median;
}

double median_ms(const std::function<void()>& run) { return interleaved_median_ms({{{}, run}})[0]; }

enum class Path { dense, sparse_a, sparse_b, wgmma };

const char* path_name(Path p) {
  switch (p) {
    case Path::dense:
      return "dense";
    case Path::sparse_a:
      return "sparse-a";
    case Path::sparse_b:
      return "sparse-b";
    case Path::wgmma:
      return "wgmma";
  }
  return "?";
}

// The (n, k) of our kernel's y[M, n] = x[M, k] A^T for this GEMM: A = W [N, K] for the forward, W^T [K, N]
// for the input gradient.
std::pair<int64_t, int64_t> wgmma_dims(const Call& c) {
  return c.kind == SparseGemmKind::forward ? std::pair{c.N, c.K} : std::pair{c.K, c.N};
}

// Our kernel takes the forward and the input gradient (bf16 output) at these sizes on an sm_90a GPU.
bool wgmma_eligible(const Call& c, int64_t M) {
  if (c.kind == SparseGemmKind::weight_grad || !wgmma_sparse_gemm_available()) return false;
  const auto [n, k] = wgmma_dims(c);
  return wgmma_sparse_gemm_unsupported(M, n, k).empty();
}

// d (M rows of the output) = or += the product on our kernel, W or W^T packed first when stale.
void wgmma_matmul(const Call& c, void* d, bool accumulate, int64_t M) {
  const bool forward = c.kind == SparseGemmKind::forward;
  SparseWeight::Forms& forms = c.weight->forms();
  SparseWeight::Forms::Packed& form = forward ? forms.wgmma_forward : forms.wgmma_input_grad;
  const Tensor& w = c.weight->dense();
  const int64_t N = w.shape[0], K = w.shape[1];
  if (!form.fresh) {
    if (form.values.bytes() == 0) {
      form.values = DeviceBuffer(static_cast<size_t>(sparse24_values_bytes(N, K)));
      form.meta = DeviceBuffer(static_cast<size_t>(sparse24_meta_bytes(N, K)));
    }
    // The masked weight's nonzeros are its kept entries: a kept weight that is exactly 0 adds nothing.
    if (forward)
      compress24(w.data, nullptr, N, K, form.values.data(), form.meta.data(), nullptr);
    else
      compress24_transposed(w.data, nullptr, N, K, form.values.data(), form.meta.data(), nullptr);
    form.fresh = true;
  }
  const auto [n, k] = wgmma_dims(c);
  wgmma_sparse_gemm(c.act.data, form.values.data(), form.meta.data(), d, M, n, k, accumulate ? 1.0f : 0.0f);
}

// PACKTRAIN_SPARSE_SEARCH=0 keeps cuSPARSELt's default kernel for every plan (no search at first use).
bool search_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("PACKTRAIN_SPARSE_SEARCH");
    return !(v && std::string(v) == "0");
  }();
  return enabled;
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }

// (GEMM, N, K, operand dtype, output dtype, lowest M0 of the octave)
using BucketKey = std::tuple<SparseGemmKind, int64_t, int64_t, DType, DType, int64_t>;
BucketKey bucket_of(SparseGemmKind kind, int64_t M0, int64_t N, int64_t K, DType act, DType out) {
  return {kind, N, K, act, out, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(M0)))};
}

// A bf16 weight-gradient call's grid rows and bucket; none where no sparse kernel takes the shape.
struct WeightGradBucket {
  int64_t M0;
  BucketKey key;
};
std::optional<WeightGradBucket> weight_grad_bucket(int64_t M, int64_t N, int64_t K, DType out) {
  const int64_t M0 = sparse_gemm_grid_rows(M);
  if (M0 == 0 || N % 16 != 0 || K % 16 != 0) return std::nullopt;
  return WeightGradBucket{M0, bucket_of(SparseGemmKind::weight_grad, M0, N, K, DType::bf16, out)};
}
// (GEMM, sparse as A, M0, N, K, operand dtype, output dtype)
using PlanKey = std::tuple<SparseGemmKind, bool, int64_t, int64_t, int64_t, DType, DType>;

// The process-wide cuSPARSELt handle, plans, searched kernels and autotuner choices. Never destroyed:
// the CUDA context may be gone by the time static destructors run.
class Engine {
 public:
  // nullptr where cuSPARSELt cannot run (no GPU, no sparse tensor cores, init failure), said once.
  static Engine* get() {
    static Engine* engine = create();
    return engine;
  }

  std::mutex mutex;

  // The call on the sparse kernel for its grid rows and on cuBLASLt for the rest; false to leave all of
  // it to the caller's dense GEMM.
  bool run(const Call& c, SparseGemmMode mode) {
    const int64_t M0 = sparse_gemm_grid_rows(c.M);
    if (M0 == 0 || !eligible(c)) return false;
    const BucketKey bucket = bucket_of(c.kind, M0, c.N, c.K, c.act.dtype, c.out.dtype);
    const Path path = choose(c, M0, bucket, mode);
    if (path == Path::dense) return false;
    if (path == Path::wgmma) {  // every row: the kernel masks the last tile
      wgmma_matmul(c, c.out.data, c.mode == Write::accumulate, c.M);
      return true;
    }
    Plan* plan = plan_for(c, M0, bucket, path == Path::sparse_a, nullptr);
    if (!plan) return false;
    matmul(c, *plan, c.out.data, c.mode == Write::accumulate);
    if (M0 < c.M) {
      if (c.kind == SparseGemmKind::weight_grad)
        dense(c, M0, c.M, c.out, Write::accumulate);
      else
        dense(c, M0, c.M, c.out.rows(M0, c.M), c.mode);
    }
    return true;
  }

  // Whether run() would take a sparse path for a weight-gradient call of this shape (see the header).
  bool weight_grad_sparse(int64_t M, int64_t N, int64_t K, DType out, SparseGemmMode mode) {
    const auto b = weight_grad_bucket(M, N, K, out);
    if (!b) return false;
    const auto it = choices_.find({b->key, mode});
    return it == choices_.end() || it->second != Path::dense;
  }

  // The weight's compressed copy for this GEMM and arrangement, made with the plan at hand when stale.
  // The copy depends on the sparse operand's descriptor, op and position, which all plans of one
  // arrangement share, so one copy serves every M0.
  const void* weight_form(SparseWeight& w, SparseGemmKind kind, const Plan& plan) {
    SparseWeight::Forms::Form& form = w.forms().by_use[{kind, plan.arr.sparse_a}];
    if (!form.fresh) compress(plan, w.dense().data, form.data);
    form.fresh = true;
    return form.data.data();
  }

  // Whether cuSPARSELt sizes the compressed 2:4 A (row-major, op N) as cusparselt_pack24 writes it, with
  // no padding; buffer (if given) gets the scratch size its own compression needs.
  bool pack_size_agrees(const Stored& a, size_t* buffer = nullptr) {
    MatDesc desc;
    desc.init(handle_, a, true, DType::bf16);
    size_t size = 0, scratch = 0;
    check_lt(cusparseLtSpMMACompressedSize2(&handle_, &desc.d, &size, &scratch),
             "cusparseLtSpMMACompressedSize2");
    if (buffer) *buffer = scratch;
    return size == static_cast<size_t>(cusparselt_pack_bytes(a.rows, a.cols));
  }

  // Times a producer of a weight gradient's g with and without pruning and packing g on the way, before
  // that weight gradient's first decision, so that choose() charges its sparse path with the difference
  // (see sparse_weight_grad_note_producer).
  void note_producer(int64_t M, int64_t N, int64_t K, DType out, SparseGemmMode mode,
                     const std::function<void()>& plain, const std::function<bool(void*, int64_t)>& fused) {
    const auto b = weight_grad_bucket(M, N, K, out);
    if (!b || choices_.contains({b->key, mode}) || producer_ms_.contains(b->key)) return;
    const int64_t M0 = b->M0;
    const Arrangement arr = arrange(SparseGemmKind::weight_grad, M0, N, K, true, own_pack_);
    if (!arr.packs_transposed() || !pack_size_agrees(arr.a)) return;
    void* dst =
        fit_compressed(g_compressed_, static_cast<size_t>(cusparselt_pack_bytes(arr.a.rows, arr.a.cols)));
    if (!fused(dst, M0)) return;  // this producer cannot pack g
    const std::vector<double> ms = interleaved_median_ms({{{}, [&] { fused(dst, M0); }}, {{}, plain}});
    producer_ms_[b->key] = std::max(0.0, ms[0] - ms[1]);
  }

  // The buffer of a weight gradient's packed operand and the rows of g it takes, where a call of this
  // shape will run on a plan that exists and whose 2:4 operand our packer writes from g^T; {} elsewhere.
  PackedGrad packed_grad(int64_t M, int64_t N, int64_t K, DType out, SparseGemmMode mode) {
    const auto b = weight_grad_bucket(M, N, K, out);
    if (!b) return {};
    const auto choice = choices_.find({b->key, mode});
    if (choice == choices_.end() || choice->second != Path::sparse_a) return {};
    const auto plan = plans_.find({SparseGemmKind::weight_grad, true, b->M0, N, K, DType::bf16, out});
    if (plan == plans_.end() || !plan->second || !plan->second->arr.packs_transposed()) return {};
    const Stored& a = plan->second->arr.a;
    return {fit_compressed(g_compressed_, static_cast<size_t>(cusparselt_pack_bytes(a.rows, a.cols))), b->M0};
  }

  // The weight gradient's g^T for a packed plan, pruned by MVUE24 as it is packed.
  const void* pack_mvue(const Plan& plan, const Call& c) {
    const Stored& a = plan.arr.a;
    void* dst = fit_compressed(g_compressed_, static_cast<size_t>(cusparselt_pack_bytes(a.rows, a.cols)));
    cusparselt_pack24_mvue(c.act.data, a.rows, a.rows, a.cols, c.pruning->seed, dst);
    return dst;
  }

  // The plan's 2:4 operand compressed from `dense` (the stored tensor) into dst, which grows to fit: by
  // cusparselt_pack24 where the arrangement is packed, else by cuSPARSELt.
  const void* compress(const Plan& plan, const void* dense, DeviceBuffer& dst) {
    if (plan.arr.packed) {
      const Stored& a = plan.arr.a;
      void* out = fit_compressed(dst, static_cast<size_t>(cusparselt_pack_bytes(a.rows, a.cols)));
      const bool t = plan.arr.pack_transposed;
      cusparselt_pack24(dense, t ? a.rows : a.cols, t, a.rows, a.cols, out);
      return out;
    }
    size_t bytes = 0, buffer = 0;
    check_lt(cusparseLtSpMMACompressedSize(&handle_, &plan.plan, &bytes, &buffer),
             "cusparseLtSpMMACompressedSize");
    void* out = fit_compressed(dst, bytes);
    check_lt(cusparseLtSpMMACompress(&handle_, &plan.plan, dense, out, compress_scratch_.get(buffer),
                                     current_stream()),
             "cusparseLtSpMMACompress");
    return out;
  }

 private:
  static Engine* create() {
    if (cuda_device_count() == 0) return nullptr;
    int device = 0, major = 0;
    PT_CUDA_CHECK(cudaGetDevice(&device));
    PT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    if (major < 8) {
      log_info("sparse GEMMs: {} has no sparse tensor cores (sm80 or newer needed): dense GEMMs",
               cuda_device_name(device));
      return nullptr;
    }
    auto* engine = new Engine();
    if (const cusparseStatus_t status = cusparseLtInit(&engine->handle_); status != CUSPARSE_STATUS_SUCCESS) {
      log_warn("sparse GEMMs: cusparseLtInit failed ({}): dense GEMMs", cusparseLtGetErrorString(status));
      delete engine;
      return nullptr;
    }
    engine->own_pack_ = engine->pack_matches(128, 64, false) && engine->pack_matches(64, 128, true);
    if (engine->own_pack_)
      log_info(
          "sparse GEMMs: 2:4 operands packed into cuSPARSELt's layout by packtrain (checked against its own "
          "compression)");
    else
      log_warn(
          "sparse GEMMs: this cuSPARSELt compresses 2:4 operands into another layout than packtrain writes: "
          "its own (slower) compression is used");
    return engine;
  }

 public:
  // Whether cusparselt_pack24 writes exactly what cusparseLtSpMMACompress2 writes for a random 2:4 A
  // [R, C] (row-major, op N, every kept value nonzero), packed from A itself or from a stored A^T.
  bool pack_matches(int64_t R, int64_t C, bool transpose) {
    size_t buffer = 0;
    if (!cusparselt_pack_fits(R, C) || !pack_size_agrees({R, C, false}, &buffer)) return false;
    MatDesc desc;
    desc.init(handle_, {R, C, false}, true, DType::bf16);
    const size_t bytes = static_cast<size_t>(cusparselt_pack_bytes(R, C));

    std::vector<uint16_t> a(static_cast<size_t>(R * C), 0), at(a.size());
    uint64_t state = 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(R * C);
    const auto next = [&] { return (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
    constexpr int kPairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
    for (int64_t r = 0; r < R; ++r)
      for (int64_t g = 0; g < C / 4; ++g) {
        const int* pair = kPairs[next() % 6];
        for (int j = 0; j < 2; ++j)  // |x| in [2^-7, 2), either sign
          a[static_cast<size_t>(r * C + 4 * g + pair[j])] =
              static_cast<uint16_t>(0x3C00 + next() % 0x400 + (next() % 2) * 0x8000);
      }
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) at[static_cast<size_t>(c * R + r)] = a[static_cast<size_t>(r * C + c)];
    DeviceBuffer d_a(a.size() * 2), d_source(a.size() * 2), ours(bytes), theirs(bytes);
    PT_CUDA_CHECK(cudaMemcpy(d_a.data(), a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    PT_CUDA_CHECK(
        cudaMemcpy(d_source.data(), (transpose ? at : a).data(), a.size() * 2, cudaMemcpyHostToDevice));
    const cudaStream_t stream = current_stream();
    check_lt(cusparseLtSpMMACompress2(&handle_, &desc.d, 1, CUSPARSE_OPERATION_NON_TRANSPOSE, d_a.data(),
                                      theirs.data(), compress_scratch_.get(buffer), stream),
             "cusparseLtSpMMACompress2");
    cusparselt_pack24(d_source.data(), transpose ? R : C, transpose, R, C, ours.data());
    std::vector<uint8_t> x(bytes), y(bytes);
    PT_CUDA_CHECK(cudaMemcpyAsync(x.data(), ours.data(), bytes, cudaMemcpyDeviceToHost, stream));
    PT_CUDA_CHECK(cudaMemcpyAsync(y.data(), theirs.data(), bytes, cudaMemcpyDeviceToHost, stream));
    sync_current_stream();
    return x == y;
  }

 private:
  // bf16 operands (dw bf16 or f32), dims multiples of 16, 16-byte aligned pointers.
  static bool eligible(const Call& c) {
    const Tensor& second = c.kind == SparseGemmKind::weight_grad ? c.x : c.weight->dense();
    const bool out_ok =
        c.out.dtype == DType::bf16 || (c.kind == SparseGemmKind::weight_grad && c.out.dtype == DType::f32);
    return c.act.dtype == DType::bf16 && second.dtype == DType::bf16 && out_ok && c.N % 16 == 0 &&
           c.K % 16 == 0 && aligned(c.act.data) && aligned(second.data) && aligned(c.out.data);
  }

  // The 2:4 operand compressed (the weight's cached copy, or g now) and the dense one, as {A, B}.
  std::pair<const void*, const void*> operands(const Call& c, const Plan& plan) {
    const void* sparse = nullptr;
    const void* other = nullptr;
    if (c.kind == SparseGemmKind::weight_grad) {
      const bool packed_g = c.pruning && plan.arr.packs_transposed();
      sparse = packed_g && c.prepacked ? g_compressed_.data()
               : packed_g              ? pack_mvue(plan, c)
                                       : compress(plan, c.g_from(0).data, g_compressed_);
      other = c.x.data;
    } else {
      sparse = weight_form(*c.weight, c.kind, plan);
      other = c.act.data;
    }
    if (plan.arr.sparse_a) return {sparse, other};
    return {other, sparse};
  }

  // Where cuSPARSELt writes D: d itself, or for an f32 weight gradient (cuSPARSELt 0.8 takes bf16 operands
  // only into a bf16 D) a bf16 buffer that finish() adds or copies into d.
  void* target(const Call& c, const Plan& plan, void* d) {
    if (plan.out == c.out.dtype) return d;
    return dw_bf16_.get(static_cast<size_t>(c.N * c.K) * dtype_size(plan.out));
  }
  void finish(const Call& c, const Plan& plan, void* d, bool accumulate) {
    if (plan.out == c.out.dtype) return;
    const Tensor product(dw_bf16_.get(0), plan.out, {c.N, c.K}, Device::cuda),
        out(d, c.out.dtype, {c.N, c.K}, Device::cuda);
    accumulate ? add(product, out) : cast(product, out);
  }

  // D (the first M0 rows of the output, or all of dw) = or += the product, g compressed first.
  void matmul(const Call& c, Plan& plan, void* d, bool accumulate) {
    const auto [a, b] = operands(c, plan);
    void* t = target(c, plan, d);
    const float alpha = 1.0f, beta = accumulate && t == d ? 1.0f : 0.0f;
    cudaStream_t stream = current_stream();
    check_lt(cusparseLtMatmul(&handle_, &plan.plan, &alpha, a, b, &beta, t, t, workspace_.get(plan.workspace),
                              &stream, 1),
             "cusparseLtMatmul");
    finish(c, plan, d, accumulate);
  }

  std::unique_ptr<Plan> make_plan(const Arrangement& arr, DType ab, DType out, const AlgConfig* config) {
    auto plan = std::make_unique<Plan>();
    plan->arr = arr;
    plan->out = out;
    plan->a.init(handle_, arr.a, arr.sparse_a, ab);
    plan->b.init(handle_, arr.b, !arr.sparse_a, ab);
    check_lt(cusparseLtDenseDescriptorInit(&handle_, &plan->d.d, arr.m, arr.n, arr.swapped ? arr.m : arr.n,
                                           kAlignment, lt_type(out),
                                           arr.swapped ? CUSPARSE_ORDER_COL : CUSPARSE_ORDER_ROW),
             "cusparseLtDenseDescriptorInit of the output");
    plan->d.live = true;
    check_lt(
        cusparseLtMatmulDescriptorInit(&handle_, &plan->matmul, lt_op(arr.a.trans), lt_op(arr.b.trans),
                                       &plan->a.d, &plan->b.d, &plan->d.d, &plan->d.d, CUSPARSE_COMPUTE_32F),
        "cusparseLtMatmulDescriptorInit");
    check_lt(
        cusparseLtMatmulAlgSelectionInit(&handle_, &plan->alg, &plan->matmul, CUSPARSELT_MATMUL_ALG_DEFAULT),
        "cusparseLtMatmulAlgSelectionInit");
    plan->alg_live = true;
    if (config) {
      set_alg(*plan, CUSPARSELT_MATMUL_ALG_CONFIG_ID, config->id);
      if (config->split_k > 1) {  // the search reports -1 when it kept split-k off
        set_alg(*plan, CUSPARSELT_MATMUL_SPLIT_K, config->split_k);
        set_alg(*plan, CUSPARSELT_MATMUL_SPLIT_K_MODE, config->split_k_mode);
        set_alg(*plan, CUSPARSELT_MATMUL_SPLIT_K_BUFFERS, config->split_k_buffers);
      }
      plan->config = *config;
    }
    check_lt(cusparseLtMatmulPlanInit(&handle_, &plan->plan, &plan->matmul, &plan->alg),
             "cusparseLtMatmulPlanInit");
    plan->plan_live = true;
    check_lt(cusparseLtMatmulGetWorkspace(&handle_, &plan->plan, &plan->workspace),
             "cusparseLtMatmulGetWorkspace");
    return plan;
  }

  template <class T>
  void set_alg(Plan& plan, cusparseLtMatmulAlgAttribute_t attribute, const T& value) {
    check_lt(cusparseLtMatmulAlgSetAttribute(&handle_, &plan.alg, attribute, &value, sizeof value),
             "cusparseLtMatmulAlgSetAttribute");
  }
  template <class T>
  void get_alg(const Plan& plan, cusparseLtMatmulAlgAttribute_t attribute, T& value) {
    check_lt(cusparseLtMatmulAlgGetAttribute(&handle_, &plan.alg, attribute, &value, sizeof value),
             "cusparseLtMatmulAlgGetAttribute");
  }

  // cusparseLtMatmulSearch on the real operands (beta = 0 into d, which it may overwrite many times).
  // It leaves the fastest kernel and split-k in the plan itself, which stays ready to run (initialising
  // it again from its algorithm selection corrupted the heap inside cuSPARSELt 0.8.0 on the H200); the
  // choice is kept for the bucket's other plans.
  void search(const Call& c, Plan& plan, void* d) {
    const auto [a, b] = operands(c, plan);
    const float alpha = 1.0f, beta = 0.0f;
    cudaStream_t stream = current_stream();
    d = target(c, plan, d);
    check_lt(cusparseLtMatmulSearch(&handle_, &plan.plan, &alpha, a, b, &beta, d, d,
                                    workspace_.get(plan.workspace), &stream, 1),
             "cusparseLtMatmulSearch");
    ++g_searches;
    AlgConfig& config = plan.config;
    get_alg(plan, CUSPARSELT_MATMUL_ALG_CONFIG_ID, config.id);
    get_alg(plan, CUSPARSELT_MATMUL_SPLIT_K, config.split_k);
    get_alg(plan, CUSPARSELT_MATMUL_SPLIT_K_MODE, config.split_k_mode);
    get_alg(plan, CUSPARSELT_MATMUL_SPLIT_K_BUFFERS, config.split_k_buffers);
    check_lt(cusparseLtMatmulGetWorkspace(&handle_, &plan.plan, &plan.workspace),
             "cusparseLtMatmulGetWorkspace");
  }

  // The plan for M0 grid rows, with the bucket's searched kernel; the first plan of a bucket searches
  // into `scratch` (an output it may overwrite) or, without one, keeps cuSPARSELt's default kernel.
  // nullptr (and a warning, once) where cuSPARSELt refuses the shape.
  Plan* plan_for(const Call& c, int64_t M0, const BucketKey& bucket, bool sparse_a, void* scratch) {
    const PlanKey key{c.kind, sparse_a, M0, c.N, c.K, c.act.dtype, c.out.dtype};
    if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
    Arrangement arr = arrange(c.kind, M0, c.N, c.K, sparse_a, own_pack_);
    if (arr.packed && !pack_size_agrees(arr.a)) arr = arrange(c.kind, M0, c.N, c.K, sparse_a, false);
    const DType out = c.kind == SparseGemmKind::weight_grad ? DType::bf16 : c.out.dtype;
    const auto searched = searched_.find({bucket, sparse_a});
    std::unique_ptr<Plan> plan;
    try {
      if (searched != searched_.end()) {
        try {
          plan = make_plan(arr, c.act.dtype, out, &searched->second);
        } catch (const Error&) {  // the kernel of another size may not fit this one
          plan = make_plan(arr, c.act.dtype, out, nullptr);
        }
      } else {
        plan = make_plan(arr, c.act.dtype, out, nullptr);
        if (scratch && search_enabled()) {
          search(c, *plan, scratch);
          searched_[{bucket, sparse_a}] = plan->config;
        }
      }
    } catch (const Error& e) {
      log_warn(
          "sparse GEMMs: {} {} M={} N={} K={} with the 2:4 operand as cuSPARSELt's {}: {}; dense instead",
          c.name, sparse_gemm_kind_name(c.kind), M0, c.N, c.K, sparse_a ? "A" : "B", e.what());
      plan.reset();
    }
    return (plans_[key] = std::move(plan)).get();
  }

  // The bucket's path in this mode, decided on first use: each allowed sparse arrangement gets its
  // searched plan, then (with more than one candidate) all are timed on the call's operands, writing
  // to the real output when the call overwrites it anyway, else to a transient buffer.
  Path choose(const Call& c, int64_t M0, const BucketKey& bucket, SparseGemmMode mode) {
    const auto key = std::make_pair(bucket, mode);
    if (auto it = choices_.find(key); it != choices_.end()) return it->second;

    std::vector<Path> candidates;
    if (mode == SparseGemmMode::automatic || mode == SparseGemmMode::sparse ||
        mode == SparseGemmMode::sparse_a)
      candidates.push_back(Path::sparse_a);
    if (mode == SparseGemmMode::automatic || mode == SparseGemmMode::sparse ||
        mode == SparseGemmMode::sparse_b)
      candidates.push_back(Path::sparse_b);

    const bool rows_out = c.kind != SparseGemmKind::weight_grad;
    const int64_t out_rows = rows_out ? M0 : c.N, out_cols = rows_out ? c.out.shape[1] : c.K;
    std::optional<Transient> transient;
    if (c.mode == Write::accumulate)
      transient.emplace(static_cast<size_t>(out_rows * out_cols * dtype_size(c.out.dtype)));
    const Tensor scratch(transient ? transient->data() : c.out.data, c.out.dtype, {out_rows, out_cols},
                         Device::cuda);

    std::vector<Plan*> plans;  // cuSPARSELt's, nullptr for the other paths
    std::erase_if(candidates, [&](Path p) {
      Plan* plan = plan_for(c, M0, bucket, p == Path::sparse_a, scratch.data);
      if (plan) plans.push_back(plan);
      return plan == nullptr;
    });
    // Only when asked for: its first GPU run gave wrong products under load (docs/sparse24.md), and the
    // fix is not yet checked on the GPU.
    if (mode == SparseGemmMode::wgmma && wgmma_eligible(c, M0)) {
      candidates.push_back(Path::wgmma);
      plans.push_back(nullptr);
    }
    if (mode == SparseGemmMode::automatic) {
      candidates.push_back(Path::dense);
      plans.push_back(nullptr);
    }

    // A cuSPARSELt path on the weight also pays for compressing W (or W^T) again after every optimizer
    // step: its time is charged in full to the call, as if the weight ran one GEMM of this kind per
    // update (no gradient accumulation), so that automatic mode never loses to dense over a whole step.
    std::vector<double> ms(candidates.size(), -1.0), compress_ms(candidates.size(), 0.0),
        producer_ms(candidates.size(), -1.0);
    const auto producer = producer_ms_.find(bucket);
    if (candidates.size() > 1) {
      std::vector<char> failed(candidates.size(), 0);
      const auto guarded = [&](size_t i, std::function<void()> f) -> std::function<void()> {
        return [&, i, f = std::move(f)] {
          if (failed[i]) return;
          try {
            f();
          } catch (const Error& e) {
            log_warn("sparse GEMMs: {} {} {} failed: {}", c.name, sparse_gemm_kind_name(c.kind),
                     path_name(candidates[i]), e.what());
            failed[i] = 1;
          }
        };
      };
      // Timing prunes g into a copy where a dense decision keeps g as it came.
      std::optional<Transient> pruned_copy;
      std::optional<Pruning> timing_pruning;
      if (c.pruning && c.pruning->only_if_sparse) {
        pruned_copy.emplace(static_cast<size_t>(c.act.numel() * dtype_size(c.act.dtype)));
        timing_pruning.emplace(
            c.act, Tensor(pruned_copy->data(), c.act.dtype, {c.act.shape[0], c.act.shape[1]}, Device::cuda),
            c.pruning->seed, false);
      }
      std::vector<Call> timed(candidates.size(), c);
      std::vector<Timed> runs;
      for (size_t i = 0; i < candidates.size(); ++i) {
        const Path path = candidates[i];
        Plan* plan = plans[i];
        if (timing_pruning) timed[i].pruning = path == Path::dense ? nullptr : &*timing_pruning;
        // A g whose producer prunes and packs it on the way: the GEMM from the packed operand, plus
        // what packing adds to that producer, instead of this call's own packing pass.
        timed[i].prepacked =
            plan && c.pruning && plan->arr.packs_transposed() && producer != producer_ms_.end();
        if (timed[i].prepacked) producer_ms[i] = producer->second;
        runs.push_back({timed[i].prepacked ? guarded(i, [&, plan] { pack_mvue(*plan, c); }) : nullptr,
                        guarded(i, [&, i, path, plan] {
                          if (plan)
                            matmul(timed[i], *plan, scratch.data, false);
                          else if (path == Path::wgmma)
                            wgmma_matmul(c, scratch.data, false, M0);
                          else
                            dense(timed[i], 0, M0, scratch, Write::overwrite);
                        })});
      }
      const std::vector<double> gemm_ms = interleaved_median_ms(runs);
      for (size_t i = 0; i < candidates.size(); ++i) {
        Plan* plan = plans[i];
        if (plan && c.weight && !failed[i]) {
          DeviceBuffer compressed;
          guarded(i, [&] {
            compress_ms[i] = median_ms([&] { compress(*plan, c.weight->dense().data, compressed); });
          })();
        }
        if (!failed[i]) ms[i] = gemm_ms[i] + std::max(producer_ms[i], 0.0) + compress_ms[i];
      }
    }
    Path best = Path::dense;
    double best_ms = -1;
    for (size_t i = 0; i < candidates.size(); ++i)
      if (candidates.size() == 1 || (ms[i] >= 0 && (best_ms < 0 || ms[i] < best_ms)))
        best = candidates[i], best_ms = ms[i];

    std::string times;
    for (size_t i = 0; i < candidates.size(); ++i) {
      times += fmt::format("{}{} ", times.empty() ? "" : ", ", path_name(candidates[i]));
      times += ms[i] >= 0 ? fmt::format("{:.3f} ms", ms[i]) : std::string("untimed");
      if (compress_ms[i] > 0) times += fmt::format(" (W compression {:.3f} ms of it)", compress_ms[i]);
      if (producer_ms[i] >= 0)
        times += fmt::format(" (g pruned and packed by its producer: {:.3f} ms of it)", producer_ms[i]);
      if (plans[i])
        times += fmt::format(" (kernel {}, split-k {})", plans[i]->config.id, plans[i]->config.split_k);
    }
    log_info("sparse GEMMs: {} {} M={} (bucket {}-{}) N={} K={} {}->{} [{}] mode {}: {}", c.name,
             sparse_gemm_kind_name(c.kind), M0, std::get<5>(bucket), 2 * std::get<5>(bucket) - 1, c.N, c.K,
             dtype_name(c.act.dtype), dtype_name(c.out.dtype), times.empty() ? "no sparse kernel" : times,
             sparse_gemm_mode_name(mode), path_name(best));
    ++g_decisions;
    choices_[key] = best;
    return best;
  }

  cusparseLtHandle_t handle_{};
  bool own_pack_ = false;  // cusparselt_pack24 writes cuSPARSELt's layout (checked at start-up)
  GrowBuffer workspace_, compress_scratch_, dw_bf16_;
  DeviceBuffer g_compressed_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;  // nullptr: cuSPARSELt refused that shape
  std::map<std::pair<BucketKey, bool>, AlgConfig> searched_;
  std::map<std::pair<BucketKey, SparseGemmMode>, Path> choices_;
  std::map<BucketKey, double> producer_ms_;  // note_producer's measurements, for weight-gradient buckets
};

#endif  // PACKTRAIN_CUSPARSELT

void run(const Call& c) {
#ifdef PACKTRAIN_CUSPARSELT
  if (const SparseGemmMode mode = sparse_gemm_mode(); mode != SparseGemmMode::dense) {
    if (Engine* engine = Engine::get()) {
      const std::lock_guard lock(engine->mutex);
      if (engine->run(c, mode)) {
        ++g_sparse_calls;
        return;
      }
    }
  }
#endif
  dense(c.dense_form(), 0, c.M, c.out, c.mode);
  ++g_dense_calls;
}

}  // namespace

SparseGemmMode parse_sparse_gemm_mode(const std::string& text) {
  if (text == "auto") return SparseGemmMode::automatic;
  if (text == "sparse") return SparseGemmMode::sparse;
  if (text == "sparse-a") return SparseGemmMode::sparse_a;
  if (text == "sparse-b") return SparseGemmMode::sparse_b;
  if (text == "wgmma") return SparseGemmMode::wgmma;
  if (text == "dense") return SparseGemmMode::dense;
  throw Error("sparse GEMM mode '" + text + "' is not one of auto, sparse, sparse-a, sparse-b, wgmma, dense");
}

const char* sparse_gemm_mode_name(SparseGemmMode mode) {
  switch (mode) {
    case SparseGemmMode::automatic:
      return "auto";
    case SparseGemmMode::sparse:
      return "sparse";
    case SparseGemmMode::sparse_a:
      return "sparse-a";
    case SparseGemmMode::sparse_b:
      return "sparse-b";
    case SparseGemmMode::wgmma:
      return "wgmma";
    case SparseGemmMode::dense:
      return "dense";
  }
  return "?";
}

SparseGemmMode sparse_gemm_mode() {
  const std::lock_guard lock(g_mode_mutex);
  if (g_mode_override) return *g_mode_override;
  static const SparseGemmMode from_env = [] {
    const char* v = std::getenv("PACKTRAIN_SPARSE_GEMM");
    if (!v || !*v) return SparseGemmMode::automatic;
    try {
      return parse_sparse_gemm_mode(v);
    } catch (const Error& e) {
      throw Error(std::string("PACKTRAIN_SPARSE_GEMM: ") + e.what());
    }
  }();
  return from_env;
}

void set_sparse_gemm_mode(SparseGemmMode mode) {
  const std::lock_guard lock(g_mode_mutex);
  g_mode_override = mode;
}

bool cusparselt_pack_matches_library(int64_t R, int64_t C, bool transpose) {
#ifdef PACKTRAIN_CUSPARSELT
  Engine* engine = Engine::get();
  if (!engine) return false;
  const std::lock_guard lock(engine->mutex);
  return engine->pack_matches(R, C, transpose);
#else
  (void)R, (void)C, (void)transpose;
  return false;
#endif
}

bool sparse_gemm_available() {
#ifdef PACKTRAIN_CUSPARSELT
  return Engine::get() != nullptr;
#else
  return false;
#endif
}

const char* sparse_gemm_kind_name(SparseGemmKind kind) {
  switch (kind) {
    case SparseGemmKind::forward:
      return "forward";
    case SparseGemmKind::input_grad:
      return "input-grad";
    case SparseGemmKind::weight_grad:
      return "weight-grad";
  }
  return "?";
}

SparseGemmStats sparse_gemm_stats() {
  return {g_sparse_calls.load(), g_dense_calls.load(), g_decisions.load(), g_searches.load()};
}

int64_t sparse_gemm_grid_rows(int64_t M) {
  if (M < 32) return 0;
  const int64_t step =
      std::max<int64_t>(32, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(M))) / 32);
  return M / step * step;
}

SparseWeight::SparseWeight(const Tensor& w) : w_(w), forms_(std::make_unique<Forms>()) {}
SparseWeight::~SparseWeight() = default;
SparseWeight::SparseWeight(SparseWeight&&) noexcept = default;
SparseWeight& SparseWeight::operator=(SparseWeight&&) noexcept = default;

void SparseWeight::invalidate() {
#ifdef PACKTRAIN_CUSPARSELT
  if (forms_) {
    for (auto& [use, form] : forms_->by_use) form.fresh = false;
    forms_->wgmma_forward.fresh = forms_->wgmma_input_grad.fresh = false;
  }
#endif
}

void sparse_linear_forward(const Tensor& x, SparseWeight& w, const Tensor& y, Write mode,
                           const std::string& name) {
  run({SparseGemmKind::forward, x, Tensor(), &w, y, mode, name, x.shape[0], w.dense().shape[0], x.shape[1]});
}

void sparse_linear_input_grad(const Tensor& dy, SparseWeight& w, const Tensor& dx, Write mode,
                              const std::string& name) {
  run({SparseGemmKind::input_grad, dy, Tensor(), &w, dx, mode, name, dy.shape[0], dy.shape[1], dx.shape[1]});
}

#ifdef PACKTRAIN_CUSPARSELT
namespace {

// The engine, locked, for questions about weight gradients in a mode whose dW may run on cuSPARSELt; no
// engine in the dense and wgmma modes or without cuSPARSELt.
struct WeightGradEngine {
  SparseGemmMode mode = sparse_gemm_mode();
  Engine* engine = mode == SparseGemmMode::dense || mode == SparseGemmMode::wgmma ? nullptr : Engine::get();
  std::unique_lock<std::mutex> lock =
      engine ? std::unique_lock(engine->mutex) : std::unique_lock<std::mutex>();
};

}  // namespace
#endif

bool sparse_weight_grad_runs_sparse(int64_t M, int64_t N, int64_t K, DType out) {
#ifdef PACKTRAIN_CUSPARSELT
  const WeightGradEngine e;
  return e.engine && e.engine->weight_grad_sparse(M, N, K, out, e.mode);
#else
  (void)M, (void)N, (void)K, (void)out;
  return false;
#endif
}

void sparse_linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, Write mode,
                               const std::string& name) {
  run({SparseGemmKind::weight_grad, g, x, nullptr, dw, mode, name, g.shape[0], g.shape[1], x.shape[1]});
}

void sparse_weight_grad_note_producer(int64_t M, int64_t N, int64_t K, DType out,
                                      const std::function<void()>& plain,
                                      const std::function<bool(void* packed, int64_t rows)>& fused) {
#ifdef PACKTRAIN_CUSPARSELT
  const WeightGradEngine e;
  if (e.engine) e.engine->note_producer(M, N, K, out, e.mode, plain, fused);
#else
  (void)M, (void)N, (void)K, (void)out, (void)plain, (void)fused;
#endif
}

PackedGrad sparse_weight_grad_packed_operand(int64_t M, int64_t N, int64_t K, DType out) {
#ifdef PACKTRAIN_CUSPARSELT
  const WeightGradEngine e;
  return e.engine ? e.engine->packed_grad(M, N, K, out, e.mode) : PackedGrad{};
#else
  (void)M, (void)N, (void)K, (void)out;
  return {};
#endif
}

void sparse_linear_weight_grad_mvue(const Tensor& dy, uint64_t seed, const Tensor& dy_pruned, const Tensor& x,
                                    const Tensor& dw, Write mode, const std::string& name, bool prepacked,
                                    bool only_if_sparse) {
  Pruning pruning(dy, dy_pruned, seed, only_if_sparse);
  run({SparseGemmKind::weight_grad, dy, x, nullptr, dw, mode, name, dy.shape[0], dy.shape[1], x.shape[1],
       &pruning, prepacked});
}

}  // namespace pt::ops::cuda
