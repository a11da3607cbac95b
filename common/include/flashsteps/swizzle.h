// SPDX-License-Identifier: Apache-2.0
/// @file swizzle.h
/// @brief The 128-byte swizzled layout of the Hopper steps' shared-memory tiles (what TMA
/// writes and wgmma reads; tile_sm90.h draws the picture and says more). Plain C++ with no
/// CUDA header, so that host tools (the book's figure, the layout tests) use the very function
/// the kernels use. Source: NVIDIA PTX ISA 9.7.15.5.1.2, "Shared Memory Matrix Layout".
#pragma once

#include <cstdint>

/// `__host__ __device__` when compiled as CUDA, nothing in a plain C++ compile.
#if defined(__CUDACC__)
#define FLASHSTEPS_HOST_DEVICE __host__ __device__
#else
#define FLASHSTEPS_HOST_DEVICE
#endif

namespace flashsteps::sm90 {

/// 16-bit columns of one 128-byte swizzle chunk.
inline constexpr int kChunkCols = 64;

// [start:swizzle]
/// Byte offset of element (@p row, @p col) of a ROWS-row tile of 16-bit elements in the
/// 128-byte swizzled layout (tile_sm90.h draws it): chunk col / 64, row, then the 16-byte unit
/// (col % 64) / 8 XOR row % 8. The one layout function: TMA writes it, the descriptors
/// describe it, the epilogue and the book's figure read it.
FLASHSTEPS_HOST_DEVICE constexpr std::uint32_t swizzle_128b(int rows, int row, int col) {
  const int chunk = col / kChunkCols, c = col % kChunkCols;
  const int unit = (c / 8) ^ (row % 8);
  return static_cast<std::uint32_t>((chunk * rows + row) * 128 + unit * 16 + (c % 8) * 2);
}
// [end:swizzle]

}  // namespace flashsteps::sm90
