// SPDX-License-Identifier: Apache-2.0
/// @file splits.h
/// @brief Step 10's plan of a call: which tile runs it, how many splits of the keys, and how
/// much workspace the splits need. Host code only, no device needed: the CPU tests check it.
///
/// A call of step 10 is cut into blocks of (batch b, KV head hk, packed-row tile, split s):
///  - *packed GQA*: the G = Hq / Hkv query heads that read KV head hk are rows of one tile.
///    Packed row r of (b, hk) is query row i = r / G of query head h = hk G + r % G, so a
///    (b, hk) has G Nq packed rows, cut into tiles of BLOCK_M rows (TileShape::block_m);
///  - *split-KV*: the key tiles a row tile sees (BLOCK_N keys each) are cut into num_splits
///    contiguous ranges, one block each. A block writes its unnormalised output with its row
///    max and row sum to the workspace, and a second kernel combines the splits (step.cu).
/// One split writes O and LSE directly, with no workspace and no second kernel.
///
/// Sources: flash-decoding (Dao, Haziza, Massa, Sizov 2023, "Flash-Decoding for long-context
/// inference", PyTorch blog): split the keys across blocks, combine by log-sum-exp; the
/// online softmax and its rescaling (Dao 2023, "FlashAttention-2", Algorithm 1).
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashsteps/attention.h"
#include "flashsteps/vendor.h"

namespace flashsteps::step10 {

/// One tile shape of step 10's kernel: BLOCK_M packed rows per block, BLOCK_N keys per K/V
/// tile, WARPS_M x WARPS_N warps (wavefronts), STAGES K/V buffers. Warp (wm, wn) owns the
/// BLOCK_M / WARPS_M rows wm and the BLOCK_N / WARPS_N keys wn of every tile: with WARPS_N > 1
/// the warps of a block split the keys as the blocks of a call do, each keeping its own running
/// max, sum and O, and the block combines them at the end by the same rule as the combine.
struct TileShape {
  int block_m;  ///< packed rows (query rows x heads of a group) per block
  int block_n;  ///< keys per K/V tile (all warps together)
  int warps_m;  ///< warps (NVIDIA) or wavefronts (AMD) down the rows, BLOCK_M / WARPS_M rows each
  int warps_n;  ///< warps across the keys, BLOCK_N / WARPS_N keys of every tile each
  int stages;   ///< K/V shared-memory buffers of the copy pipeline
  /// Q, K and V tiles in the swizzled layout (tile::Swizzled: rows of whole 128-byte lines, so
  /// each warp's cp.async asks L2 for whole lines) instead of step 06's padded one (tile::Padded).
  /// NVIDIA only (tile_hip.h has no swizzled products), for compiled head dims that are
  /// multiples of 64; it changes tile_smem_bytes().
  bool swizzled = false;
  constexpr int warps() const { return warps_m * warps_n; }  ///< warps per block
};

/// The decode tile, for G Nq <= 16 packed rows: one 16-row MMA tile whose keys are split
/// across four warps (two wavefronts on AMD), and three stages (two on AMD, whose copies are
/// synchronous). On an H200 two blocks share an SM: eight warps, with four K/V tiles in flight
/// (at head dim 128: 64 keys, 32 KiB each). One warp per block, the first version of this step,
/// kept two warps per SM, each issuing an instruction every 3.6 cycles (Nsight Compute); PyTorch's
/// cuDNN backend splits its 128-key tile over four warps the same way (Nsight Compute names
/// its kernel 16x128x128_1x4x1). On NVIDIA its tiles are swizzled where a row is whole 128-byte
/// lines: with step 06's padded rows the H200's L2 served 2.6 requests per line the stream
/// read, and the stream stopped at 85 % of the DRAM peak (bf16, D = 64, B = 32, Hkv = 8,
/// Nk = 65536; chapter 10).
/// @p head_dim is a compiled head dim (kTensorCoreHeadDims).
constexpr TileShape decode_tile(int head_dim) {
#if FLASHSTEPS_VENDOR_HIP
  return head_dim <= 128 ? TileShape{16, 32, 1, 2, 2} : TileShape{16, 16, 1, 1, 2};
#else
  // 256: two warps of 16 keys keep two blocks per SM within the 228 KiB of shared memory.
  // Swizzled wherever a row is whole 128-byte lines (head dims 64, 128, 256; not 32 or 96).
  const bool swizzled = head_dim % 64 == 0;
  return head_dim <= 64    ? TileShape{16, 128, 1, 4, 3, swizzled}
         : head_dim <= 128 ? TileShape{16, 64, 1, 4, 3, swizzled}
                           : TileShape{16, 32, 1, 2, 3, swizzled};
#endif
}

/// The prefill tile, for more than 16 packed rows: step 05's shape with 16 rows per warp, in
/// step 06's padded layout (swizzled, the chunked-prefill point ran 3-6 % slower on the H200).
constexpr TileShape prefill_tile(int head_dim) {
#if FLASHSTEPS_VENDOR_HIP
  return head_dim <= 128 ? TileShape{64, 32, 4, 1, 2} : TileShape{32, 16, 2, 1, 2};
#else
  return head_dim <= 128 ? TileShape{64, 64, 4, 1, 2} : TileShape{64, 32, 4, 1, 2};
#endif
}

/// Shared memory of one block of @p tile at the compiled @p head_dim, in bytes: the Q tile and
/// STAGES K and V tiles, 16-bit elements, rows of head_dim elements when TileShape::swizzled,
/// else padded by 16 bytes (tile::smem_pitch()).
constexpr std::size_t tile_smem_bytes(const TileShape& tile, int head_dim) {
  return static_cast<std::size_t>(tile.block_m + 2 * tile.stages * tile.block_n) *
         (tile.swizzled ? head_dim : head_dim + 8) * 2;
}

/// Largest number of splits: forced values above it are refused, the heuristic stays below.
inline constexpr int kMaxSplits = 256;
/// The heuristic gives every split at least this many K/V tiles (its prologue and the combine
/// cost about one tile's time; a split of one tile would spend half its time on them).
inline constexpr int kMinTilesPerSplit = 2;

/// Blocks of @p tile that one SM (CU) holds at once, from its shared memory and threads (an
/// estimate from the architecture's limits, not an occupancy query): 2 on the H200 for both tiles.
int resident_blocks_per_sm(const TileShape& tile, int head_dim);

/// Blocks per SM that the split count aims for: one of the decode tile, whose four warps
/// stream their keys fast enough that a second block adds little while every extra split
/// adds partial writes to the combine (the chapter's sweep: 16 splits beat 32 at B = 1);
/// resident_blocks_per_sm() of the prefill tile, whose 64 rows are arithmetic-bound.
int target_blocks_per_sm(const TileShape& tile, int head_dim);

/// The split count the heuristic chooses for a grid of @p blocks_unsplit blocks (one per
/// batch, KV head and row tile) whose rows see up to @p key_tiles K/V tiles, on a GPU of
/// @p sm_count SMs of @p blocks_per_sm blocks each (a wave: sm_count x blocks_per_sm blocks):
///  - 1 when the unsplit grid already fills a wave (prefill-like shapes, and decode with many
///    batches and heads) or when there is no SM count (no device);
///  - else the fewest splits whose grid keeps at least 95 % of a wave's blocks busy in every
///    wave (waves / ceil(waves) >= 0.95), at most key_tiles / kMinTilesPerSplit and
///    kMaxSplits; when no count up to that cap qualifies, the one that keeps the most busy
///    (the smallest of equals).
/// Example (H200, 132 SMs, one decode block per SM): B = 1, Hkv = 8, Nq = 1 (8 blocks) gives
/// 16 splits (128 blocks, 0.97 of a wave; 15 would leave 12 SMs idle); B = 8 gives 2; B = 32
/// (256 blocks) gives 1.
int choose_num_splits(std::int64_t blocks_unsplit, std::int64_t key_tiles, int sm_count, int blocks_per_sm);

/// Where a split count came from.
enum class SplitSource {
  heuristic,    ///< choose_num_splits()
  environment,  ///< the environment variable FLASHSTEPS_NUM_SPLITS
  forced,       ///< ScopedNumSplits (tests)
};

/// How one call is cut up (see the top of this file).
struct SplitPlan {
  TileShape tile{};              ///< decode_tile() or prefill_tile() of the padded head dim
  int head_dim = 0;              ///< the compiled head dim the call runs at (padded_head_dim_tc())
  std::int64_t batch_heads_kv = 0;  ///< B Hkv
  std::int64_t group = 1;        ///< G = Hq / Hkv, query heads per KV head
  std::int64_t packed_rows = 0;  ///< G Nq, rows of one (batch, KV head)
  std::int64_t m_tiles = 0;      ///< ceil(packed_rows / BLOCK_M)
  std::int64_t key_tiles = 0;    ///< ceil(Nk / BLOCK_N), what the last row sees unmasked
  int num_splits = 1;            ///< split count: key ranges per row tile
  SplitSource source = SplitSource::heuristic;  ///< where num_splits came from
  /// Blocks of the split kernel: B Hkv m_tiles num_splits.
  std::int64_t blocks() const;
};

/// The plan of @p args (validated, non-empty, head_dim <= 256) on a GPU of @p sm_count SMs:
/// the tile by packed rows (<= 16: decode_tile()), then the split count: @p forced when it is
/// positive, else FLASHSTEPS_NUM_SPLITS when set, else choose_num_splits(). A forced count is
/// used as given, even above the number of key tiles (the splits past them are empty).
/// @throws InvalidArgument naming FLASHSTEPS_NUM_SPLITS when it is set to anything but an
///         integer from 1 to kMaxSplits
SplitPlan plan_splits(const AttentionArgs& args, int sm_count, int forced = 0);

/// plan_splits() on the current device (its SM count; 0 without a device) with the count
/// forced by ScopedNumSplits, if any. What attention_forward() and workspace_bytes() use.
SplitPlan plan_for_device(const AttentionArgs& args);

/// The split count choose_num_splits() gives @p args on the current device, whatever
/// FLASHSTEPS_NUM_SPLITS or ScopedNumSplits force: what the benchmark records beside a forced
/// count (its counter heuristic_splits), so that a split sweep marks the heuristic's choice.
int heuristic_num_splits(const AttentionArgs& args);

/// Workspace bytes of @p num_splits splits of @p args: for num_splits > 1, float32 partial
/// outputs `[num_splits][B Hq Nq][head_dim padded]` then row maxima and row sums
/// `[num_splits][B Hq Nq]` each; 0 for one split.
std::size_t workspace_bytes_for(const AttentionArgs& args, int num_splits);

/// Forces the split count of every call in its scope (the tests' way to reach every count;
/// programs use FLASHSTEPS_NUM_SPLITS). Not thread-safe; scopes nest.
class ScopedNumSplits {
 public:
  /// @throws InvalidArgument naming num_splits unless 1 <= @p num_splits <= kMaxSplits
  explicit ScopedNumSplits(int num_splits);
  ~ScopedNumSplits();
  ScopedNumSplits(const ScopedNumSplits&) = delete;
  ScopedNumSplits& operator=(const ScopedNumSplits&) = delete;

 private:
  int previous_;
};

}  // namespace flashsteps::step10
