// SPDX-License-Identifier: Apache-2.0
/// @file dispatch.h
/// @brief Launch plumbing shared by the tiled steps: the compile-time head-dim set.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "flashsteps/attention.h"

namespace flashsteps {

/// Calls @p fn with std::integral_constant<int, HEAD_DIM> for the smallest compiled head
/// dim in {32, 64, 128, 256} that holds @p head_dim; kernels zero-pad the rest (so D = 40
/// runs the 64 kernel, D = 80 the 128 one).
/// @throws Unsupported naming q.shape[3] when head_dim > 256 or @p max_head_dim.
template <typename Fn>
void dispatch_head_dim(std::int64_t head_dim, const char* step_name, Fn&& fn, std::int64_t max_head_dim = 256) {
  if (head_dim > max_head_dim)
    throw Unsupported("q.shape[3] (head_dim = " + std::to_string(head_dim) + ") exceeds " + step_name +
                      "'s maximum of " + std::to_string(max_head_dim));
  if (head_dim <= 32) return fn(std::integral_constant<int, 32>{});
  if (head_dim <= 64) return fn(std::integral_constant<int, 64>{});
  if (head_dim <= 128) return fn(std::integral_constant<int, 128>{});
  return fn(std::integral_constant<int, 256>{});
}

}  // namespace flashsteps
