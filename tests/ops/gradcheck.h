// Finite-difference gradient checking in double for the op tests: central differences of a scalar loss,
// compared element by element under a relative plus absolute tolerance, reporting the worst element.
#pragma once

#include "core/tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace pt::testing {

// Uniform values in [lo, hi) from a fixed seed, so every run checks the same inputs.
inline std::vector<double> random_values(int64_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

// The scalar loss the checks differentiate: sum(out * weights), whose gradient wrt out is `weights`.
inline double weighted_sum(const std::vector<double>& out, const std::vector<double>& weights) {
  double s = 0;
  for (size_t i = 0; i < out.size(); ++i) s += out[i] * weights[i];
  return s;
}

// The step balances truncation error (~step^2) against rounding in the loss (~1e-16 |loss| / step); a
// wrong formula is off by far more than rtol.
struct GradCheckOptions {
  double step = 1e-5;
  double rtol = 1e-5;
  double atol = 1e-8;
};

struct GradCheckReport {
  bool ok = true;
  int64_t worst_index = -1;
  double analytic = 0, numeric = 0;
  double worst_ratio = 0;  // |analytic - numeric| / (atol + rtol * max(|analytic|, |numeric|)); ok when <= 1

  std::string str() const {
    return fmt::format(
        "worst element {}: analytic {:.12g}, finite difference {:.12g} ({:.3g}x the tolerance)", worst_index,
        analytic, numeric, worst_ratio);
  }
};

// Nudges each x[i] by +-step (restoring it afterwards), evaluates loss() and compares the central
// difference with analytic[i].
inline GradCheckReport gradcheck(const std::function<double()>& loss, std::vector<double>& x,
                                 const std::vector<double>& analytic, const GradCheckOptions& opt = {}) {
  GradCheckReport r;
  if (analytic.size() != x.size()) {
    r.ok = false;
    return r;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + opt.step;
    const double up = loss();
    x[i] = saved - opt.step;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * opt.step);
    const double tol = opt.atol + opt.rtol * std::max(std::abs(analytic[i]), std::abs(numeric));
    double ratio = std::abs(analytic[i] - numeric) / tol;
    if (std::isnan(ratio)) ratio = INFINITY;
    if (r.worst_index < 0 || ratio > r.worst_ratio)
      r = {r.ok, static_cast<int64_t>(i), analytic[i], numeric, ratio};
    if (ratio > 1) r.ok = false;
  }
  return r;
}

// A tensor view of a test's vector.
template <class T>
Tensor view(std::vector<T>& v, std::initializer_list<int64_t> dims) {
  return Tensor::of(v.data(), dims);
}

// A [rows, cols] matrix laid out in rows of `width` values, the padding set to `fill` (NaN shows whatever
// reads it), and the [rows, cols] matrix back out of such rows.
inline std::vector<double> pad_rows(const std::vector<double>& v, int64_t rows, int64_t cols, int64_t width,
                                    double fill) {
  std::vector<double> out(static_cast<size_t>(rows * width), fill);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(v.begin() + r * cols, cols, out.begin() + r * width);
  return out;
}

inline std::vector<double> unpad_rows(const std::vector<double>& v, int64_t rows, int64_t cols,
                                      int64_t width) {
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) std::copy_n(v.begin() + r * width, cols, out.begin() + r * cols);
  return out;
}

}  // namespace pt::testing

// EXPECT_GRAD(report): fails with the worst element when the gradient does not match.
#define EXPECT_GRAD(report)         \
  do {                              \
    const auto& r_ = (report);      \
    EXPECT_TRUE(r_.ok) << r_.str(); \
  } while (0)
