// SPDX-License-Identifier: Apache-2.0
/// @file compare.h
/// @brief Comparing a step's output with the float64 reference: error statistics, the
/// per-dtype tolerance table, and FlashAttention's "at most 2x the baseline's error" rule.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashsteps/attention.h"

namespace flashsteps {

/// Differences between an output and its reference over the same elements.
struct ErrorStats {
  double max_abs = 0.0;     ///< max |out - ref| over elements where both are finite
  double rel_fro = 0.0;     ///< ||out - ref||_F / ||ref||_F over those elements
  double max_abs_ref = 0.0; ///< max |ref| (sets the scale of max_abs)
  std::int64_t nonfinite_mismatch = 0;  ///< elements where one side is NaN/inf and the other
                                        ///< is not, or both are inf of different sign
  std::int64_t count = 0;   ///< elements compared
};

/// Compares @p out with @p ref element by element (same length). -inf == -inf matches.
ErrorStats compare(const std::vector<double>& ref, const std::vector<double>& out);

/// Per-dtype acceptance thresholds for O. They follow from the dtype's unit roundoff u
/// (2^-24, 2^-11, 2^-8): the output is rounded once to the dtype, so an exact-in-float32
/// computation lands within about u relative; the table allows 4u on the max (relative to
/// max(1, max|ref|)) and a relative Frobenius error a few times u's rms. fp32 allows for
/// float32 accumulation over long rows instead.
struct Tolerance {
  double max_abs;  ///< times max(1, max|ref|)
  double rel_fro;  ///< relative Frobenius error
};

/// The tolerance table: fp32 {1e-5, 1e-5}, fp16 {2e-3, 1e-3}, bf16 {1.6e-2, 8e-3}.
Tolerance tolerance(DType dtype);

/// LSE is float32 whatever the dtype: max |LSE - LSE_ref| must stay under this.
inline constexpr double kLseMaxAbs = 1e-3;

/// Checks @p err against the table; returns an empty string on success, otherwise a
/// message with the numbers that failed.
std::string check_tolerance(const ErrorStats& err, DType dtype, const std::string& what);

/// FlashAttention's rule (Dao et al., flash-attention tests): a step's max error may be at
/// most 2x the baseline's (step 01's) on the same inputs, plus one unit in the last place of
/// the dtype at max|ref| (so that a baseline that happens to round exactly does not fail
/// every other step). Returns an empty string on success, else a message.
std::string check_against_baseline(const ErrorStats& step, const ErrorStats& baseline, DType dtype);

}  // namespace flashsteps
