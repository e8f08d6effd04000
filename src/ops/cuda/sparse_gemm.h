// The three GEMMs of a 2:4 sparse linear layer (ops/sparse_linear.h) on sparse tensor cores through
// cuSPARSELt, each with the dense cuBLASLt GEMM on the same masked operands as the fallback:
//   forward      y[M,N]  = x[M,K] W^T     W 2:4 along K
//   input grad   dx[M,K] = dy[M,N] W      W 2:4 along N (transposable mask)
//   weight grad  dw[N,K] = g^T x          g[M,N] 2:4 along M (MVUE-pruned output gradient)
// cuSPARSELt takes the 2:4 operand either as its A or as its B operand (the other arrangement computes the
// transposed product into the same memory); both are tried. Every operand stays row-major as it lies.
//
// M (tokens) changes from step to step while cuSPARSELt plans have fixed shapes. The first M0 rows, M
// rounded down to a geometric grid (multiples of 32, and of 1/32 of M's power of two from 1024 on),
// go through the sparse kernel of a plan cached per M0; the remaining rows (under 32, or under M/32 for
// larger M) go through cuBLASLt (for dw: added to the sparse part). So no padded copies are made and no row
// beyond M is ever read. Choices are made once per GEMM, shape and octave of M0 (the bucket):
// cusparseLtMatmulSearch picks the sparse kernel, then, in automatic mode, the sparse arrangements and the
// dense GEMM are timed on the real operands (median of a few runs with CUDA events), a forward or input
// gradient on cuSPARSELt charged with compressing the weight once (it is compressed again after every
// optimizer step), and the fastest is kept and logged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "ops/write_mode.h"

namespace pt::ops::cuda {

// automatic: per bucket the fastest of dense and both cuSPARSELt arrangements. sparse: the faster cuSPARSELt
// arrangement. sparse_a / sparse_b: the 2:4 operand as cuSPARSELt's A (B) operand. wgmma: our kernel
// (ops/cuda/sparse_gemm_sm90.h) for the forward and the input gradient where it takes the shape, dense dW.
// dense: cuBLASLt only. Sparse modes still run dense where cuSPARSELt cannot: other dtypes, shapes not
// multiples of 16, operands not 16-byte aligned, fewer than 32 rows, or a plan cuSPARSELt refuses (logged
// once).
enum class SparseGemmMode { automatic, sparse, sparse_a, sparse_b, wgmma, dense };

// "auto", "sparse", "sparse-a", "sparse-b", "wgmma", "dense"; anything else fails naming the accepted values.
SparseGemmMode parse_sparse_gemm_mode(const std::string& text);
const char* sparse_gemm_mode_name(SparseGemmMode mode);
// PACKTRAIN_SPARSE_GEMM unless set_sparse_gemm_mode() chose one; `auto` by default. The autotuner charges
// every sparse path with compressing its 2:4 operand (W once per optimizer step, g every call), which
// our own packer (ops/cuda/cusparselt_pack.h) keeps at memory speed.
SparseGemmMode sparse_gemm_mode();
void set_sparse_gemm_mode(SparseGemmMode mode);

// Built with cuSPARSELt, and GPU 0 has sparse tensor cores (sm80 or newer) that cuSPARSELt accepts.
bool sparse_gemm_available();
// Whether our cusparselt_pack24 (ops/cuda/cusparselt_pack.h) writes byte for byte what cuSPARSELt's own
// compression writes for a random 2:4 A [R, C] (read from A^T when transpose); false without cuSPARSELt.
// The engine asks this once at start-up and packs with cuSPARSELt itself where it fails.
bool cusparselt_pack_matches_library(int64_t R, int64_t C, bool transpose);

enum class SparseGemmKind { forward, input_grad, weight_grad };
const char* sparse_gemm_kind_name(SparseGemmKind kind);

// Process-wide counters, for tests and benchmarks: calls whose grid rows ran on cuSPARSELt, calls that
// ran dense throughout, autotuner decisions taken and cusparseLtMatmulSearch runs.
struct SparseGemmStats {
  int64_t sparse_calls = 0, dense_calls = 0, decisions = 0, searches = 0;
};
SparseGemmStats sparse_gemm_stats();

// The rows of an M-row GEMM that run on the sparse kernel (the rest run dense): 0 below 32.
int64_t sparse_gemm_grid_rows(int64_t M);

// A 2:4 weight W[N,K] under a transposable mask, with its compressed copies for the forward (2:4 along
// K) and the input gradient (2:4 along N), in whichever operand position is used. Each copy is made
// from W when first needed after invalidate(). W must stay at its address.
class SparseWeight {
 public:
  explicit SparseWeight(const Tensor& w);
  ~SparseWeight();
  SparseWeight(SparseWeight&&) noexcept;
  SparseWeight& operator=(SparseWeight&&) noexcept;

  void invalidate();  // W's values changed
  const Tensor& dense() const { return w_; }

  struct Forms;  // the compressed copies (cuSPARSELt types stay out of this header)
  Forms& forms() { return *forms_; }

 private:
  Tensor w_;
  std::unique_ptr<Forms> forms_;
};

// Arguments as validated by the SparseLinear front end: bf16 activations and weight on cuda (other types
// run dense), dw bf16 or f32. name labels the autotuner's log line.
// y[M,N] (=|+=) x[M,K] W^T.
void sparse_linear_forward(const Tensor& x, SparseWeight& w, const Tensor& y, Write mode,
                           const std::string& name);
// dx[M,K] (=|+=) dy[M,N] W.
void sparse_linear_input_grad(const Tensor& dy, SparseWeight& w, const Tensor& dx, Write mode,
                              const std::string& name);
// Whether a weight-gradient call dw[N,K] (out dtype) = g[M,N]^T x[M,K] with bf16 g and x runs on sparse
// tensor cores in the current mode: the autotuner's choice for its bucket, true while it has not decided
// (the first call decides), false where the mode or the shape keeps it dense.
bool sparse_weight_grad_runs_sparse(int64_t M, int64_t N, int64_t K, DType out);
// dw[N,K] (=|+=) g^T x, where every column of g[M,N] keeps at most 2 of each 4 rows 4i..4i+3 (the
// MVUE24 output). A g that is not 2:4 gives wrong sparse results: the caller guarantees the pattern.
void sparse_linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, Write mode,
                               const std::string& name);
// dw[N,K] (=|+=) mvue24(dy, seed)^T x for any output gradient dy[M,N]: the result of ops::mvue24 into
// dy_pruned followed by sparse_linear_weight_grad, but where the sparse kernel's operand is packed by our
// packer the pruning happens in that pass, and dy_pruned ([M,N], may be dy) receives only the rows that
// a dense GEMM or cuSPARSELt's own compression reads; its other rows are left as they were.
// prepacked: the producer of dy has already pruned and packed its first rows into the buffer of
// sparse_weight_grad_packed_operand (for this shape and seed), so that pass is skipped.
// only_if_sparse: prune only where the GEMM runs sparse (then dw = dy^T x on the dense path, dy untouched),
// as the first call of a shape does when the autotuner decides for dense.
void sparse_linear_weight_grad_mvue(const Tensor& dy, uint64_t seed, const Tensor& dy_pruned, const Tensor& x,
                                    const Tensor& dw, Write mode, const std::string& name,
                                    bool prepacked = false, bool only_if_sparse = false);
// Where sparse_linear_weight_grad_mvue for dw[N,K] (out dtype) from dy[M,N] will run on cuSPARSELt with
// an operand our packer writes from dy^T: that operand's buffer and the rows of dy it takes (the plan's
// grid rows), for the producer of dy to prune and pack them in its own pass (swiglu_backward_mvue_packed)
// and then call with prepacked. {nullptr, 0} where the call would run otherwise, or before its first call
// (which decides and makes the plan).
struct PackedGrad {
  void* data = nullptr;
  int64_t rows = 0;
};
PackedGrad sparse_weight_grad_packed_operand(int64_t M, int64_t N, int64_t K, DType out);
// Before the first sparse_linear_weight_grad_mvue of this shape (the autotuner's decision), from a producer
// of dy that can prune and pack it on the way: times the producer plain() and fused(packed, rows) (which
// returns false where it cannot pack), so that the decision charges the sparse path with the producer's
// extra time instead of a packing pass of its own. Leaves the producer's output as plain() writes it.
void sparse_weight_grad_note_producer(int64_t M, int64_t N, int64_t K, DType out,
                                      const std::function<void()>& plain,
                                      const std::function<bool(void* packed, int64_t rows)>& fused);

}  // namespace pt::ops::cuda
