// How far one float vector is from a reference, for the model tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>

namespace pt::testing {

// max |got - want| / max |want|, or with l2 the ratio ||got - want|| / ||want||; infinite when `got` holds a
// NaN or an infinity, so a comparison against a tolerance fails.
inline double relative_error(std::span<const float> got, std::span<const float> want, bool l2 = false) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double d = std::abs(static_cast<double>(got[i]) - want[i]),
                 w = std::abs(static_cast<double>(want[i]));
    diff = l2 ? diff + d * d : std::max(diff, d);
    scale = l2 ? scale + w * w : std::max(scale, w);
  }
  return scale > 0 ? (l2 ? std::sqrt(diff / scale) : diff / scale) : diff;
}

inline double max_abs(std::span<const float> v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}

// A parameter gradient's max |got - want| / max |want|, except where the reference is rounding noise
// around an exact zero (below 1e-5 of model_scale, the model's largest gradient element): BERT's key bias,
// a shift of every key of a query that softmax ignores. There the error is measured against model_scale.
inline double gradient_error(std::span<const float> got, std::span<const float> want, double model_scale) {
  const double scale = max_abs(want);
  if (scale >= 1e-5 * model_scale) return relative_error(got, want);
  double diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  return model_scale > 0 ? diff / model_scale : diff;
}

}  // namespace pt::testing
