#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <string>

#include "ops/cuda/check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/elements.cuh"
#include "ops/cuda/scratch.h"
#include "ops/cuda/stream.h"

namespace pt::ops::cuda {

namespace {

constexpr int kThreads = 256;
constexpr unsigned char kNoBadToken = 0x7f;  // memset byte: 0x7f7f7f7f exceeds every token index

// first_bad may be null: the caller checked the ids, and a bad one is only kept out of the table.
__device__ __forceinline__ bool valid_id(int32_t id, int64_t V, int64_t t, int* first_bad) {
  if (id >= 0 && id < V) return true;
  if (first_bad) atomicMin(first_bad, static_cast<int>(t));
  return false;
}

// One thread per output element; a row with a bad id is zeroed and, with first_bad, reported.
template <class T>
__global__ void forward_kernel(const int32_t* __restrict__ ids, const T* __restrict__ table,
                               T* __restrict__ out, int64_t T_, int64_t V, int64_t C, int* first_bad) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= T_ * C) return;
  const int64_t t = i / C, c = i % C;
  const int32_t id = ids[t];
  const bool ok = c == 0 && first_bad ? valid_id(id, V, t, first_bad) : id >= 0 && id < V;
  out[i] = ok ? table[int64_t{id} * C + c] : T{};
}

// Sort keys: the id, or V for a bad id so that its tokens form a bucket past the table that nobody adds;
// values: the token index.
__global__ void sort_input_kernel(const int32_t* __restrict__ ids, int64_t T_, int64_t V, int32_t* keys,
                                  int32_t* tokens, int* first_bad) {
  const int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= T_) return;
  keys[t] = valid_id(ids[t], V, t, first_bad) ? ids[t] : static_cast<int32_t>(V);
  tokens[t] = static_cast<int32_t>(t);
}

// The backward sums, per id, the dout rows of its tokens. The sorted tokens are cut into chunks of
// kChunk positions; a bucket of equal ids can span many chunks (a frequent token, the pad id of a padded
// batch), so no single thread may walk a whole bucket. Phase 1, block (chunk, column tile): sums each
// bucket piece inside the chunk in token order; a bucket wholly inside the chunk goes straight into the
// table, a piece that continues the previous chunk's bucket is stored as the chunk's head, and the piece
// that starts a bucket running on into the next chunk as its tail. Phase 2, same grid: the chunk where
// such a bucket starts adds its tail and the following chunks' heads in order. Every (id, column) has one
// owner and a fixed summation order: no atomics, the same result every run.
constexpr int kChunk = 32;

template <class G, class D>
__global__ void chunk_sums_kernel(const int32_t* __restrict__ keys, const int32_t* __restrict__ tokens,
                                  const G* __restrict__ dout, D* __restrict__ dtable,
                                  float* __restrict__ heads, float* __restrict__ tails, int64_t T_, int64_t V,
                                  int64_t C) {
  const int64_t chunk = blockIdx.x, c = int64_t{blockIdx.y} * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t begin = chunk * kChunk, end = min(T_, begin + kChunk);
  int64_t piece = begin;
  float sum = 0;
  for (int64_t j = begin; j < end; ++j) {
    const int32_t id = keys[j];
    sum += load(dout + int64_t{tokens[j]} * C + c);
    if (j + 1 < end && keys[j + 1] == id) continue;
    const bool starts = piece == 0 || keys[piece - 1] != id;
    const bool continues = j + 1 < T_ && keys[j + 1] == id;
    if (!starts)
      heads[chunk * C + c] = sum;
    else if (continues)
      tails[chunk * C + c] = sum;
    else if (id != V)
      store(dtable + int64_t{id} * C + c, load(dtable + int64_t{id} * C + c) + sum);
    sum = 0;
    piece = j + 1;
  }
}

template <class D>
__global__ void spanning_sums_kernel(const int32_t* __restrict__ keys, D* __restrict__ dtable,
                                     const float* __restrict__ heads, const float* __restrict__ tails,
                                     int64_t T_, int64_t V, int64_t C) {
  const int64_t chunk = blockIdx.x, c = int64_t{blockIdx.y} * blockDim.x + threadIdx.x;
  const int64_t last = min(T_, (chunk + 1) * kChunk) - 1;
  if (c >= C || last + 1 >= T_) return;
  const int32_t id = keys[last];
  if (keys[last + 1] != id) return;  // the chunk's last bucket ends with it
  // The bucket starts in this chunk unless it fills it from a run before.
  if (keys[chunk * kChunk] == id && chunk > 0 && keys[chunk * kChunk - 1] == id) return;
  float sum = tails[chunk * C + c];
  for (int64_t next = chunk + 1; next * kChunk < T_ && keys[next * kChunk] == id; ++next)
    sum += heads[next * C + c];
  if (id != V) store(dtable + int64_t{id} * C + c, load(dtable + int64_t{id} * C + c) + sum);
}

// Brings the first bad token index back to the host and throws if there is one.
void throw_if_bad(const char* op, const int* first_bad, int64_t V) {
  int bad = 0;
  PT_CUDA_CHECK(cudaMemcpyAsync(&bad, first_bad, sizeof(int), cudaMemcpyDeviceToHost, current_stream()));
  sync_current_stream();
  int none = 0;
  std::memset(&none, kNoBadToken, sizeof(int));
  if (bad != none)
    throw Error(std::string(op) + ": token " + std::to_string(bad) +
                " has an id outside the embedding table of " + std::to_string(V) +
                " rows; check the tokenizer's vocab size against the model's");
}

int bits_for(int64_t max_value) {
  int bits = 1;
  while ((int64_t{1} << bits) <= max_value) ++bits;
  return bits;
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out, bool ids_checked) {
  const int64_t T = ids.shape[0], V = table.shape[0], C = table.shape[1];
  if (T * C == 0) return;
  const cudaStream_t stream = current_stream();
  int* first_bad = nullptr;
  if (!ids_checked) {
    ScratchPlan plan;
    const size_t bad_at = plan.reserve<int>(1);
    plan.allocate();
    first_bad = plan.at<int>(bad_at);
    PT_CUDA_CHECK(cudaMemsetAsync(first_bad, kNoBadToken, sizeof(int), stream));
  }
  dispatch_float("embedding_forward", "table", table.dtype, [&](auto tag) {
    using E = decltype(tag);
    forward_kernel<<<blocks_for(T * C, kThreads), kThreads, 0, stream>>>(data<int32_t>(ids), data<E>(table),
                                                                         data<E>(out), T, V, C, first_bad);
    PT_CUDA_CHECK_LAUNCH();
  });
  if (first_bad) throw_if_bad("embedding_forward", first_bad, V);
}

void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dtable, Write mode,
                        bool ids_checked) {
  const int64_t T = ids.shape[0], V = dtable.shape[0], C = dtable.shape[1];
  const cudaStream_t stream = current_stream();
  if (mode == Write::overwrite && dtable.numel() > 0)
    PT_CUDA_CHECK(cudaMemsetAsync(dtable.data, 0, static_cast<size_t>(dtable.bytes()), stream));
  if (T * C == 0) return;
  const int n = static_cast<int>(T), end_bit = bits_for(V);
  size_t sort_bytes = 0;
  PT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n, 0, end_bit, stream));
  const int64_t chunks = (T + kChunk - 1) / kChunk;
  ScratchPlan plan;
  const size_t bad_at = plan.reserve<int>(1), keys_at = plan.reserve<int32_t>(T),
               tokens_at = plan.reserve<int32_t>(T), sorted_keys_at = plan.reserve<int32_t>(T),
               sorted_tokens_at = plan.reserve<int32_t>(T), sort_at = plan.reserve<char>(int64_t(sort_bytes)),
               heads_at = plan.reserve<float>(chunks * C), tails_at = plan.reserve<float>(chunks * C);
  plan.allocate();
  int* first_bad = ids_checked ? nullptr : plan.at<int>(bad_at);
  int32_t *keys = plan.at<int32_t>(keys_at), *tokens = plan.at<int32_t>(tokens_at);
  int32_t *sorted_keys = plan.at<int32_t>(sorted_keys_at),
          *sorted_tokens = plan.at<int32_t>(sorted_tokens_at);
  float *heads = plan.at<float>(heads_at), *tails = plan.at<float>(tails_at);
  if (first_bad) PT_CUDA_CHECK(cudaMemsetAsync(first_bad, kNoBadToken, sizeof(int), stream));
  sort_input_kernel<<<blocks_for(T, kThreads), kThreads, 0, stream>>>(data<int32_t>(ids), T, V, keys, tokens,
                                                                      first_bad);
  PT_CUDA_CHECK_LAUNCH();
  PT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(plan.at<char>(sort_at), sort_bytes, keys, sorted_keys, tokens,
                                                sorted_tokens, n, 0, end_bit, stream));
  const dim3 grid(static_cast<unsigned>(chunks), blocks_for(C, kThreads));
  dispatch_float("embedding_backward", "dout", dout.dtype, [&](auto tag) {
    using G = decltype(tag);
    auto launch = [&](auto* table) {
      chunk_sums_kernel<<<grid, kThreads, 0, stream>>>(sorted_keys, sorted_tokens, data<G>(dout), table,
                                                       heads, tails, T, V, C);
      PT_CUDA_CHECK_LAUNCH();
      spanning_sums_kernel<<<grid, kThreads, 0, stream>>>(sorted_keys, table, heads, tails, T, V, C);
      PT_CUDA_CHECK_LAUNCH();
    };
    if (dtable.dtype == DType::f32)
      launch(data<float>(dtable));
    else
      launch(data<G>(dtable));
  });
  if (first_bad) throw_if_bad("embedding_backward", first_bad, V);
}

}  // namespace pt::ops::cuda
