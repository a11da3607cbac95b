// SPDX-License-Identifier: Apache-2.0
/// @file reference_kokkos.h
/// @brief The reference at the Kokkos level: float64 host Views in, float64 host Views out.
/// Include it only from host (C++) translation units.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <vector>

#include "flashsteps/attention.h"

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

}  // namespace flashsteps::reference
