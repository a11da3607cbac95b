// SPDX-License-Identifier: Apache-2.0
/// @file packing.h
/// @brief Step 10's two index maps, in plain C++ (host and device, no runtime headers), so the
/// book draws its figures from the functions the kernel runs (steps/10_split_kv/book_figures.py).
///
///  - unpack_row(): packed GQA. Packed row p of a (batch, KV head) is query row p / G of query
///    head p % G of the group (G = Hq / Hkv query heads per KV head): the G heads of one query
///    row are G consecutive rows of the tile, and K/V are read once for all of them.
///  - split_begin(): split-KV. Split s of num_splits takes key tiles
///    [split_begin(n, s, S), split_begin(n, s + 1, S)) of the n a row tile sees: contiguous,
///    sizes differing by at most one, empty when S > n.
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIP__)
/// Callable from host and device code.
#define FLASHSTEPS_HOST_DEVICE __host__ __device__ __forceinline__
#else
/// Callable from host and device code.
#define FLASHSTEPS_HOST_DEVICE inline
#endif

namespace flashsteps::step10 {

/// Where one packed row comes from: query row and head within the group.
struct PackedRow {
  std::int64_t query_row;  ///< i, 0 .. Nq - 1 (or past it for a tile's padding rows)
  int head;                ///< g, 0 .. G - 1: query head hk G + g
};

/// Packed row i0 G + g0 + @p r, for a tile whose first packed row is i0 G + g0 (0 <= g0 < G):
/// query row i0 + (g0 + r) / G, head (g0 + r) % G. The tile divides its first row once, in 64
/// bits; the rows after it divide in 32.
FLASHSTEPS_HOST_DEVICE constexpr PackedRow unpack_row(std::int64_t i0, int g0, int r, int group) {
  return {i0 + (g0 + r) / group, (g0 + r) % group};
}

/// First key tile of split @p split of @p num_splits over @p n_tiles tiles: n_tiles split /
/// num_splits (in 32 bits when the product fits, as it always does in practice).
FLASHSTEPS_HOST_DEVICE constexpr std::int64_t split_begin(std::int64_t n_tiles, int split, int num_splits) {
  const std::int64_t a = n_tiles * split;
  return a <= 0xffffffffLL ? static_cast<std::int64_t>(static_cast<std::uint32_t>(a) / static_cast<std::uint32_t>(num_splits))
                           : a / num_splits;
}

}  // namespace flashsteps::step10
