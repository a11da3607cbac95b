// SPDX-License-Identifier: Apache-2.0
/// @file dispatch.h
/// @brief Launch plumbing shared by the tiled steps: the compile-time head-dim set.
///
/// Steps 02 and 03 compile {32, 64, 128, 256}; the tensor-core steps add 96 (one MMA k-step
/// is 16 wide, so 96 is a whole tile and saves a quarter of the work of padding to 128).
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

/// As dispatch_head_dim(), over the tensor-core set {32, 64, 96, 128, 256} (D = 80 runs the
/// 96 kernel, D = 200 the 256 one).
/// @throws Unsupported naming q.shape[3] when head_dim > 256.
template <typename Fn>
void dispatch_head_dim_tc(std::int64_t head_dim, const char* step_name, Fn&& fn) {
  if (head_dim > 256)
    throw Unsupported("q.shape[3] (head_dim = " + std::to_string(head_dim) + ") exceeds " + step_name +
                      "'s maximum of 256");
  if (head_dim <= 32) return fn(std::integral_constant<int, 32>{});
  if (head_dim <= 64) return fn(std::integral_constant<int, 64>{});
  if (head_dim <= 96) return fn(std::integral_constant<int, 96>{});
  if (head_dim <= 128) return fn(std::integral_constant<int, 128>{});
  return fn(std::integral_constant<int, 256>{});
}

/// The checks the 16-byte copies of the tensor-core steps need beyond the contract: a 16-bit
/// dtype, head_dim a multiple of 8, data 16-byte aligned and batch/head/seq strides multiples
/// of 8 elements, for Q, K, V and O.
/// @throws Unsupported naming the field (e.g. "k.stride[2]") and @p step_name.
void check_tensor_core_args(const AttentionArgs& args, const char* step_name);

}  // namespace flashsteps
