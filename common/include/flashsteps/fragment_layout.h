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
/// Each map is written once, as a macro (FLASHSTEPS_MMA_*, FLASHSTEPS_LDMATRIX_*,
/// FLASHSTEPS_MFMA_*), and the constexpr functions below are built from the macros. The kernels
/// use the macros: nvcc generates different code for the very same arithmetic when it sits
/// behind a function call (a few instructions more or fewer, and a different schedule), while
/// with the macros the PTX and the gfx ISA of the steps stay byte for byte what the inline
/// arithmetic gave (compared when the macros replaced it). A macro's operands are the offset
/// of the atom (@p row0, @p col0: 16 i, 8 j, ...) and the lane, so that it expands to exactly
/// that arithmetic.
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

// ------------------------------------------------------------------ the maps, once

/// groupID of the PTX ISA (lane >> 2): lanes 4 g .. 4 g + 3 share row g (and g + 8) of A and C.
#define FLASHSTEPS_MMA_GROUP_ID(lane) ((lane) / 4)
/// threadID_in_group of the PTX ISA (lane % 4): which column pair of the row the lane holds.
#define FLASHSTEPS_MMA_THREAD_IN_GROUP(lane) ((lane) % 4)
/// mma.m16n8k16 C/D: row of element c_{2 half + x} of @p lane in an atom starting at row
/// @p row0: row0 + groupID + 8 half.
#define FLASHSTEPS_MMA_C_ROW(row0, lane, half) ((row0) + FLASHSTEPS_MMA_GROUP_ID(lane) + 8 * (half))
/// mma.m16n8k16 C/D: column of element c_{2 y + odd} of @p lane in an atom starting at column
/// @p col0: col0 + 2 threadID_in_group + odd.
#define FLASHSTEPS_MMA_C_COL(col0, lane, odd) ((col0) + 2 * FLASHSTEPS_MMA_THREAD_IN_GROUP(lane) + (odd))
/// mma.m16n8k16 A: row of a_i (half = (i / 2) % 2), as C's.
#define FLASHSTEPS_MMA_A_ROW(lane, half) FLASHSTEPS_MMA_C_ROW(0, lane, half)
/// mma.m16n8k16 A: column of a_i (odd = i % 2, high = i / 4): 2 threadID_in_group + odd + 8 high.
#define FLASHSTEPS_MMA_A_COL(lane, odd, high) FLASHSTEPS_MMA_C_COL(8 * (high), lane, odd)
/// mma.m16n8k16 B (k x n): row of b_i (odd = i % 2, high = i / 2): 2 threadID_in_group + odd + 8 high.
#define FLASHSTEPS_MMA_B_ROW(lane, odd, high) FLASHSTEPS_MMA_C_COL(8 * (high), lane, odd)
/// mma.m16n8k16 B: column of b_i: groupID.
#define FLASHSTEPS_MMA_B_COL(lane) FLASHSTEPS_MMA_GROUP_ID(lane)

/// ldmatrix.x4 into the A fragment: the row of the 16 x 16 tile (row-major) whose address
/// @p lane gives; registers 0..3 are then a0a1, a2a3, a4a5, a6a7 (matrices rows 0-7 / 8-15 of
/// columns 0-7, then of columns 8-15).
#define FLASHSTEPS_LDMATRIX_A_ROW(lane) ((lane) % 16)
/// ldmatrix.x4 into the A fragment: the first column of that row.
#define FLASHSTEPS_LDMATRIX_A_COL(lane) (8 * ((lane) / 16))
/// ldmatrix.x4 into B fragments from an n-major 16 (n) x 16 (k) tile (K in S = Q K^T): the row
/// (n) whose address @p lane gives; registers 0, 1 are b0b1, b2b3 of the n8 atom of rows 0-7,
/// registers 2, 3 those of rows 8-15.
#define FLASHSTEPS_LDMATRIX_B_ROW(lane) (8 * ((lane) / 16) + (lane) % 8)
/// ldmatrix.x4 into B fragments from an n-major tile: the first column (k) of that row.
#define FLASHSTEPS_LDMATRIX_B_COL(lane) (8 * (((lane) / 8) % 2))
/// ldmatrix.x4.trans into B fragments from a k-major 16 (k) x 16 (n) tile (V in O += P V): the
/// row (k) whose address @p lane gives; registers 0, 1 are b0b1, b2b3 of the n8 atom of
/// columns 0-7, registers 2, 3 those of columns 8-15.
#define FLASHSTEPS_LDMATRIX_TRANS_B_ROW(lane) (8 * (((lane) / 8) % 2) + (lane) % 8)
/// ldmatrix.x4.trans from a k-major tile: the first column (n) of that row.
#define FLASHSTEPS_LDMATRIX_TRANS_B_COL(lane) (8 * ((lane) / 16))

/// MFMA 16x16x16, lane = 16 q + r: r, the row of A (and the column of B and D) the lane holds.
#define FLASHSTEPS_MFMA_LANE_R(lane) ((lane) % 16)
/// MFMA 16x16x16, lane = 16 q + r: q, which four consecutive k (A's columns, B's and D's rows).
#define FLASHSTEPS_MFMA_LANE_Q(lane) ((lane) / 16)
/// MFMA 16x16x16 A: row of @p lane's elements in an atom starting at row @p row0: r.
#define FLASHSTEPS_MFMA_A_ROW(row0, lane) ((row0) + FLASHSTEPS_MFMA_LANE_R(lane))
/// MFMA 16x16x16 A: column of element @p e of @p lane: 4 q + e.
#define FLASHSTEPS_MFMA_A_COL(col0, lane, e) ((col0) + 4 * FLASHSTEPS_MFMA_LANE_Q(lane) + (e))
/// MFMA 16x16x16 B (k x n): row of element @p e of @p lane: 4 q + e.
#define FLASHSTEPS_MFMA_B_ROW(row0, lane, e) FLASHSTEPS_MFMA_A_COL(row0, lane, e)
/// MFMA 16x16x16 B: column of @p lane's elements: r.
#define FLASHSTEPS_MFMA_B_COL(col0, lane) FLASHSTEPS_MFMA_A_ROW(col0, lane)
/// MFMA 16x16x16 D (fp32): row of element @p e of @p lane, as B's: 4 q + e.
#define FLASHSTEPS_MFMA_D_ROW(row0, lane, e) FLASHSTEPS_MFMA_B_ROW(row0, lane, e)
/// MFMA 16x16x16 D: column of @p lane's elements, as B's: r.
#define FLASHSTEPS_MFMA_D_COL(col0, lane) FLASHSTEPS_MFMA_B_COL(col0, lane)

namespace flashsteps::fragment {

/// A position in a matrix: row and column from 0.
struct RowCol {
  int row;  ///< row index
  int col;  ///< column index
};

// ------------------------------------------------------------------ NVIDIA: mma.m16n8k16

/// groupID of the PTX ISA (FLASHSTEPS_MMA_GROUP_ID).
FLASHSTEPS_HD_INLINE constexpr int group_id(int lane) { return FLASHSTEPS_MMA_GROUP_ID(lane); }
/// threadID_in_group of the PTX ISA (FLASHSTEPS_MMA_THREAD_IN_GROUP).
FLASHSTEPS_HD_INLINE constexpr int thread_in_group(int lane) { return FLASHSTEPS_MMA_THREAD_IN_GROUP(lane); }

/// Element a_i (i = 0..7, two 16-bit values per register) of the 16x16 A fragment of
/// mma.m16n8k16 held by @p lane.
FLASHSTEPS_HD_INLINE constexpr RowCol mma_a(int lane, int i) {
  return {FLASHSTEPS_MMA_A_ROW(lane, (i / 2) % 2), FLASHSTEPS_MMA_A_COL(lane, i % 2, i / 4)};
}
/// Element b_i (i = 0..3) of the 16x8 B fragment (k x n) held by @p lane.
FLASHSTEPS_HD_INLINE constexpr RowCol mma_b(int lane, int i) {
  return {FLASHSTEPS_MMA_B_ROW(lane, i % 2, i / 2), FLASHSTEPS_MMA_B_COL(lane)};
}
/// Element c_i (i = 0..3, fp32) of the 16x8 C/D accumulator held by @p lane.
FLASHSTEPS_HD_INLINE constexpr RowCol mma_c(int lane, int i) {
  return {FLASHSTEPS_MMA_C_ROW(0, lane, i / 2), FLASHSTEPS_MMA_C_COL(0, lane, i % 2)};
}

/// ldmatrix .x4: the row (0..7) of matrix lane / 8 whose address @p lane gives.
FLASHSTEPS_HD_INLINE constexpr int ldmatrix_address_row(int lane) { return lane % 8; }
/// ldmatrix (without .trans): element h (0, 1) of each 8x8 matrix that @p lane receives.
FLASHSTEPS_HD_INLINE constexpr RowCol ldmatrix_received(int lane, int h) { return {lane / 4, 2 * (lane % 4) + h}; }
/// ldmatrix .trans: element h (0, 1) of each 8x8 matrix (as stored) that @p lane receives.
FLASHSTEPS_HD_INLINE constexpr RowCol ldmatrix_trans_received(int lane, int h) {
  return {2 * (lane % 4) + h, lane / 4};
}

/// Row and column of a 16x16 A tile (row-major) whose address @p lane gives to ldmatrix.x4
/// (FLASHSTEPS_LDMATRIX_A_ROW / _COL).
FLASHSTEPS_HD_INLINE constexpr RowCol ldmatrix_x4_a_address(int lane) {
  return {FLASHSTEPS_LDMATRIX_A_ROW(lane), FLASHSTEPS_LDMATRIX_A_COL(lane)};
}
/// Row (n) and column (k) of an n-major tile (K) whose address @p lane gives to ldmatrix.x4.
FLASHSTEPS_HD_INLINE constexpr RowCol ldmatrix_x4_b_address(int lane) {
  return {FLASHSTEPS_LDMATRIX_B_ROW(lane), FLASHSTEPS_LDMATRIX_B_COL(lane)};
}
/// Row (k) and column (n) of a k-major tile (V) whose address @p lane gives to ldmatrix.x4.trans.
FLASHSTEPS_HD_INLINE constexpr RowCol ldmatrix_x4_trans_b_address(int lane) {
  return {FLASHSTEPS_LDMATRIX_TRANS_B_ROW(lane), FLASHSTEPS_LDMATRIX_TRANS_B_COL(lane)};
}

// ------------------------------------------------------------------ AMD: MFMA 16x16x16

/// Element e (0..3) of the 16x16 A operand of the 16x16x16 MFMA held by @p lane (0..63).
FLASHSTEPS_HD_INLINE constexpr RowCol mfma_a(int lane, int e) {
  return {FLASHSTEPS_MFMA_A_ROW(0, lane), FLASHSTEPS_MFMA_A_COL(0, lane, e)};
}
/// Element e (0..3) of the 16x16 B operand (k x n) held by @p lane.
FLASHSTEPS_HD_INLINE constexpr RowCol mfma_b(int lane, int e) {
  return {FLASHSTEPS_MFMA_B_ROW(0, lane, e), FLASHSTEPS_MFMA_B_COL(0, lane)};
}
/// Element e (0..3) of the 16x16 fp32 D accumulator held by @p lane.
FLASHSTEPS_HD_INLINE constexpr RowCol mfma_d(int lane, int e) {
  return {FLASHSTEPS_MFMA_D_ROW(0, lane, e), FLASHSTEPS_MFMA_D_COL(0, lane)};
}

}  // namespace flashsteps::fragment
