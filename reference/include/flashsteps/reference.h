// SPDX-License-Identifier: Apache-2.0
/// @file reference.h
/// @brief float64 attention on the CPU with Kokkos: the ground truth every step is checked
/// against.
///
/// The same three-pass math as step 01 (row max, sum of exponentials, normalise; Vaswani et
/// al. 2017, eq. 1), in double precision, on Kokkos' host execution space. Inputs are the
/// dtype-rounded values the GPU saw, so the only error measured is the step's own.
#pragma once

#include <cstdint>
#include <vector>

#include "flashsteps/attention.h"
#include "flashsteps/problem.h"

namespace flashsteps::reference {

/// Initialises Kokkos (host execution space) for the reference on construction and
/// finalises it on destruction; one per program, in main(). This header carries no Kokkos
/// include, so GPU translation units (CUDA or HIP) can use the reference; the Kokkos-level
/// API is in reference_kokkos.h.
class Runtime {
 public:
  Runtime();
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
};

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
