// Reference varlen attention, causal (with an optional sliding window) or bidirectional. Work is split into
// (segment, kv head) tasks: a task owns the dq rows of its query heads and the dk/dv rows of its kv head
// within its segment, so GQA gradients accumulate without races, and each output is computed in a fixed order
// whatever the thread count. Tasks go longest segment first, which with a window too is the most work first.
#include "core/parallel.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/cpu/threads.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

namespace pt::ops::cpu {

namespace {

struct Segment {
  int64_t start, valid, len;  // tokens [start, start + valid) are real, the rest up to len are pads
};

struct Layout {
  int64_t T, H, Hkv, D, group;
  int64_t window;  // AttentionParams::window: 0, or how many keys up to and including its own a query sees
  bool causal;
  double scale;
  std::vector<Segment> segments;
};

// The first key (token index) that query i of `seg` attends: the segment's first, or the window's.
int64_t first_key(const Layout& l, const Segment& seg, int64_t i) {
  return l.window > 0 ? std::max(seg.start, i - l.window + 1) : seg.start;
}

// One past the last key that query i of `seg` attends: i + 1 (causal), or the segment's last real one + 1.
int64_t key_end(const Layout& l, const Segment& seg, int64_t i) {
  return l.causal ? i + 1 : seg.start + seg.valid;
}

// The first query of [begin, end) that attends key j: j or later (causal), else begin.
int64_t query_begin(const Layout& l, int64_t j, int64_t begin) {
  return l.causal ? std::max(begin, j) : begin;
}

// One past the last query of [begin, end) that attends key j: end, or with a window at most j + window.
int64_t query_end(const Layout& l, int64_t j, int64_t end) {
  return l.window > 0 ? std::min(end, j + l.window) : end;
}

Layout layout(const char* op, const AttentionParams& p) {
  Layout l{p.q.size(0), p.q.size(1), p.k.size(1), p.q.size(2), 0, p.window, p.causal, p.softmax_scale, {}};
  l.group = l.H / l.Hkv;
  if (l.scale == 0) l.scale = 1.0 / std::sqrt(double(l.D));
  const int32_t* cu = p.cu_seqlens.ptr<int32_t>();
  const int64_t S = p.cu_seqlens.size(0) - 1;
  if (cu[0] != 0 || cu[S] != l.T)
    fail("{}: cu_seqlens must run from 0 to the token count {}, got {} .. {}", op, l.T, cu[0], cu[S]);
  const int32_t* valid = p.valid_lens.empty() ? nullptr : p.valid_lens.ptr<int32_t>();
  for (int64_t s = 0; s < S; ++s) {
    const int64_t len = int64_t{cu[s + 1]} - cu[s];
    if (len < 0) fail("{}: cu_seqlens decreases at segment {} ({} then {})", op, s, cu[s], cu[s + 1]);
    const int64_t v = valid ? valid[s] : len;
    if (v < 0 || v > len) fail("{}: valid length {} of segment {} is outside [0, {}]", op, v, s, len);
    l.segments.push_back({cu[s], v, len});
  }
  return l;
}

// Runs task(segment, kv_head) for every pair, longest segments first and handed out one at a time, so a
// single long example does not leave the other threads idle.
template <class Fn>
void for_each_task(const Layout& l, Fn&& task) {
  std::vector<std::pair<int64_t, int64_t>> tasks;  // (segment, kv head)
  for (int64_t s = 0; s < static_cast<int64_t>(l.segments.size()); ++s)
    for (int64_t h = 0; h < l.Hkv; ++h) tasks.emplace_back(s, h);
  std::stable_sort(tasks.begin(), tasks.end(), [&](const auto& a, const auto& b) {
    return l.segments[static_cast<size_t>(a.first)].valid > l.segments[static_cast<size_t>(b.first)].valid;
  });
  std::atomic<size_t> next{0};
  const int threads = cpu_threads();
  parallel_for(threads, threads, [&](int64_t, int64_t) {
    for (size_t i = next++; i < tasks.size(); i = next++)
      task(l.segments[static_cast<size_t>(tasks[i].first)], tasks[i].second);
  });
}

// Eight independent partial sums let the compiler vectorize without reassociating (no -ffast-math).
template <class R>
R dot(const R* a, const R* b, int64_t n) {
  constexpr int64_t kLanes = 8;
  R lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] += a[i + l] * b[i + l];
  R sum = 0;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (R x : lane) sum += x;
  return sum;
}

template <class R>
void axpy(R alpha, const R* x, R* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

template <class R>
void forward(const AttentionParams& p, const Layout& l) {
  const R *q = p.q.ptr<R>(), *k = p.k.ptr<R>(), *v = p.v.ptr<R>();
  R *out = p.out.ptr<R>(), *lse = p.lse.ptr<R>();
  const int64_t T = l.T, H = l.H, Hkv = l.Hkv, D = l.D;
  const R scale = R(l.scale);
  for_each_task(l, [&](const Segment& seg, int64_t kvh) {
    std::vector<R> scores(static_cast<size_t>(seg.valid));  // O(L) scratch: one query row's scores
    for (int64_t h = kvh * l.group; h < (kvh + 1) * l.group; ++h) {
      for (int64_t i = seg.start; i < seg.start + seg.len; ++i) {
        R* o = out + (i * H + h) * D;
        std::fill_n(o, D, R(0));
        lse[h * T + i] = R(0);
        if (i >= seg.start + seg.valid) continue;  // pad query
        const R* qi = q + (i * H + h) * D;
        const int64_t j0 = first_key(l, seg, i), j1 = key_end(l, seg, i);
        R row_max = -std::numeric_limits<R>::infinity();
        for (int64_t j = j0; j < j1; ++j) {
          R& s = scores[static_cast<size_t>(j - seg.start)];
          s = scale * dot(qi, k + (j * Hkv + kvh) * D, D);
          row_max = std::max(row_max, s);
        }
        R sum = 0;
        for (int64_t j = j0; j < j1; ++j) {
          const R e = std::exp(scores[static_cast<size_t>(j - seg.start)] - row_max);
          sum += e;
          axpy(e, v + (j * Hkv + kvh) * D, o, D);
        }
        for (int64_t d = 0; d < D; ++d) o[d] /= sum;
        lse[h * T + i] = row_max + std::log(sum);
      }
    }
  });
}

// P_ij = exp(scale q_i.k_j - lse_i) is recomputed from the saved lse. With delta_i = dO_i.O_i (which
// equals sum_j P_ij dO_i.v_j, the softmax-backward correction): dS_ij = P_ij (dO_i.v_j - delta_i),
// dq_i += scale dS_ij k_j, dk_j += scale dS_ij q_i, dv_j += P_ij dO_i.
// Queries go in blocks, keys in the middle loop: each key's k, v, dk, dv rows are loaded once per block
// rather than once per query, which keeps long segments from streaming them through the cache per row.
template <class R>
void backward(const AttentionParams& p, const AttentionGrads& g, const Layout& l) {
  constexpr int64_t kQueryBlock = 16;
  const R *q = p.q.ptr<R>(), *k = p.k.ptr<R>(), *v = p.v.ptr<R>(), *out = p.out.ptr<R>();
  const R *lse = p.lse.ptr<R>(), *dout = g.dout.ptr<R>();
  R *dq = g.dq.ptr<R>(), *dk = g.dk.ptr<R>(), *dv = g.dv.ptr<R>();
  const int64_t T = l.T, H = l.H, Hkv = l.Hkv, D = l.D;
  const R scale = R(l.scale);
  for_each_task(l, [&](const Segment& seg, int64_t kvh) {
    const int64_t real_end = seg.start + seg.valid;
    for (int64_t j = seg.start; j < seg.start + seg.len; ++j) {
      std::fill_n(dk + (j * Hkv + kvh) * D, D, R(0));
      std::fill_n(dv + (j * Hkv + kvh) * D, D, R(0));
    }
    R delta[kQueryBlock];
    for (int64_t h = kvh * l.group; h < (kvh + 1) * l.group; ++h) {
      for (int64_t i = seg.start; i < seg.start + seg.len; ++i) std::fill_n(dq + (i * H + h) * D, D, R(0));
      for (int64_t block = seg.start; block < real_end; block += kQueryBlock) {
        const int64_t block_end = std::min(block + kQueryBlock, real_end);
        for (int64_t i = block; i < block_end; ++i)
          delta[i - block] = dot(dout + (i * H + h) * D, out + (i * H + h) * D, D);
        // Keys from the first one the block's first query attends to the last its last query attends; per
        // key, the block's queries that attend it: i >= j (causal) and, with a window, i < j + window.
        for (int64_t j = first_key(l, seg, block); j < key_end(l, seg, block_end - 1); ++j) {
          const R *kj = k + (j * Hkv + kvh) * D, *vj = v + (j * Hkv + kvh) * D;
          R *dkj = dk + (j * Hkv + kvh) * D, *dvj = dv + (j * Hkv + kvh) * D;
          for (int64_t i = query_begin(l, j, block); i < query_end(l, j, block_end); ++i) {
            const R *qi = q + (i * H + h) * D, *doi = dout + (i * H + h) * D;
            const R prob = std::exp(scale * dot(qi, kj, D) - lse[h * T + i]);
            const R ds = prob * (dot(doi, vj, D) - delta[i - block]);
            axpy(scale * ds, kj, dq + (i * H + h) * D, D);
            axpy(scale * ds, qi, dkj, D);
            axpy(prob, doi, dvj, D);
          }
        }
      }
    }
  });
}

}  // namespace

void attention_forward(const AttentionParams& p) {
  const Layout l = layout("attention_forward", p);
  dispatch_real("attention_forward", p.q.dtype, [&](auto tag) { forward<decltype(tag)>(p, l); });
}

void attention_backward(const AttentionParams& p, const AttentionGrads& g) {
  const Layout l = layout("attention_backward", p);
  dispatch_real("attention_backward", p.q.dtype, [&](auto tag) { backward<decltype(tag)>(p, g, l); });
}

}  // namespace pt::ops::cpu
