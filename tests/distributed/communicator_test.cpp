// The single-process communicator, the backend choice, the data-parallel optimizer in a world of one
// (the trainer's step exactly), and the TCP exchange of the NCCL id between threads standing in for ranks.
#include "distributed/communicator.h"

#include "core/error.h"
#include "distributed/data_parallel.h"
#include "distributed/tcp_bootstrap.h"
#include "model/init.h"
#include "ops/grad_norm.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <random>
#include <string>

namespace pt::dist {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Communicator, LocalCollectivesAreIdentities) {
  auto c = make_local_communicator(Device::cpu);
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  std::vector<float> x = {1, 2, 3, 4};
  const Tensor t = Tensor::of(x.data(), {4});
  c->all_reduce_sum(t);
  c->reduce_scatter_sum(t);
  c->all_gather(t, std::vector<int64_t>{4});
  c->broadcast(t, 0);
  c->barrier();
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4}));
  const double v[2] = {3, 4};
  EXPECT_EQ(c->sum_host(v), (std::vector<double>{3, 4}));
  EXPECT_EQ(c->take_stats().collectives, 6);
  EXPECT_EQ(c->take_stats().collectives, 0);
  EXPECT_NE(error_of([&] { c->broadcast(t, 1); }).find("root 1"), std::string::npos);
  EXPECT_NE(error_of([&] {
              c->all_reduce_sum(Tensor(x.data(), DType::f32, {4}, Device::cuda));
            }).find("is on cuda"),
            std::string::npos);
}

TEST(Communicator, BackendChoiceAndErrors) {
  EXPECT_EQ(parse_backend("nccl"), Backend::kNccl);
  EXPECT_NE(error_of([] { parse_backend("gloo"); }).find("auto, local, mpi or nccl"), std::string::npos);
  LaunchInfo one;
  EXPECT_EQ(make_communicator({}, one)->backend(), "local");
  LaunchInfo two;
  two.launcher = Launcher::kEnv, two.world_size = 2;
  CommOptions local;
  local.backend = Backend::kLocal;
  EXPECT_NE(error_of([&] { make_communicator(local, two); }).find("the local backend runs one process"),
            std::string::npos);
  CommOptions mpi_on_gpu;
  mpi_on_gpu.backend = Backend::kMpi, mpi_on_gpu.device = Device::cuda;
  EXPECT_NE(error_of([&] { make_communicator(mpi_on_gpu, two); }).find("mpi backend moves cpu tensors"),
            std::string::npos);
  CommOptions mpi;
  mpi.backend = Backend::kMpi;
  // An env launch cannot start MPI (and a build without MPI says so).
  EXPECT_NE(error_of([&] {
              make_communicator(mpi, two);
            }).find(backend_available(Backend::kMpi) ? "MPI launcher" : "no MPI"),
            std::string::npos);
  CommOptions bad;
  bad.timeout_s = 0;
  EXPECT_NE(error_of([&] { make_communicator(bad, one); }).find("timeout must be positive"),
            std::string::npos);
}

// In a world of one the data-parallel optimizer is the trainer's own step: clip_grad_norm and adamw_step
// on the full buffers, bit for bit.
TEST(DataParallelOptimizer, WorldOfOneIsThePlainStep) {
  ModelConfig config;
  config.vocab_size = 50, config.hidden_size = 16, config.intermediate_size = 24,
  config.num_hidden_layers = 2;
  config.num_attention_heads = 2, config.num_key_value_heads = 2, config.head_dim = 8;
  const ParameterLayout layout(config);
  const int64_t n = layout.total();
  auto comm = make_local_communicator(Device::cpu);
  for (bool zero1 : {false, true}) {
    const int64_t size = DataParallelOptimizer::flat_size(n, 1, zero1);
    std::vector<float> grads(static_cast<size_t>(size), 0.0f);
    std::vector<float> m(static_cast<size_t>(n), 0.0f), v(static_cast<size_t>(n), 0.0f);
    std::vector<float> ref_params = init_params(config, 1), ref_grads = grads;
    DataParallelOptimizer dp(*comm, layout, Tensor::of(grads.data(), {size}), {.zero1 = zero1});
    dp.set_params(ref_params);
    std::vector<ops::AdamWTensor> ref;
    std::vector<Tensor> ref_grad_views;
    for (const ParamInfo& p : layout.params()) {
      auto at = [&](std::vector<float>& buf) { return Tensor::of(buf.data() + p.offset, {p.numel}); };
      ref.push_back({at(ref_params), at(ref_grads), at(m), at(v), p.weight_decay()});
      ref_grad_views.push_back(at(ref_grads));
    }
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 0.1f);
    const ops::AdamWConfig adamw{1e-2, 0.9, 0.95, 1e-8, 0.1};
    for (int step = 1; step <= 3; ++step) {
      for (int64_t i = 0; i < n; ++i) grads[i] = ref_grads[i] = normal(rng);
      dp.reduce_gradients();
      EXPECT_EQ(dp.clip_grad_norm(0.5), ops::clip_grad_norm(ref_grad_views, 0.5));
      dp.step(adamw, step);
      ops::adamw_step(ref, adamw, step);
      const std::vector<float> params = dp.params_to_host();
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(params[i], ref_params[i]) << i;
    }
    const FullState s = dp.gather_state();
    EXPECT_EQ(s.m.values, m);
    EXPECT_EQ(s.v.values, v);
    EXPECT_EQ(ref_params, s.params);
    if (zero1) {  // the working weights of a world of one: every master, cast (f32 here: copied)
      const Tensor w = dp.gather_weights(nullptr);
      ASSERT_EQ(w.numel(), n);
      EXPECT_EQ(std::vector<float>(w.ptr<float>(), w.ptr<float>() + n), ref_params);
    } else {
      EXPECT_NE(error_of([&] { dp.gather_weights(nullptr); }).find("replicated"), std::string::npos);
    }
  }
  std::vector<float> wrong(10);
  EXPECT_NE(error_of([&] {
              DataParallelOptimizer(*comm, layout, Tensor::of(wrong.data(), {10}), {});
            }).find("flat_size"),
            std::string::npos);
}

TEST(DataParallelOptimizer, StepStatsOfOneRank) {
  auto comm = make_local_communicator(Device::cpu);
  const StepStats s = gather_step_stats(*comm, 1000, 0.5, 0.1);
  EXPECT_DOUBLE_EQ(s.global_tokens_per_s, 2000);
  EXPECT_DOUBLE_EQ(s.rank_tokens_per_s, 2000);
  EXPECT_DOUBLE_EQ(s.max_wait_s, 0.1);
  EXPECT_DOUBLE_EQ(s.token_imbalance, 1);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

LaunchInfo env_rank(int rank, int world, int port) {
  LaunchInfo l;
  l.launcher = Launcher::kEnv, l.rank = rank, l.world_size = world, l.master_port = port;
  return l;
}

TEST(TcpBootstrap, RankZeroHandsItsBlobToEveryRank) {
  const int port = free_port();
  const std::vector<uint8_t> blob = {1, 2, 3, 250, 0, 7};
  std::vector<std::future<std::vector<uint8_t>>> ranks;
  for (int r = 3; r >= 0; --r)  // the others start first: they retry until rank 0 listens
    ranks.push_back(std::async(std::launch::async, [&, r] {
      return tcp_broadcast_blob(env_rank(r, 4, port), r == 0 ? blob : std::vector<uint8_t>{}, 10);
    }));
  for (auto& f : ranks) EXPECT_EQ(f.get(), blob);
}

TEST(TcpBootstrap, MissingRanksAndUnreachableRankZeroTimeOutNamingThem) {
  const int port = free_port();
  auto zero = std::async(std::launch::async, [&] {
    return error_of([&] { tcp_broadcast_blob(env_rank(0, 3, port), std::vector<uint8_t>{9}, 0.5); });
  });
  EXPECT_EQ(tcp_broadcast_blob(env_rank(1, 3, port), {}, 5), std::vector<uint8_t>{9});
  EXPECT_NE(zero.get().find("ranks 2 did not connect"), std::string::npos);

  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { tcp_broadcast_blob(env_rank(2, 3, free_port()), {}, 0.3); });
  EXPECT_NE(e.find("rank 2: could not connect to rank 0 at 127.0.0.1:"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

}  // namespace
}  // namespace pt::dist
