// SPDX-License-Identifier: Apache-2.0
/// @file dispatch.h
/// @brief Launch plumbing shared by the tiled steps: the compiled head-dim sets, their
/// padding rule, the checks of the tensor-core steps and the message of a limit exceeded.
///
/// Steps 02 and 03 compile {32, 64, 128, 256}; the tensor-core steps add 96 (one MMA k-step
/// is 16 wide, so 96 is a whole tile and saves a quarter of the work of padding to 128).
/// A call runs the kernel of the smallest compiled head dim that holds its head_dim; the
/// kernels zero-pad the rest (D = 40 runs the 64 kernel; D = 80 the 96 one on tensor cores,
/// the 128 one in steps 02 and 03).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>

#include "flashsteps/attention.h"

namespace flashsteps {

/// The head dims steps 02 and 03 compile kernels for.
inline constexpr int kHeadDims[] = {32, 64, 128, 256};
/// The head dims the tensor-core steps (04 on) compile kernels for, in increasing order.
inline constexpr int kTensorCoreHeadDims[] = {32, 64, 96, 128, 256};
/// The head dims the Hopper steps (07 on) compile kernels for: whole 64-column chunks of the
/// 128-byte swizzle; TMA zero-fills the columns past a smaller head_dim.
inline constexpr int kHopperHeadDims[] = {64, 128};

/// The Unsupported error of a value past a step's limit, written once for every step:
/// "<step_name>: <quantity> = <value> exceeds <limit> (<max>)", e.g.
/// "step 04: q.shape[3] (head_dim) = 264 exceeds the largest compiled head dim (256)".
Unsupported exceeds_limit(const char* step_name, const std::string& quantity, std::int64_t value,
                          const std::string& limit, std::int64_t max);

namespace detail {
/// The padding rule: the smallest value of @p set (increasing) that holds @p head_dim; 0
/// when @p head_dim exceeds the largest.
template <std::size_t N>
constexpr int padded_in(const int (&set)[N], std::int64_t head_dim) {
  for (int d : set)
    if (head_dim <= d) return d;
  return 0;
}

/// Calls @p fn with std::integral_constant<int, SET[I]> for the I with SET[I] == @p padded.
template <const auto& SET, typename Fn, std::size_t... I>
void call_with_head_dim(int padded, Fn& fn, std::index_sequence<I...>) {
  (void)((padded == SET[I] && (fn(std::integral_constant<int, SET[I]>{}), true)) || ...);
}

/// dispatch_head_dim() over the compiled set @p SET.
template <const auto& SET, typename Fn>
void dispatch_head_dim_in(std::int64_t head_dim, const char* step_name, Fn& fn) {
  const int padded = padded_in(SET, head_dim);
  if (padded == 0)
    throw exceeds_limit(step_name, "q.shape[3] (head_dim)", head_dim, "the largest compiled head dim",
                        SET[std::size(SET) - 1]);
  call_with_head_dim<SET>(padded, fn, std::make_index_sequence<std::size(SET)>{});
}
}  // namespace detail

/// The compiled head dim of the tensor-core steps that a call of @p head_dim runs at: the
/// smallest of kTensorCoreHeadDims that holds it (D = 80 runs at 96, D = 200 at 256); 0
/// above 256.
constexpr int padded_head_dim_tc(std::int64_t head_dim) { return detail::padded_in(kTensorCoreHeadDims, head_dim); }
/// The compiled head dim of the Hopper steps that a call of @p head_dim runs at: the
/// smallest of kHopperHeadDims that holds it (D = 40 runs at 64, D = 96 at 128); 0 above 128.
constexpr int padded_head_dim_sm90(std::int64_t head_dim) { return detail::padded_in(kHopperHeadDims, head_dim); }

/// Calls @p fn with std::integral_constant<int, HEAD_DIM> for the smallest compiled head
/// dim of kHeadDims that holds @p head_dim; kernels zero-pad the rest (so D = 40 runs the
/// 64 kernel, D = 80 the 128 one).
/// @throws Unsupported naming q.shape[3] (exceeds_limit()) when head_dim > 256.
template <typename Fn>
void dispatch_head_dim(std::int64_t head_dim, const char* step_name, Fn&& fn) {
  detail::dispatch_head_dim_in<kHeadDims>(head_dim, step_name, fn);
}

/// As dispatch_head_dim(), over the tensor-core set kTensorCoreHeadDims, padded as
/// padded_head_dim_tc() says (D = 80 runs the 96 kernel, D = 200 the 256 one).
/// @throws Unsupported naming q.shape[3] (exceeds_limit()) when head_dim > 256.
template <typename Fn>
void dispatch_head_dim_tc(std::int64_t head_dim, const char* step_name, Fn&& fn) {
  detail::dispatch_head_dim_in<kTensorCoreHeadDims>(head_dim, step_name, fn);
}

/// As dispatch_head_dim(), over the Hopper set kHopperHeadDims (D = 40 runs the 64 kernel,
/// D = 96 the 128 one).
/// @throws Unsupported naming q.shape[3] (exceeds_limit()) when head_dim > 128.
template <typename Fn>
void dispatch_head_dim_sm90(std::int64_t head_dim, const char* step_name, Fn&& fn) {
  detail::dispatch_head_dim_in<kHopperHeadDims>(head_dim, step_name, fn);
}

/// The checks the 16-byte copies of the tensor-core steps need beyond the contract: a 16-bit
/// dtype, head_dim a multiple of 8 and at most 256 (the largest of kTensorCoreHeadDims), data
/// 16-byte aligned and batch/head/seq strides multiples of 8 elements, for Q, K, V and O.
/// Defined in common/src/dispatch.cpp.
/// @throws Unsupported naming the field (e.g. "k.stride[2]") and @p step_name.
void check_tensor_core_args(const AttentionArgs& args, const char* step_name);

}  // namespace flashsteps
