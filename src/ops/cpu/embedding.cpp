#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <algorithm>

namespace pt::ops::cpu {

namespace {

void check_ids(const char* op, const int32_t* ids, int64_t T, int64_t V) {
  for (int64_t t = 0; t < T; ++t)
    if (ids[t] < 0 || ids[t] >= V)
      fail(
          "{}: token {} has id {}, outside the embedding table of {} rows; check the tokenizer's vocab size "
          "against the model's",
          op, t, ids[t], V);
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out) {
  const int64_t T = ids.size(0), V = table.size(0), C = table.size(1);
  const int32_t* id = ids.ptr<int32_t>();
  check_ids("embedding_forward", id, T, V);
  dispatch_real("embedding_forward", table.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* tab = table.ptr<R>();
    R* o = out.ptr<R>();
    parallel_for(T, cpu_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) std::copy_n(tab + id[t] * C, C, o + t * C);
    });
  });
}

void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dtable, Write mode) {
  const int64_t T = ids.size(0), V = dtable.size(0), C = dtable.size(1);
  const int32_t* id = ids.ptr<int32_t>();
  check_ids("embedding_backward", id, T, V);
  dispatch_real("embedding_backward", dtable.dtype, [&](auto tag) {
    using R = decltype(tag);
    const R* dy = dout.ptr<R>();
    R* dtab = dtable.ptr<R>();
    if (mode == Write::overwrite) std::fill_n(dtab, V * C, R(0));
    // Threads own column slices, so two tokens with one id never race and sums keep token order.
    parallel_for(C, cpu_threads(), [&](int64_t c0, int64_t c1) {
      for (int64_t t = 0; t < T; ++t) {
        R* row = dtab + id[t] * C;
        const R* g = dy + t * C;
        for (int64_t c = c0; c < c1; ++c) row[c] += g[c];
      }
    });
  });
}

}  // namespace pt::ops::cpu
