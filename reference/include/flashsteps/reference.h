// SPDX-License-Identifier: Apache-2.0
/// @file reference.h
/// @brief float64 attention on the CPU with Kokkos: the ground truth every step is checked
/// against.
///
/// The same three-pass math as step 01 (row max, sum of exponentials, normalise; Vaswani et
/// al. 2017, eq. 1), in double precision, on Kokkos' host execution space. Inputs are the
/// dtype-rounded values the GPU saw, so the only error measured is the step's own.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <vector>

#include "flashsteps/attention.h"
#include "flashsteps/problem.h"

namespace flashsteps::reference {

/// `[B, H, N, D]` float64 on the host, row-major.
using View4 = Kokkos::View<double****, Kokkos::LayoutRight, Kokkos::HostSpace>;
/// `[B, H, N]` float64 on the host, row-major.
using View3 = Kokkos::View<double***, Kokkos::LayoutRight, Kokkos::HostSpace>;

/// Options of one reference call.
struct Options {
  Mask mask = Mask::none;  ///< see Mask; both causal alignments
  double scale = 1.0;      ///< softmax scale applied to Q.K
};

/// Computes O `[B, Hq, Nq, D]` and LSE `[B, Hq, Nq]` (natural log; -inf for a row with no
/// visible key, whose O row is 0) from Q `[B, Hq, Nq, D]`, K and V `[B, Hkv, Nk, D]`.
///
/// @param q        queries `[B, Hq, Nq, D]`
/// @param k        keys `[B, Hkv, Nk, D]`
/// @param v        values `[B, Hkv, Nk, D]`
/// @param options  mask and scale
/// @param o        output `[B, Hq, Nq, D]`, written
/// @param lse      log-sum-exp `[B, Hq, Nq]`, written
/// @param rows  query rows to compute for every (b, h); empty means all rows. Other rows of
///              @p o and @p lse are left untouched (spot checks of large problems).
/// @throws InvalidArgument if the extents disagree, Hq % Hkv != 0, or a row is out of range.
void attention(const View4& q, const View4& k, const View4& v, const Options& options,
               const View4& o, const View3& lse, const std::vector<std::int64_t>& rows = {});

/// The reference output of a problem, in canonical `[B, Hq, Nq, D]` / `[B, Hq, Nq]` order.
/// Rows not computed (see @p rows) hold NaN.
struct Result {
  std::vector<double> o;    ///< `[B, Hq, Nq, D]`
  std::vector<double> lse;  ///< `[B, Hq, Nq]`
};

/// Runs attention() on @p inputs' float64 copies with the problem's mask and scale
/// (an explicit scale is used as the float it is; the default is 1/sqrt(D) in double).
Result run(const HostInputs& inputs, const std::vector<std::int64_t>& rows = {});

}  // namespace flashsteps::reference
