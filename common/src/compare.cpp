// SPDX-License-Identifier: Apache-2.0
#include "flashsteps/compare.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace flashsteps {

ErrorStats compare(const std::vector<double>& ref, const std::vector<double>& out) {
  ErrorStats e;
  double diff2 = 0.0, ref2 = 0.0;
  const std::size_t n = std::min(ref.size(), out.size());
  e.nonfinite_mismatch = static_cast<std::int64_t>(std::max(ref.size(), out.size()) - n);
  for (std::size_t i = 0; i < n; ++i) {
    const double r = ref[i], o = out[i];
    if (!std::isfinite(r) || !std::isfinite(o)) {
      const bool same = std::isinf(r) && std::isinf(o) && (r > 0) == (o > 0);
      if (!same) ++e.nonfinite_mismatch;
      continue;
    }
    const double d = std::fabs(o - r);
    e.max_abs = std::max(e.max_abs, d);
    e.max_abs_ref = std::max(e.max_abs_ref, std::fabs(r));
    diff2 += d * d;
    ref2 += r * r;
    ++e.count;
  }
  e.rel_fro = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return e;
}

Tolerance tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32: return {1e-5, 1e-5};
    case DType::f16: return {2e-3, 1e-3};
    case DType::bf16: return {1.6e-2, 8e-3};
  }
  return {0.0, 0.0};
}

std::string check_tolerance(const ErrorStats& err, DType dtype, const std::string& what) {
  const Tolerance tol = tolerance(dtype);
  const double max_abs_allowed = tol.max_abs * std::max(1.0, err.max_abs_ref);
  std::ostringstream s;
  if (err.nonfinite_mismatch > 0)
    s << what << ": " << err.nonfinite_mismatch << " elements NaN/inf where the reference is not (or vice versa); ";
  if (!(err.max_abs <= max_abs_allowed))
    s << what << ": max abs error " << err.max_abs << " > " << max_abs_allowed << " (" << dtype_name(dtype) << "); ";
  if (!(err.rel_fro <= tol.rel_fro))
    s << what << ": relative Frobenius error " << err.rel_fro << " > " << tol.rel_fro << " (" << dtype_name(dtype) << "); ";
  return s.str();
}

std::string check_against_baseline(const ErrorStats& step, const ErrorStats& baseline, DType dtype) {
  const double u = dtype == DType::f32 ? std::ldexp(1.0, -24) : dtype == DType::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  const double ulp = 2.0 * u * std::max(1.0, baseline.max_abs_ref);
  const double allowed = 2.0 * baseline.max_abs + ulp;
  if (step.max_abs <= allowed) return {};
  std::ostringstream s;
  s << "max abs error " << step.max_abs << " > 2 x step 01's " << baseline.max_abs << " + 1 ulp = " << allowed;
  return s.str();
}

}  // namespace flashsteps
