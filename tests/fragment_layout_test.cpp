// SPDX-License-Identifier: Apache-2.0
// Host-side checks of the fragment index maps (common/include/flashsteps/fragment_layout.h)
// that tile_cuda.h and tile_hip.h index registers and shared memory with. The expected values
// are the PTX ISA's formulas ("Matrix Fragments for mma.m16n8k16 with floating point type":
// groupID = lane >> 2, threadID_in_group = lane % 4, ...) and AMD's MFMA 16x16x16 layouts,
// written out here independently, plus a few entries read off the ISA's figures. The ldmatrix
// address maps are checked by composing them with ldmatrix's documented behaviour: the lane
// that gives a row's address and the lane that receives an element must yield exactly the
// fragment mma.sync expects. No GPU needed.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "flashsteps/fragment_layout.h"

namespace flashsteps {
namespace {

using fragment::RowCol;

bool same(RowCol a, RowCol b) { return a.row == b.row && a.col == b.col; }

TEST(FragmentLayout, MmaAFollowsThePtxFormula) {
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, tig = lane % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = (i < 2 || (i >= 4 && i < 6)) ? group : group + 8;
      const int col = tig * 2 + (i & 0x1) + (i >= 4 ? 8 : 0);
      const RowCol got = fragment::mma_a(lane, i);
      EXPECT_EQ(got.row, row) << "lane " << lane << " a" << i;
      EXPECT_EQ(got.col, col) << "lane " << lane << " a" << i;
    }
  }
  // Read off the ISA's figure: lane 0 holds A[0][0], A[0][1]; lane 5 holds a2 = A[9][2].
  EXPECT_TRUE(same(fragment::mma_a(0, 1), {0, 1}));
  EXPECT_TRUE(same(fragment::mma_a(5, 2), {9, 2}));
  EXPECT_TRUE(same(fragment::mma_a(31, 7), {15, 15}));
}

TEST(FragmentLayout, MmaBFollowsThePtxFormula) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const int row = (lane % 4) * 2 + (i & 0x1) + (i >= 2 ? 8 : 0);
      const RowCol got = fragment::mma_b(lane, i);
      EXPECT_EQ(got.row, row) << "lane " << lane << " b" << i;
      EXPECT_EQ(got.col, lane >> 2) << "lane " << lane << " b" << i;
    }
  }
  EXPECT_TRUE(same(fragment::mma_b(6, 3), {13, 1}));
}

TEST(FragmentLayout, MmaCFollowsThePtxFormula) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      const RowCol got = fragment::mma_c(lane, i);
      EXPECT_EQ(got.row, i < 2 ? lane >> 2 : (lane >> 2) + 8) << "lane " << lane << " c" << i;
      EXPECT_EQ(got.col, (lane % 4) * 2 + (i & 0x1)) << "lane " << lane << " c" << i;
    }
  }
  EXPECT_TRUE(same(fragment::mma_c(7, 3), {9, 7}));
}

TEST(FragmentLayout, EveryElementHasExactlyOneOwner) {
  std::set<std::pair<int, int>> a, b, c, ma, mb, md;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) a.insert({fragment::mma_a(lane, i).row, fragment::mma_a(lane, i).col});
    for (int i = 0; i < 4; ++i) b.insert({fragment::mma_b(lane, i).row, fragment::mma_b(lane, i).col});
    for (int i = 0; i < 4; ++i) c.insert({fragment::mma_c(lane, i).row, fragment::mma_c(lane, i).col});
  }
  for (int lane = 0; lane < 64; ++lane)
    for (int e = 0; e < 4; ++e) {
      ma.insert({fragment::mfma_a(lane, e).row, fragment::mfma_a(lane, e).col});
      mb.insert({fragment::mfma_b(lane, e).row, fragment::mfma_b(lane, e).col});
      md.insert({fragment::mfma_d(lane, e).row, fragment::mfma_d(lane, e).col});
    }
  EXPECT_EQ(a.size(), 256u);  // 16 x 16
  EXPECT_EQ(b.size(), 128u);  // 16 x 8
  EXPECT_EQ(c.size(), 128u);  // 16 x 8
  EXPECT_EQ(ma.size(), 256u);
  EXPECT_EQ(mb.size(), 256u);
  EXPECT_EQ(md.size(), 256u);
}

// ldmatrix.x4 as the PTX ISA describes it: register m of lane l receives elements
// (row l / 4, columns 2 (l % 4) + h) of matrix m, whose row r was addressed by lane 8 m + r.
// Returns the (row, col) in the source tile of element h of register m of lane l, given the
// tile position each addressing lane points at.
template <typename Address>
RowCol ldmatrix_source(Address address, int lane, int m, int h, bool trans) {
  const RowCol in_matrix = trans ? fragment::ldmatrix_trans_received(lane, h) : fragment::ldmatrix_received(lane, h);
  const RowCol row_start = address(8 * m + in_matrix.row);  // the lane that gave this row's address
  return {row_start.row, row_start.col + in_matrix.col};
}

TEST(FragmentLayout, LdmatrixReceivesAsThePtxIsaSays) {
  // Non-transposed: lane l gets row l / 4, columns 2 (l % 4), + 1 (e.g. lane 9: row 2, cols 2, 3).
  EXPECT_TRUE(same(fragment::ldmatrix_received(9, 0), {2, 2}));
  EXPECT_TRUE(same(fragment::ldmatrix_received(9, 1), {2, 3}));
  EXPECT_TRUE(same(fragment::ldmatrix_trans_received(9, 1), {3, 2}));
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(fragment::ldmatrix_address_row(lane), lane % 8);
}

TEST(FragmentLayout, LdmatrixOfTheAddressMapGivesTheAFragment) {
  // Q (row-major 16 x 16): register m, half h must be a_{2m+h}.
  for (int lane = 0; lane < 32; ++lane)
    for (int m = 0; m < 4; ++m)
      for (int h = 0; h < 2; ++h) {
        const RowCol got = ldmatrix_source(fragment::ldmatrix_x4_a_address, lane, m, h, false);
        const RowCol want = fragment::mma_a(lane, 2 * m + h);
        EXPECT_TRUE(same(got, want)) << "lane " << lane << " reg " << m << " half " << h;
      }
}

TEST(FragmentLayout, LdmatrixOfTheAddressMapGivesTheBFragmentOfK) {
  // K stored [n][k]: registers 0, 1 are b0b1, b2b3 of keys 0-7, registers 2, 3 of keys 8-15.
  for (int lane = 0; lane < 32; ++lane)
    for (int m = 0; m < 4; ++m)
      for (int h = 0; h < 2; ++h) {
        const RowCol got = ldmatrix_source(fragment::ldmatrix_x4_b_address, lane, m, h, false);  // (n, k)
        const RowCol b = fragment::mma_b(lane, 2 * (m % 2) + h);                                  // (k, n)
        EXPECT_EQ(got.row, b.col + 8 * (m / 2)) << "lane " << lane << " reg " << m;
        EXPECT_EQ(got.col, b.row) << "lane " << lane << " reg " << m;
      }
}

TEST(FragmentLayout, LdmatrixTransOfTheAddressMapGivesTheBFragmentOfV) {
  // V stored [k][n], read transposed: registers 0, 1 for columns 0-7, registers 2, 3 for 8-15.
  for (int lane = 0; lane < 32; ++lane)
    for (int m = 0; m < 4; ++m)
      for (int h = 0; h < 2; ++h) {
        const RowCol got = ldmatrix_source(fragment::ldmatrix_x4_trans_b_address, lane, m, h, true);  // (k, n)
        const RowCol b = fragment::mma_b(lane, 2 * (m % 2) + h);
        EXPECT_EQ(got.row, b.row) << "lane " << lane << " reg " << m;
        EXPECT_EQ(got.col, b.col + 8 * (m / 2)) << "lane " << lane << " reg " << m;
      }
}

TEST(FragmentLayout, TwoAccumulatorAtomsAreTheAFragmentOfP) {
  // FlashAttention-2's register reuse: c0..c3 of n8 atoms 2kk and 2kk + 1 are a0..a7 of P.
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 8; ++i) {
      const int atom = i / 4, e = (i % 2) + 2 * ((i / 2) % 2);
      const RowCol c = fragment::mma_c(lane, e);
      EXPECT_TRUE(same({c.row, c.col + 8 * atom}, fragment::mma_a(lane, i))) << "lane " << lane << " a" << i;
    }
}

TEST(FragmentLayout, MfmaFollowsTheCdnaLayouts) {
  for (int lane = 0; lane < 64; ++lane)
    for (int e = 0; e < 4; ++e) {
      const int r = lane % 16, q = lane / 16;
      EXPECT_TRUE(same(fragment::mfma_a(lane, e), {r, 4 * q + e})) << "lane " << lane;
      EXPECT_TRUE(same(fragment::mfma_b(lane, e), {4 * q + e, r})) << "lane " << lane;
      EXPECT_TRUE(same(fragment::mfma_d(lane, e), {4 * q + e, r})) << "lane " << lane;
    }
  // Lane 37 = 16 * 2 + 5: A[5][8..11], D[8..11][5].
  EXPECT_TRUE(same(fragment::mfma_a(37, 0), {5, 8}));
  EXPECT_TRUE(same(fragment::mfma_d(37, 3), {11, 5}));
}

TEST(FragmentLayout, TheKernelsMacrosWithAnAtomOffsetAreTheMapsMovedByIt) {
  // tile_cuda.h / tile_hip.h call the macros with the atom's first row or column (16 i, 8 j)
  // and, for slot_row(), with threadIdx.x % 32 or threadIdx.x itself (unsigned).
  for (unsigned tid = 0; tid < 256; ++tid)
    for (int e = 0; e < 4; ++e) {
      const int lane32 = static_cast<int>(tid % 32), lane64 = static_cast<int>(tid % 64);
      EXPECT_EQ(static_cast<int>(FLASHSTEPS_MMA_C_ROW(16 * 3, tid % 32, e / 2)), 48 + fragment::mma_c(lane32, e).row);
      EXPECT_EQ(FLASHSTEPS_MMA_C_COL(8 * 5, lane32, e % 2), 40 + fragment::mma_c(lane32, e).col);
      EXPECT_EQ(static_cast<int>(FLASHSTEPS_MFMA_D_COL(16 * 2, tid)), 32 + fragment::mfma_d(lane64, e).col);
      EXPECT_EQ(FLASHSTEPS_MFMA_D_ROW(16 * 7, lane64, e), 112 + fragment::mfma_d(lane64, e).row);
    }
}

TEST(FragmentLayout, MfmaAccumulatorOfSTransposedIsTheBOperandOfPTransposed) {
  // tile_hip.h: D of S^T = K Q^T in lane l is exactly the B operand P^T of O^T += V^T P^T.
  for (int lane = 0; lane < 64; ++lane)
    for (int e = 0; e < 4; ++e) EXPECT_TRUE(same(fragment::mfma_d(lane, e), fragment::mfma_b(lane, e)));
}

}  // namespace
}  // namespace flashsteps
