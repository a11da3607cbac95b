// SPDX-License-Identifier: Apache-2.0
/// @file fragment_layout.h
/// @brief Which lane holds which element of a matrix-instruction fragment: the index maps of
/// tile_cuda.h (`mma.sync` m16n8k16, `ldmatrix`) and tile_hip.h (MFMA 16x16x16), in plain
/// C++ (host and device, no runtime headers), so the kernels, the host test
/// (tests/fragment_layout_test.cpp) and the book's figure (steps/04_tensor_cores/book_figures.py)
/// share one definition.
///
/// NVIDIA, lane = 4 g + t (g = groupID = lane >> 2, t = threadID_in_group = lane % 4), from
/// the PTX ISA, section "Matrix Fragments for mma.m16n8k16 with floating point type"
/// (9.7.14.5.8 in PTX ISA 8.x):
///
///     A 16x16 (a0..a7)    row g for a0, a1, a4, a5, else g + 8;  col 2t + (i & 1), + 8 for i >= 4
///     B 16x8  (b0..b3)    row 2t + (i & 1), + 8 for i >= 2;       col g
///     C 16x8  (c0..c3)    row g for c0, c1, else g + 8;          col 2t + (i & 1)
///
/// and section "Warp-level matrix load instruction: ldmatrix": with .x4, lane l gives the
/// address of row l % 8 of matrix l / 8, and every lane receives, in register m, two adjacent
/// elements of matrix m: row l / 4, columns 2 (l % 4) and + 1 (with .trans: column l / 4,
/// rows 2 (l % 4) and + 1).
///
/// AMD, wave64, lane = 16 q + r (r = lane % 16, q = lane / 16), `v_mfma_f32_16x16x16f16` and
/// `v_mfma_f32_16x16x16bf16_1k` (AMD CDNA3 ISA, section 7.1 "Matrix Arithmetic Instructions"
/// and its dependent-operand layouts; the same in AMD's Matrix Instruction Calculator):
///
///     A 16x16 (4 per lane)  A[r][4 q + e]
///     B 16x16 (4 per lane)  B[4 q + e][r]
///     D 16x16 (4 per lane)  D[4 q + e][r]      (e = 0..3)
#pragma once

#include "flashsteps/host_device.h"

namespace flashsteps::fragment {

/// A position in a matrix: row and column from 0, in the type of the lane index they are
/// computed from (the kernels pass `threadIdx.x % 32`, unsigned, or an int lane: the
/// arithmetic, and so the generated code, is the one they would write inline).
template <typename I>
struct Position {
  I row;  ///< row index
  I col;  ///< column index
};
/// A position computed from an int lane.
using RowCol = Position<int>;

// ------------------------------------------------------------------ NVIDIA: mma.m16n8k16

/// groupID of the PTX ISA (lane >> 2): lanes 4 g .. 4 g + 3 share row g (and g + 8) of A and C.
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Lane group_id(Lane lane) { return lane >> 2; }
/// threadID_in_group of the PTX ISA (lane % 4): which column pair of the row the lane holds.
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Lane thread_in_group(Lane lane) { return lane & 3; }

/// Element a_i (i = 0..7, two 16-bit values per register) of the 16x16 A fragment of
/// mma.m16n8k16 held by @p lane.
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> mma_a(Lane lane, int i) {
  return {static_cast<Lane>(group_id(lane) + 8 * ((i / 2) % 2)),
          static_cast<Lane>(2 * thread_in_group(lane) + i % 2 + 8 * (i / 4))};
}
/// Element b_i (i = 0..3) of the 16x8 B fragment (k x n) held by @p lane.
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> mma_b(Lane lane, int i) {
  return {static_cast<Lane>(2 * thread_in_group(lane) + i % 2 + 8 * (i / 2)), group_id(lane)};
}
/// Element c_i (i = 0..3, fp32) of the 16x8 C/D accumulator held by @p lane, in an atom whose
/// first row and column are @p row0 and @p col0 (0 for the atom itself).
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> mma_c(Lane lane, int i, int row0 = 0, int col0 = 0) {
  return {static_cast<Lane>(row0 + group_id(lane) + 8 * (i / 2)),
          static_cast<Lane>(col0 + 2 * thread_in_group(lane) + i % 2)};
}

/// ldmatrix .x4: the row (0..7) of matrix lane / 8 whose address @p lane gives.
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Lane ldmatrix_address_row(Lane lane) { return lane % 8; }
/// ldmatrix (without .trans): element h (0, 1) of each 8x8 matrix that @p lane receives.
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> ldmatrix_received(Lane lane, int h) {
  return {static_cast<Lane>(lane / 4), static_cast<Lane>(2 * (lane % 4) + h)};
}
/// ldmatrix .trans: element h (0, 1) of each 8x8 matrix (as stored) that @p lane receives.
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> ldmatrix_trans_received(Lane lane, int h) {
  return {static_cast<Lane>(2 * (lane % 4) + h), static_cast<Lane>(lane / 4)};
}

/// Row and column of a 16x16 A tile (row-major, 16-bit) whose address @p lane gives to
/// ldmatrix.x4, so that registers 0..3 come back as a0a1, a2a3, a4a5, a6a7: matrices
/// (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (rows 8-15, cols 8-15).
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> ldmatrix_x4_a_address(Lane lane) {
  return {static_cast<Lane>(lane % 16), static_cast<Lane>(8 * (lane / 16))};
}

/// Row (n) and column (k) of a 16 (n) x 16 (k) tile stored n-major (K in S = Q K^T) whose
/// address @p lane gives to ldmatrix.x4, so that registers 0, 1 are b0b1, b2b3 of the n8 atom
/// of rows 0-7 and registers 2, 3 those of rows 8-15.
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> ldmatrix_x4_b_address(Lane lane) {
  return {static_cast<Lane>(8 * (lane / 16) + lane % 8), static_cast<Lane>(8 * ((lane / 8) % 2))};
}

/// Row (k) and column (n) of a 16 (k) x 16 (n) tile stored k-major (V in O += P V) whose
/// address @p lane gives to ldmatrix.x4.trans, so that registers 0, 1 are b0b1, b2b3 of the n8
/// atom of columns 0-7 and registers 2, 3 those of columns 8-15.
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> ldmatrix_x4_trans_b_address(Lane lane) {
  return {static_cast<Lane>(8 * ((lane / 8) % 2) + lane % 8), static_cast<Lane>(8 * (lane / 16))};
}

// ------------------------------------------------------------------ AMD: MFMA 16x16x16

/// Element e (0..3) of the 16x16 A operand of the 16x16x16 MFMA held by @p lane (0..63).
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> mfma_a(Lane lane, int e) {
  return {static_cast<Lane>(lane % 16), static_cast<Lane>(4 * (lane / 16) + e)};
}
/// Element e (0..3) of the 16x16 B operand (k x n) held by @p lane.
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> mfma_b(Lane lane, int e) {
  return {static_cast<Lane>(4 * (lane / 16) + e), static_cast<Lane>(lane % 16)};
}
/// Element e (0..3) of the 16x16 fp32 D accumulator held by @p lane, in an atom whose first
/// row and column are @p row0 and @p col0 (0 for the atom itself).
template <typename Lane>
FLASHSTEPS_HD_INLINE constexpr Position<Lane> mfma_d(Lane lane, int e, int row0 = 0, int col0 = 0) {
  return {static_cast<Lane>(row0 + 4 * (lane / 16) + e), static_cast<Lane>(col0 + lane % 16)};
}

}  // namespace flashsteps::fragment
