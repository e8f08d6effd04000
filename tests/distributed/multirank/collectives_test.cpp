// Every collective against values each rank can compute for all ranks: small integers, so sums are exact
// in any reduction order.
#include "distributed/multirank/dist_env.h"

#include <gtest/gtest.h>

#include <numeric>

namespace pt::dist::test {
namespace {

int W() { return comm().size(); }
int R() { return comm().rank(); }

TEST(Collectives, AllReduceSumsF32AndF64) {
  const int n = 1000;
  std::vector<float> f(n);
  std::vector<double> d(n);
  for (int i = 0; i < n; ++i) f[i] = float(R() * 1000 + i), d[i] = -0.5 * (R() + 1) * i;
  Buffer<float> bf(f);
  Buffer<double> bd(d);
  comm().all_reduce_sum(bf.t());
  comm().all_reduce_sum(bd.t());
  const auto gf = bf.read();
  const auto gd = bd.read();
  const int w = W();
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(gf[i], float(1000 * w * (w - 1) / 2 + w * i)) << i;
    ASSERT_EQ(gd[i], -0.5 * (w * (w + 1) / 2) * i) << i;
  }
}

TEST(Collectives, AllReduceRejectsIntegersAndHostTensorsOnGpu) {
  Buffer<int32_t> b(std::vector<int32_t>(4, 1));
  EXPECT_THROW(comm().all_reduce_sum(b.t()), Error);
}

// Rank r's portion holds the sum of that portion; equal parts and uneven counts (one rank with none).
void check_reduce_scatter(const std::vector<int64_t>& counts) {
  const int64_t n = std::reduce(counts.begin(), counts.end(), int64_t{0});
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = float((R() + 1) * (i % 97));
  Buffer<float> b(x);
  const bool equal = std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts[0]; });
  if (equal)
    comm().reduce_scatter_sum(b.t());
  else
    comm().reduce_scatter_sum(b.t(), counts);
  const auto got = b.read();
  const int64_t begin = std::reduce(counts.begin(), counts.begin() + R(), int64_t{0});
  const float ranks = float(W() * (W() + 1) / 2);
  for (int64_t i = begin; i < begin + counts[R()]; ++i) ASSERT_EQ(got[i], ranks * float(i % 97)) << i;
}

TEST(Collectives, ReduceScatterEqualParts) { check_reduce_scatter(std::vector<int64_t>(W(), 300)); }

TEST(Collectives, ReduceScatterUnevenCounts) {
  std::vector<int64_t> counts;
  for (int r = 0; r < W(); ++r) counts.push_back(r == 1 ? 0 : 7 * r + 5);
  check_reduce_scatter(counts);
}

void check_all_gather(const std::vector<int64_t>& counts) {
  const int64_t n = std::reduce(counts.begin(), counts.end(), int64_t{0});
  const int64_t begin = std::reduce(counts.begin(), counts.begin() + R(), int64_t{0});
  std::vector<int32_t> x(static_cast<size_t>(n), -1);  // others' portions: junk to be overwritten
  for (int64_t i = begin; i < begin + counts[R()]; ++i) x[i] = R() * 100000 + int32_t(i);
  Buffer<int32_t> b(x);
  const bool equal = std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts[0]; });
  if (equal)
    comm().all_gather(b.t());
  else
    comm().all_gather(b.t(), counts);
  const auto got = b.read();
  int64_t at = 0;
  for (int r = 0; r < W(); ++r)
    for (int64_t j = 0; j < counts[r]; ++j, ++at) ASSERT_EQ(got[at], r * 100000 + int32_t(at)) << at;
}

TEST(Collectives, AllGatherEqualParts) { check_all_gather(std::vector<int64_t>(W(), 257)); }

TEST(Collectives, AllGatherUnevenCounts) {
  std::vector<int64_t> counts;
  for (int r = 0; r < W(); ++r) counts.push_back(r == 0 ? 0 : 3 * r + 1);
  check_all_gather(counts);
}

TEST(Collectives, BroadcastFromLastRank) {
  std::vector<float> x(100, float(R()));
  Buffer<float> b(x);
  comm().broadcast(b.t(), W() - 1);
  for (float v : b.read()) ASSERT_EQ(v, float(W() - 1));
}

TEST(Collectives, HostValuesAndBarrier) {
  comm().barrier();
  const double mine[2] = {double(R()), 10.0 * R() + 1};
  const auto all = comm().all_gather_host(mine);
  ASSERT_EQ(all.size(), size_t(2 * W()));
  for (int r = 0; r < W(); ++r) {
    EXPECT_EQ(all[2 * r], r);
    EXPECT_EQ(all[2 * r + 1], 10.0 * r + 1);
  }
  const auto sum = comm().sum_host(mine);
  EXPECT_EQ(sum[0], W() * (W() - 1) / 2.0);
  EXPECT_EQ(sum[1], 10.0 * W() * (W() - 1) / 2.0 + W());
}

TEST(Collectives, OutstandingCollectivesWaitedInAnyOrder) {
  std::vector<Buffer<float>> bufs;
  for (int k = 0; k < 4; ++k) bufs.emplace_back(std::vector<float>(5000, float(k + R())));
  comm().take_stats();
  std::vector<Communicator::Handle> handles;
  for (auto& b : bufs) handles.push_back(comm().start_all_reduce_sum(b.t()));
  EXPECT_TRUE(comm().pending());
  comm().wait(handles[2]);
  comm().wait(handles[0]);
  comm().wait_all();
  EXPECT_FALSE(comm().pending());
  EXPECT_THROW(comm().wait(handles[1]), Error);  // already waited for
  const CommStats stats = comm().take_stats();
  EXPECT_EQ(stats.collectives, 4);
  EXPECT_EQ(stats.bytes, 4 * 5000 * 4);
  EXPECT_GE(stats.wait_s, 0.0);
  for (int k = 0; k < 4; ++k)
    for (float v : bufs[k].read()) ASSERT_EQ(v, float(k * W() + W() * (W() - 1) / 2));
}

TEST(Collectives, BadPortionsAreErrors) {
  Buffer<float> b(std::vector<float>(size_t(W()) * 4 + 1, 0.0f));
  EXPECT_THROW(comm().reduce_scatter_sum(b.t()), Error);  // does not split evenly
  std::vector<int64_t> wrong(W(), 1);
  EXPECT_THROW(comm().all_gather(b.t(), wrong), Error);  // counts do not sum to the size
}

}  // namespace
}  // namespace pt::dist::test
