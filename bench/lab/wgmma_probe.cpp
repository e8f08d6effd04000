// bench_wgmma_probe: checks, on one tile each, the wgmma forms of the sm_90a attention backward that the
// verified forward does not use, through the kernel's own wrappers, descriptors and fragment conversions
// (wgmma_probe.h), against a CPU product; run it first when the wgmma backward fails its tests, since a
// layout bug shows here as a pattern of wrong elements:
//   S^T = K Q^T  ss m64n64k16, A and B K-major (N = 64; A from row 64 wg of a 128-row tile)
//   X Q          rs m64nDk16, A a 64 x 64 accumulator through to_a_fragments (4 k-steps), B MN-major from a
//                64-row tile (dV = P^T dO, dK = dS^T Q)
//   X^T K        X through store_a_fragments into a swizzled [128 x 64] tile, read back as an MN-major A
//                (imm-trans-a), B = K MN-major (imm-trans-b) from column D/2 wg: N = 64 a whole column block
//                at D = 128, N = 32 a start 64 bytes into the swizzle atom at D = 64 (dQ = dS K)
// Inputs are integers in [-3, 3], exact in bf16, and every sum is exact in f32: any difference is a layout
// error. Per form and head dim it prints "ok" or the wrong count, a map of 8 x 8 blocks (X: some element
// wrong) and the first wrong elements. Exit code 0 when all are right. Usage: bench_wgmma_probe
#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/device_buffer.h"
#include "core/float16.h"
#include "probe_report.h"
#include "wgmma_probe.h"

namespace {

using pt::DeviceBuffer;
using pt::lab::report;

DeviceBuffer upload_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> raw(v.size());
  for (size_t i = 0; i < v.size(); ++i) raw[i] = pt::float_to_bf16(v[i]);
  DeviceBuffer b(raw.size() * sizeof(uint16_t));
  b.upload(raw.data(), raw.size() * sizeof(uint16_t));
  return b;
}

std::vector<float> download_f32(const DeviceBuffer& b) {
  std::vector<float> out(b.bytes() / 4);
  b.download(out.data(), b.bytes());
  return out;
}

// C[m][n] = sum_c A(m, c) B(c, n) over `inner` terms, for accessors A and B.
template <class A, class B>
std::vector<float> product(int rows, int cols, int inner, A a, B b) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int m = 0; m < rows; ++m)
    for (int n = 0; n < cols; ++n) {
      double acc = 0;
      for (int c = 0; c < inner; ++c) acc += double(a(m, c)) * b(c, n);
      out[static_cast<size_t>(m * cols + n)] = static_cast<float>(acc);
    }
  return out;
}

bool run_probe(int D) {
  constexpr int kKeys = 128, kQueries = 64;
  std::mt19937 rng(static_cast<uint32_t>(D) + 11);
  std::uniform_int_distribution<int> small(-3, 3);
  const auto fill = [&](size_t n) {
    std::vector<float> v(n);
    for (float& e : v) e = float(small(rng));
    return v;
  };
  const std::vector<float> k = fill(size_t{kKeys} * D), q = fill(size_t{kQueries} * D),
                           x = fill(size_t{kKeys} * kQueries);
  const auto at = [](const std::vector<float>& v, int cols) {
    return [&v, cols](int r, int c) { return v[static_cast<size_t>(r * cols + c)]; };
  };
  const auto transposed = [](auto f) { return [f](int r, int c) { return f(c, r); }; };
  const std::vector<float> st_want = product(kKeys, kQueries, D, at(k, D), transposed(at(q, D)));
  const std::vector<float> xq_want = product(kKeys, D, kQueries, at(x, kQueries), at(q, D));
  const std::vector<float> xtk_want = product(kQueries, D, kKeys, transposed(at(x, kQueries)), at(k, D));

  DeviceBuffer dk = upload_bf16(k), dq = upload_bf16(q), dx = upload_bf16(x);
  DeviceBuffer st(st_want.size() * 4), xq(xq_want.size() * 4), xtk(xtk_want.size() * 4);
  const std::string status =
      pt::lab::wgmma_probe_backward(D, dk.data(), dq.data(), dx.data(), static_cast<float*>(st.data()),
                                    static_cast<float*>(xq.data()), static_cast<float*>(xtk.data()));
  fmt::print("probe D={}\n", D);
  if (!status.empty()) {
    fmt::print("  FAILED: {}\n", status);
    return false;
  }
  const bool st_ok = report("S^T = K Q^T (ss n64, K-major)", download_f32(st), st_want, kKeys, kQueries);
  const bool xq_ok =
      report(fmt::format("X Q (rs n{}, 64x64 acc -> A, B MN-major)", D), download_f32(xq), xq_want, kKeys, D);
  const bool xtk_ok = report(fmt::format("X^T K (ss n{}, A and B MN-major)", D / 2), download_f32(xtk),
                             xtk_want, kQueries, D);
  return st_ok && xq_ok && xtk_ok;
}

}  // namespace

int main() {
  if (pt::cuda_device_count() == 0) {
    fmt::print("bench_wgmma_probe: no CUDA GPU\n");
    return 1;
  }
  bool ok = true;
  for (int D : {64, 128}) ok = run_probe(D) && ok;
  fmt::print("{}\n", ok ? "all forms ok" : "LAYOUT ERRORS (see above)");
  return ok ? 0 : 1;
}
