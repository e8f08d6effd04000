// CUDA AdamW, global norm and clipping against the cpu backend, over more tensors than one descriptor
// table holds and tensors larger than one block's chunk.
#include "cuda_test_util.h"
#include "ops/adamw.h"
#include "ops/grad_norm.h"

#include <cstring>
#include <random>
#include <tuple>

namespace pt::ops {
namespace {

using namespace pt::testing;

// Sizes: empty, tiny, odd, several chunks of 65536; 70 tensors need two descriptor tables (of 64, or 58
// with 6 pointers a tensor).
std::vector<int64_t> tensor_sizes() {
  std::vector<int64_t> sizes = {0, 1, 7, 257, 65536, 65537, 3 * 65536 + 11, 768 * 2048};
  while (sizes.size() < 70) sizes.push_back(static_cast<int64_t>(sizes.size()) * 97 + 5);
  return sizes;
}

struct Tensors {
  std::vector<std::vector<double>> host;
  std::vector<DeviceTensor> device;
};

Tensors make(const std::vector<int64_t>& sizes, uint64_t seed, double lo, double hi) {
  Tensors t;
  for (size_t i = 0; i < sizes.size(); ++i) {
    t.host.push_back(rounded(random_values(sizes[i], seed + i, lo, hi), DType::f32));
    t.device.push_back(upload(t.host.back(), DType::f32, {sizes[i]}));
  }
  return t;
}

// One buffer of an AdamW tensor on both sides: host bytes, and a device copy followed by a guard of
// poisoned bytes (0xFF) that the kernels must leave alone (partial blocks end exactly at the tensor's end).
struct Mirrored {
  static constexpr size_t kGuard = 64;
  std::vector<unsigned char> host;
  DeviceBuffer device;
  Tensor cpu, gpu;

  Mirrored(std::vector<unsigned char> bytes, DType dtype, int64_t n)
      : host(std::move(bytes)), device(host.size() + kGuard) {
    std::vector<unsigned char> guarded(host);
    guarded.resize(host.size() + kGuard, 0xFF);
    device.upload(guarded.data(), guarded.size());
    cpu = Tensor(host.data(), dtype, {n});
    gpu = device.view(dtype, {n});
  }
  std::vector<unsigned char> device_bytes() const {
    std::vector<unsigned char> out(host.size() + kGuard);
    device.download(out.data(), out.size());
    return out;
  }
};

template <class T>
std::vector<unsigned char> bytes_of(const std::vector<T>& v) {
  std::vector<unsigned char> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A poisoned bf16 working copy of n elements (0xFF bytes: NaN), starting `shift` elements into its buffer
// (1: misaligned for vector stores).
Mirrored poisoned_working(int64_t n, int64_t shift) {
  Mirrored w(std::vector<unsigned char>(static_cast<size_t>(2 * (n + shift)), 0xFF), DType::bf16, n + shift);
  w.cpu = Tensor(static_cast<char*>(w.cpu.data) + 2 * shift, DType::bf16, {n});
  w.gpu = Tensor(static_cast<char*>(w.gpu.data) + 2 * shift, DType::bf16, {n}, Device::cuda);
  return w;
}

// The kernels over adamw_update.h against the cpu op, bit for bit (the same f32 operations, rounding draws
// and code search): f32 parameters with bf16 and 8-bit moments, bf16 parameters with moments in every
// format; gradients read unscaled and scaled (grad_scale), and beside f32 parameters a working copy, poisoned
// before, that both write. Over the sizes above (most not a multiple of the 256-element block, two tables),
// at flat offsets across 2^32, from random parameters, gradients and moment state, for three steps.
TEST(CudaAdamW, CodedMomentsAndBf16ParamsMatchCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  const std::vector<int64_t> sizes = tensor_sizes();
  for (const auto& [param_dtype, format, grad_scale] : {std::tuple{DType::f32, MomentFormat::bf16, 1.0},
                                                        {DType::f32, MomentFormat::bf16, 0.37},
                                                        {DType::f32, MomentFormat::q8, 1.0},
                                                        {DType::f32, MomentFormat::q8, 0.37},
                                                        {DType::bf16, MomentFormat::f32, 0.37},
                                                        {DType::bf16, MomentFormat::bf16, 1.0},
                                                        {DType::bf16, MomentFormat::q8, 0.37}}) {
    SCOPED_TRACE(fmt::format("{} parameters, {} moments, grad_scale {}", dtype_name(param_dtype),
                             moment_format_name(format), grad_scale));
    std::mt19937 rng(17);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> code(0, 254);
    // per tensor: param, grad, m, v (, m_absmax, v_absmax) (, working)
    std::vector<std::vector<Mirrored>> buffers;
    std::vector<AdamWTensor> cpu, gpu;
    int64_t offset = (int64_t{1} << 32) - 3 * 65536;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t n = sizes[i], blocks = quant_blocks(n);
      const auto floats = [&](int64_t count, float scale, bool positive) {
        std::vector<float> v(static_cast<size_t>(count));
        for (float& x : v) x = scale * (positive ? std::fabs(normal(rng)) : normal(rng));
        return bytes_of(v);
      };
      const auto bf16s = [&](float scale, bool positive) {
        std::vector<uint16_t> bits(static_cast<size_t>(n));
        for (auto& x : bits) x = float_to_bf16(scale * (positive ? std::fabs(normal(rng)) : normal(rng)));
        return bytes_of(bits);
      };
      auto& b = buffers.emplace_back();
      b.reserve(7);
      if (param_dtype == DType::bf16)
        b.emplace_back(bf16s(1.0f, false), DType::bf16, n);
      else
        b.emplace_back(floats(n, 1.0f, false), DType::f32, n);
      b.emplace_back(floats(n, std::pow(10.0f, -float(i % 5)), false), DType::f32, n);
      if (format == MomentFormat::q8) {
        for (int k = 0; k < 2; ++k) {
          std::vector<uint8_t> codes(static_cast<size_t>(n));
          for (auto& c : codes) c = static_cast<uint8_t>(code(rng));
          b.emplace_back(bytes_of(codes), DType::u8, n);
        }
        b.emplace_back(floats(blocks, 0.1f, true), DType::f32, blocks);
        b.emplace_back(floats(blocks, 0.01f, true), DType::f32, blocks);
      } else {
        for (const bool positive : {false, true}) {
          if (format == MomentFormat::bf16)
            b.emplace_back(bf16s(0.01f, positive), DType::bf16, n);
          else
            b.emplace_back(floats(n, 0.01f, positive), DType::f32, n);
        }
      }
      const bool decay = i % 3 != 0;
      cpu.push_back({b[0].cpu, b[1].cpu, b[2].cpu, b[3].cpu, decay});
      gpu.push_back({b[0].gpu, b[1].gpu, b[2].gpu, b[3].gpu, decay});
      if (format == MomentFormat::q8) {
        cpu.back().m_absmax = b[4].cpu, cpu.back().v_absmax = b[5].cpu;
        gpu.back().m_absmax = b[4].gpu, gpu.back().v_absmax = b[5].gpu;
      }
      if (param_dtype == DType::f32) {
        b.push_back(poisoned_working(n, static_cast<int64_t>(i % 2)));
        cpu.back().working = b.back().cpu, gpu.back().working = b.back().gpu;
      }
      cpu.back().offset = gpu.back().offset = offset;
      offset += n;
    }
    const AdamWConfig config{3e-3, 0.9, 0.95, 1e-8, 0.1, 42, grad_scale};
    for (int64_t step : {1, 2, 1000}) {
      adamw_step(cpu, config, step);
      adamw_step(gpu, config, step);
    }
    const std::vector<const char*> names =
        format == MomentFormat::q8 ? std::vector{"param", "grad", "m", "v", "m_absmax", "v_absmax"}
                                   : std::vector{"param", "grad", "m", "v"};
    for (size_t i = 0; i < sizes.size(); ++i)
      for (size_t k = 0; k < buffers[i].size(); ++k) {
        const Mirrored& b = buffers[i][k];
        std::vector<unsigned char> want = b.host;
        want.resize(want.size() + Mirrored::kGuard, 0xFF);
        ASSERT_EQ(b.device_bytes(), want) << (k < names.size() ? names[k] : "working") << " of tensor " << i
                                          << " (" << sizes[i] << " elements)";
      }
  }
}

// The f32 kernel (f32 moments beside f32 parameters, its own float arithmetic, vectors of 4 where aligned)
// against the cpu op, as the step after the backward runs it (gradients unscaled, no working copy) and as
// the trainer's folded step does (gradients scaled by 0.37, a third of the steps' movement, and a working
// copy): the state as the cpu op's, and the working copy exactly the cast of the GPU's updated parameters,
// every element written (it starts NaN), aligned for 8-byte stores or not, nothing past it.
TEST(CudaAdamW, F32KernelMatchesCpuWithScaledGradientsAndAWorkingCopy) {
  SKIP_WITHOUT_GPU();
  const std::vector<int64_t> sizes = tensor_sizes();
  for (const auto& [grad_scale, with_working] : {std::pair{1.0, false}, {0.37, true}}) {
    SCOPED_TRACE(fmt::format("grad_scale {}, {} working copy", grad_scale, with_working ? "a" : "no"));
    Tensors p = make(sizes, 100, -1, 1), g = make(sizes, 200, -1, 1), m = make(sizes, 300, -0.1, 0.1),
            v = make(sizes, 400, 0, 0.01);
    // The cpu reference runs in f32 too: the update's float arithmetic is what is compared.
    std::vector<std::vector<float>> hp, hg, hm, hv;
    std::vector<Mirrored> working;
    working.reserve(sizes.size());
    std::vector<AdamWTensor> cpu, gpu;
    for (size_t i = 0; i < sizes.size(); ++i) {
      hp.emplace_back(p.host[i].begin(), p.host[i].end());
      hg.emplace_back(g.host[i].begin(), g.host[i].end());
      hm.emplace_back(m.host[i].begin(), m.host[i].end());
      hv.emplace_back(v.host[i].begin(), v.host[i].end());
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t n = sizes[i];
      const bool decay = i % 3 != 0;
      cpu.push_back({view(hp[i], {n}), view(hg[i], {n}), view(hm[i], {n}), view(hv[i], {n}), decay});
      gpu.push_back({p.device[i].t, g.device[i].t, m.device[i].t, v.device[i].t, decay});
      if (with_working) {
        working.push_back(poisoned_working(n, static_cast<int64_t>(i % 2)));
        gpu.back().working = working.back().gpu;
      }
    }
    AdamWConfig config{3e-3, 0.9, 0.95, 1e-8, 0.1};
    config.grad_scale = grad_scale;
    for (int64_t step : {1, 2, 1000}) {
      adamw_step(cpu, config, step);
      adamw_step(gpu, config, step);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      SCOPED_TRACE(fmt::format("tensor {} of {} elements", i, sizes[i]));
      const auto as_double = [](const std::vector<float>& f) {
        return std::vector<double>(f.begin(), f.end());
      };
      EXPECT_CLOSE(p.device[i].t, as_double(hp[i]), tolerance(DType::f32));
      EXPECT_CLOSE(m.device[i].t, as_double(hm[i]), tolerance(DType::f32));
      EXPECT_CLOSE(v.device[i].t, as_double(hv[i]), tolerance(DType::f32));
      if (!with_working) continue;
      const std::vector<unsigned char> params = download_bytes(p.device[i].t);
      std::vector<float> updated(static_cast<size_t>(sizes[i]));
      std::memcpy(updated.data(), params.data(), params.size());
      std::vector<unsigned char> want(static_cast<size_t>(2 * (i % 2)), 0xFF);  // the shift before it
      for (const float x : updated) {
        const uint16_t bits = float_to_bf16(x);
        want.push_back(static_cast<unsigned char>(bits & 0xFF));
        want.push_back(static_cast<unsigned char>(bits >> 8));
      }
      want.resize(want.size() + Mirrored::kGuard, 0xFF);
      ASSERT_EQ(working[i].device_bytes(), want);
    }
  }
}

TEST(CudaGradNorm, NormAndClipMatchCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<int64_t> sizes = tensor_sizes();
  Tensors g = make(sizes, 500, -1, 1);
  std::vector<Tensor> cpu, gpu;
  for (size_t i = 0; i < sizes.size(); ++i) {
    cpu.push_back(view(g.host[i], {sizes[i]}));
    gpu.push_back(g.device[i].t);
  }
  const double want = global_norm(cpu), got = global_norm(gpu);
  EXPECT_NEAR(got, want, 1e-12 * want) << "squares are summed in double";
  EXPECT_EQ(global_norm(gpu), got) << "the reduction order is fixed";
  EXPECT_DOUBLE_EQ(clip_grad_norm(gpu, want * 2), got) << "below the maximum nothing changes";
  EXPECT_DOUBLE_EQ(clip_grad_norm(cpu, 1.0), want);
  EXPECT_DOUBLE_EQ(clip_grad_norm(gpu, 1.0), got);
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE(fmt::format("tensor {}", i));
    EXPECT_CLOSE(g.device[i].t, g.host[i], tolerance(DType::f32));
  }
  EXPECT_NEAR(global_norm(gpu), 1.0, 1e-5);
}

// clip_grad_norm_deferred against the cpu clip_grad_norm, and bitwise against the cuda clip_grad_norm
// (same reduction, sqrt and factor, computed on the device instead of the host), below and above max_norm.
TEST(CudaGradNorm, DeferredClipMatchesCpuAndClipGradNorm) {
  SKIP_WITHOUT_GPU();
  const std::vector<int64_t> sizes = tensor_sizes();
  for (const bool clips : {false, true}) {
    SCOPED_TRACE(clips ? "clipping" : "not clipping");
    Tensors g = make(sizes, 600, -1, 1), reference = make(sizes, 600, -1, 1);
    std::vector<Tensor> cpu, gpu, gpu_reference;
    for (size_t i = 0; i < sizes.size(); ++i) {
      cpu.push_back(view(g.host[i], {sizes[i]}));
      gpu.push_back(g.device[i].t);
      gpu_reference.push_back(reference.device[i].t);
    }
    const double max_norm = clips ? 1.0 : global_norm(cpu) * 2;
    const double want = clip_grad_norm(cpu, max_norm), want_gpu = clip_grad_norm(gpu_reference, max_norm);
    DeviceTensor norm = upload_f64({std::nan("")}, {1});
    clip_grad_norm_deferred(gpu, max_norm, norm.t);
    const double got = download_f64(norm.t)[0];
    EXPECT_NEAR(got, want, 1e-12 * want);
    EXPECT_EQ(got, want_gpu);
    EXPECT_EQ(want > max_norm, clips);
    for (size_t i = 0; i < sizes.size(); ++i) {
      SCOPED_TRACE(fmt::format("tensor {}", i));
      EXPECT_CLOSE(g.device[i].t, g.host[i], tolerance(DType::f32));
      EXPECT_EQ(download_bytes(g.device[i].t), download_bytes(reference.device[i].t));
    }
  }
}

// The deferred norm alone: the bits of global_norm (the same reduction), no wait, the gradients as they
// were; and clip_factor of that norm is the factor the deferred clip scales by, to the bit.
TEST(CudaGradNorm, DeferredNormIsTheGlobalNormAndClipFactorTheDeviceFactor) {
  SKIP_WITHOUT_GPU();
  const std::vector<int64_t> sizes = tensor_sizes();
  Tensors g = make(sizes, 700, -1, 1), clipped = make(sizes, 700, -1, 1);
  std::vector<Tensor> gpu, gpu_clipped;
  for (size_t i = 0; i < sizes.size(); ++i) {
    gpu.push_back(g.device[i].t);
    gpu_clipped.push_back(clipped.device[i].t);
  }
  DeviceTensor norm = upload_f64({std::nan("")}, {1}), clip_norm = upload_f64({std::nan("")}, {1});
  global_norm_deferred(gpu, norm.t);
  const double got = download_f64(norm.t)[0];
  EXPECT_EQ(got, global_norm(gpu));
  const double max_norm = got / 3;
  clip_grad_norm_deferred(gpu_clipped, max_norm, clip_norm.t);
  EXPECT_EQ(download_f64(clip_norm.t)[0], got);
  const double factor = clip_factor(max_norm, got);
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE(fmt::format("tensor {}", i));
    EXPECT_EQ(download_bytes(g.device[i].t), download_bytes(upload(g.host[i], DType::f32, {sizes[i]}).t))
        << "the gradients are left as they were";
    std::vector<double> scaled = g.host[i];
    for (double& x : scaled) x = double(float(x * factor));
    EXPECT_EQ(download_bytes(clipped.device[i].t), download_bytes(upload(scaled, DType::f32, {sizes[i]}).t));
  }
  DeviceTensor empty = poisoned(DType::f32, {0});
  global_norm_deferred(std::vector<Tensor>{empty.t}, norm.t);
  EXPECT_EQ(download_f64(norm.t)[0], 0.0);
}

TEST(CudaGradNorm, DeferredClipOfNoElementsWritesZero) {
  SKIP_WITHOUT_GPU();
  DeviceTensor norm = upload_f64({-1.0}, {1}), empty = poisoned(DType::f32, {0});
  clip_grad_norm_deferred(std::vector<Tensor>{}, 1.0, norm.t);
  EXPECT_EQ(download_f64(norm.t)[0], 0.0);
  norm.buffer.upload(std::vector<double>{-1.0}.data(), 8);
  clip_grad_norm_deferred(std::vector<Tensor>{empty.t}, 1.0, norm.t);
  EXPECT_EQ(download_f64(norm.t)[0], 0.0);
}

TEST(CudaGradNorm, AccumulatesInDouble) {
  SKIP_WITHOUT_GPU();
  // 2^24 + 16 ones: a float accumulator would stall at 2^24.
  const int64_t n = (1 << 24) + 16;
  DeviceTensor ones = upload(std::vector<double>(static_cast<size_t>(n), 1.0), DType::f32, {n});
  const std::vector<Tensor> grads = {ones.t};
  EXPECT_DOUBLE_EQ(global_norm(grads), std::sqrt(double(n)));
}

}  // namespace
}  // namespace pt::ops
