// SPDX-License-Identifier: Apache-2.0
/// @file causal_schedule.h
/// @brief Step 05's two tile maps restated in plain C++ (host and device, no runtime headers)
/// for the book's figure of the causal tile map (steps/05_causal/book_figures.py):
///
///  - block_tile(): which (batch, head) and query tile block @p block computes. Causal: the
///    query tile is the slow index, counted down (longest-processing-time first: the heaviest
///    tiles are issued in the first wave); full: the query tile is the fast index (the blocks
///    running together share one head's K and V in L2).
///  - kv_tiles(): which KV tiles a query tile visits: tiles 0 .. n_full_tiles - 1 are visited in
///    full by every row of the tile (no mask), tiles n_full_tiles .. n_tiles - 1 cross the
///    diagonal or the ragged end of K (masked), the rest are hidden from every row (skipped).
///
/// The kernels of steps 05 and 06 spell the same maps inline, between their `[start:schedule]`
/// and `[end:early_exit]` markers: those lines are step 05's lesson, so its diff against step
/// 04 shows them, and the generated code of the measured kernels stays as it was. (Step 06
/// orders its causal blocks in the same way within L2-sized sections of heads, one section
/// after the other, l2_sections.h; with one section of every head its map is this one.) The
/// expressions here are the kernels' with `blockIdx.x` named `block`;
/// tools/book/tests/test_step_figures.py fails when the two drift apart.
#pragma once

#include <cstdint>

#include "flashsteps/attention.h"  // Mask, last_visible_key()
#include "flashsteps/host_device.h"

namespace flashsteps::schedule {

/// The work of one block: a (batch, head) pair and a query tile.
struct BlockTile {
  std::int64_t bh;      ///< b Hq + h
  std::int64_t m_tile;  ///< query tile: rows m_tile BLOCK_M .. + BLOCK_M - 1
};

// [start:block_tile]
/// The (batch, head) and query tile of block @p block (blockIdx.x) of a grid of B Hq m_tiles
/// blocks, for a problem @p p with fields B, Hq, m_tiles and mask (the kernels pass their
/// Params). Causal: blocks 0 .. BH - 1 take the last query tile of every head, the next BH
/// the one before it, and so on (heaviest first). Full: head by head, query tiles in
/// increasing order (32-bit arithmetic: the grid has fewer than 2^32 blocks).
template <class Problem>
FLASHSTEPS_HD_INLINE constexpr BlockTile block_tile(const Problem& p, std::uint32_t block) {
  const std::int64_t BH = p.B * p.Hq;
  if (p.mask != Mask::none) return {block % BH, p.m_tiles - 1 - static_cast<std::int64_t>(block / BH)};
  return {block / p.m_tiles, block % p.m_tiles};
}
// [end:block_tile]

/// The KV tiles one query tile visits.
struct KvTiles {
  std::int64_t n_tiles;       ///< tiles 0 .. n_tiles - 1 are visited; the rest are skipped
  std::int64_t n_full_tiles;  ///< the first n_full_tiles (<= n_tiles) need no mask
};

// [start:kv_tiles]
/// The KV tiles (of BLOCK_N keys) that the query tile starting at row @p m0 (of BLOCK_M rows)
/// visits, for a problem @p p with fields mask, Nq and Nk. The block's last query row sees the
/// most keys: tiles past its last visible key are hidden from every row of the block and are
/// skipped. Tiles up to the first row's last visible key are visible in full to every row and
/// need no mask.
template <int BLOCK_M, int BLOCK_N, class Problem>
FLASHSTEPS_HD_INLINE constexpr KvTiles kv_tiles(const Problem& p, std::int64_t m0) {
  const std::int64_t last_row = (m0 + BLOCK_M < p.Nq ? m0 + BLOCK_M : p.Nq) - 1;
  const std::int64_t n_tiles = (last_visible_key(p.mask, last_row, p.Nq, p.Nk) + BLOCK_N) / BLOCK_N;
  const std::int64_t first_row_last_key = last_visible_key(p.mask, m0, p.Nq, p.Nk);
  return {n_tiles, (first_row_last_key + 1) / BLOCK_N};
}
// [end:kv_tiles]

}  // namespace flashsteps::schedule
