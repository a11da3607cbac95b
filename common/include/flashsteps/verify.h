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

/// verify_output() on one (batch entry, KV head) slice of a problem (make_random_slice()):
/// @p ref_o and @p ref_lse are the reference of the slice (canonical `[1, G, Nq, D]` and
/// `[1, G, Nq]`, G = Hq / Hkv), @p out_o and @p out_lse the output of the whole problem @p p
/// (canonical, as DeviceCase::download() gives them), of which the rows of query heads
/// @p head_kv * G ... @p head_kv * G + G - 1 of batch entry @p batch are compared.
/// @throws InvalidArgument when (batch, head_kv) is outside @p p or a vector is too short
Verdict verify_slice(const Problem& p, std::int64_t batch, std::int64_t head_kv, const std::vector<double>& ref_o,
                     const std::vector<double>& ref_lse, const std::vector<double>& out_o,
                     const std::vector<double>& out_lse, const std::vector<std::int64_t>& rows = {});

/// The worse of two verdicts on parts of one problem: each statistic's maximum (counts
/// added), the failures of both.
Verdict worse_of(const Verdict& a, const Verdict& b);

}  // namespace flashsteps
