#include "ops/sparse24.h"

#include "ops/arg_check.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/sparse24_common.h"

#include <cmath>

namespace pt::ops {

namespace {

// Generated once, at compile time, by the same enumeration the kernels unroll.
constexpr sparse24::Patterns24 kPatterns = sparse24::make_patterns24();
static_assert(kPatterns.count == kTransposablePatterns24 && sparse24::kPatterns == kTransposablePatterns24);

}  // namespace

const uint16_t* transposable_patterns24() { return kPatterns.bits; }

void transposable_mask24(const Tensor& w, const Tensor& mask) {
  ArgCheck a("transposable_mask24");
  a.real("w", w, {-1, -1}).mask("mask", mask, {w.size(0), w.size(1)});
  if (w.size(0) % 4 != 0 || w.size(1) % 4 != 0)
    fail(
        "transposable_mask24: w must be [N,K] with N and K multiples of 4 (whole 4x4 blocks), got {}; "
        "keep such a weight dense",
        w.str());
  if (a.device() == Device::cpu) return cpu::transposable_mask24(w, mask);
  a.unsupported_device();
}

int64_t mask_flips(const Tensor& a, const Tensor& b) {
  ArgCheck c("mask_flips");
  c.mask("a", a, {-1, -1}).mask("b", b, {a.size(0), a.size(1)});
  if (c.device() == Device::cpu) return cpu::mask_flips(a, b);
  c.unsupported_device();
}

void apply_mask(const Tensor& w, const Tensor& mask, const Tensor& out) {
  ArgCheck a("apply_mask");
  const bool masked_cast = w.dtype == DType::f32 && out.dtype == DType::bf16;
  if (masked_cast)  // out sets the shared dtype, so f32 is accepted beside it
    a.real("out", out, {-1, -1}).real_or_f32("w", w, {out.size(0), out.size(1)});
  else
    a.real("w", w, {-1, -1}).real("out", out, {w.size(0), w.size(1)});
  a.mask("mask", mask, {w.size(0), w.size(1)});
  if (masked_cast && out.data == w.data)
    fail("apply_mask: out (bf16) cannot be w (f32) itself; prune in place only within one dtype");
  a.same_or_disjoint("w", w, "out", out);
  if (a.device() == Device::cpu) return cpu::apply_mask(w, mask, out);
  a.unsupported_device();
}

void masked_decay(const Tensor& w, const Tensor& mask, double lambda, const Tensor& grad) {
  ArgCheck a("masked_decay");
  a.real("w", w, {-1, -1})
      .mask("mask", mask, {w.size(0), w.size(1)})
      .real("grad", grad, {w.size(0), w.size(1)});
  if (!std::isfinite(lambda) || lambda < 0)
    fail("masked_decay: lambda must be finite and >= 0, got {}", lambda);
  if (a.device() == Device::cpu) return cpu::masked_decay(w, mask, lambda, grad);
  a.unsupported_device();
}

void mvue24(const Tensor& g, uint64_t seed, const Tensor& out) {
  ArgCheck a("mvue24");
  a.real("g", g, {-1, -1}).real("out", out, {g.size(0), g.size(1)}).same_or_disjoint("g", g, "out", out);
  if (a.device() == Device::cpu) return cpu::mvue24(g, seed, out);
  a.unsupported_device();
}

}  // namespace pt::ops
