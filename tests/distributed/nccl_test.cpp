// The NCCL communicator in a world of one GPU: every collective leaves its buffer as it was, host values
// round-trip through the device, and a ZeRO-1 optimizer over it matches the local communicator bit for
// bit. (Several ranks run in packtrain_dist_tests --backend nccl.)
#include "distributed/communicator.h"

#include "core/device.h"
#include "core/device_buffer.h"
#include "core/float16.h"
#include "distributed/data_parallel.h"
#include "model/init.h"

#include <gtest/gtest.h>

#include <random>

namespace pt::dist {
namespace {

#define SKIP_WITHOUT_NCCL_GPU()                                                   \
  do {                                                                            \
    if (!backend_available(Backend::kNccl)) GTEST_SKIP() << "built without NCCL"; \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";               \
  } while (0)

std::unique_ptr<Communicator> nccl_world_of_one() {
  CommOptions o;
  o.backend = Backend::kNccl, o.device = Device::cuda, o.timeout_s = 60;
  return make_communicator(o, LaunchInfo{});
}

std::vector<float> read(const DeviceBuffer& b, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), 0.0f);
  copy_bytes(out.data(), false, b.data(), true, out.size() * sizeof(float));
  return out;
}

TEST(NcclCommunicator, WorldOfOneCollectives) {
  SKIP_WITHOUT_NCCL_GPU();
  auto c = nccl_world_of_one();
  EXPECT_EQ(c->backend(), "nccl");
  std::vector<float> host(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(i) * 0.5f;
  DeviceBuffer buf(host.size() * sizeof(float));
  copy_bytes(buf.data(), true, host.data(), false, host.size() * sizeof(float));
  const Tensor t = buf.view(DType::f32, {1000});
  c->all_reduce_sum(t);
  c->reduce_scatter_sum(t);
  c->all_gather(t);
  c->broadcast(t, 0);
  c->barrier();
  const auto h1 = c->start_all_reduce_sum(t), h2 = c->start_all_gather(t);
  c->wait(h2);
  c->wait(h1);
  EXPECT_EQ(read(buf, 1000), host);
  const double v[3] = {1.5, -2, 1e10};
  EXPECT_EQ(c->all_gather_host(v), (std::vector<double>{1.5, -2, 1e10}));
  EXPECT_EQ(c->take_stats().collectives, 8);
}

TEST(NcclCommunicator, ZeroOneStepMatchesTheLocalCommunicator) {
  SKIP_WITHOUT_NCCL_GPU();
  ModelConfig config;
  config.vocab_size = 300, config.hidden_size = 64, config.intermediate_size = 96,
  config.num_hidden_layers = 2;
  config.num_attention_heads = 2, config.num_key_value_heads = 1, config.head_dim = 32;
  const ParameterLayout layout(config);
  const int64_t n = layout.total(), size = DataParallelOptimizer::flat_size(n, 1, true);
  const std::vector<float> init = init_params(config, 2);
  std::vector<std::vector<float>> results;
  std::vector<std::vector<uint16_t>> weights;
  for (int which = 0; which < 2; ++which) {
    auto c = which == 0 ? make_local_communicator(Device::cuda) : nccl_world_of_one();
    DeviceBuffer grads(size_t(size) * 4);
    DataParallelOptimizer dp(*c, layout, grads.view(DType::f32, {size}),
                             {.zero1 = true, .bucket_bytes = 4096, .compute_dtype = DType::bf16});
    dp.set_params(init);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.1f);
    for (int step = 1; step <= 3; ++step) {
      std::vector<float> g(size_t(size), 0.0f);
      for (int64_t i = 0; i < n; ++i) g[i] = normal(rng);
      copy_bytes(grads.data(), true, g.data(), false, g.size() * 4);
      dp.reduce_gradients();
      dp.clip_grad_norm(1.0);
      dp.step({1e-2, 0.9, 0.95, 1e-8, 0.1}, step);
    }
    results.push_back(dp.gather_state().params);
    // The bf16 working copy NCCL gathers: the cast of every master.
    const Tensor w = dp.gather_weights(nullptr);
    ASSERT_EQ(w.dtype, DType::bf16);
    ASSERT_EQ(w.numel(), n);
    weights.emplace_back(size_t(n));
    copy_bytes(weights.back().data(), false, w.data, true, size_t(n) * 2);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(weights[0], weights[1]);
  std::vector<uint16_t> cast(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) cast[size_t(i)] = float_to_bf16(results[1][size_t(i)]);
  EXPECT_EQ(weights[1], cast);
}

}  // namespace
}  // namespace pt::dist
