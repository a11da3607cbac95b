// SPDX-License-Identifier: Apache-2.0
/// @file verify.h
/// @brief The verdict on one run of a problem: its O and LSE compared with the float64
/// reference (compare.h's statistics and tolerance table, applied over a problem's rows).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashsteps/compare.h"
#include "flashsteps/problem.h"

namespace flashsteps {

/// The comparison of one run of a problem with its reference.
struct Verdict {
  ErrorStats o;         ///< over the compared rows of O
  ErrorStats lse;       ///< over the compared rows of LSE (count 0 without LSE)
  std::string failure;  ///< empty when within the tolerance table, else what failed
};

/// Compares O (and LSE when the problem asks for it) with the reference on query rows
/// @p rows of every (batch, head), or on all rows when @p rows is empty. All vectors are in
/// canonical order: O `[B, Hq, Nq, D]`, LSE `[B, Hq, Nq]`. O must be within tolerance()
/// of its dtype, LSE within kLseMaxAbs; Verdict::failure says which was not.
Verdict verify_output(const Problem& p, const std::vector<double>& ref_o, const std::vector<double>& ref_lse,
                      const std::vector<double>& out_o, const std::vector<double>& out_lse,
                      const std::vector<std::int64_t>& rows = {});

}  // namespace flashsteps
