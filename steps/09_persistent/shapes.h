// SPDX-License-Identifier: Apache-2.0
/// @file shapes.h
/// @brief Step 09's configuration space: the tile shapes compiled per head dim, the default
/// of each problem, and the tuner that chooses among them (step 06's, shared:
/// common/include/flashsteps/tuner.h).
///
/// A shape is BLOCK_M query rows per block (64 per consumer warpgroup: 128 = two consumers,
/// 192 = three), BLOCK_N keys per K/V tile (a wgmma N: 64, 128, 160 or 176) and STAGES K/V buffers.
/// Which shapes exist for a head dim is decided by what fits: the consumers' S, P and O in
/// the registers setmaxnreg gives them (240 per thread with two consumers, 160 with three),
/// and Q plus STAGES K and V tiles in the 227 KiB of shared memory of a block (plus an O
/// buffer of Q's size where it fits: every shape but 128 x 176).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashsteps/attention.h"
#include "flashsteps/tuner.h"
#include "flashsteps/vendor.h"

namespace flashsteps::step09 {

/// One compiled point of the space.
struct TileShape {
  int block_m = 0;  ///< BLOCK_M: query rows per block (64 per consumer warpgroup)
  int block_n = 0;  ///< BLOCK_N: keys per K/V tile
  int stages = 0;   ///< K/V shared-memory buffers of the ring

  /// "m128_n176_s2".
  std::string name() const;
  /// Parses name(); nullopt when @p text is not of that form.
  static std::optional<TileShape> parse(const std::string& text);
  /// Same BLOCK_M, BLOCK_N and STAGES.
  bool operator==(const TileShape& o) const { return block_m == o.block_m && block_n == o.block_n && stages == o.stages; }
};

/// A compiled point of the space: its shape and the launcher of its kernel.
using Candidate = tuning::Tuner<TileShape>::Candidate;

/// The shapes compiled for head dim @p head_dim (64 or 128: the compiled Hopper head dims,
/// kHopperHeadDims), in declared order; empty for any other value.
const std::vector<Candidate>& space(int head_dim);

/// The untuned default for a compiled head dim, a mask and @p seqlen_k (keys per head): the
/// shape attention_forward() runs when nothing forces one and no tuning table or cache holds
/// the problem's key: D = 128 full 128 x 176 (FlashAttention-3's choice),
/// 128 x 160 up to 4096 keys (its O buffer lets the next Q load early), 128 x 128 up to 2048
/// (no padded key tile where 128 divides the keys), D = 128 causal 128 x 128 (a diagonal tile of 176 keys hides more
/// keys), D = 64 192 x 128 (FlashAttention-3's); the chapter has the measurements behind
/// each choice.
TileShape default_shape(int head_dim, Mask mask, std::int64_t seqlen_k);

/// Step 09's tuner, step 06's machinery given step 09's space: forced variable
/// FLASHSTEPS_STEP09_SHAPE (e.g. `m128_n176_s2`), cache variable FLASHSTEPS_STEP09_TUNE_CACHE
/// (default `$HOME/.cache/flashsteps/step09.json`), FLASHSTEPS_TUNE=1 to tune at run time,
/// table format `flashsteps-step09-tuning/1`, the tables of steps/09_persistent/tuned/
/// compiled in, and default_shape() as the default. tuner().shapes(d) lists the space,
/// tuner().selected(args) says which shape a call would run.
tuning::Tuner<TileShape>& tuner();

/// attention_forward() with the shape @p shape instead of the tuner's choice.
/// @throws Unsupported "shape <name> is not in step 09's space for head_dim <d>: <the space>"
///         when the padded head dim of @p args has no such compiled shape; else as
///         attention_forward().
void attention_forward_with(const AttentionArgs& args, vendor::Stream stream, const TileShape& shape);

}  // namespace flashsteps::step09
