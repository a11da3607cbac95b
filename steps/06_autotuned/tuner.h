// SPDX-License-Identifier: Apache-2.0
/// @file tuner.h
/// @brief Step 06's configuration space and its tuner: which tile shape runs a problem.
///
/// A tile shape (TileChoice) is the five compile-time parameters of the kernel: BLOCK_M query
/// rows per block, BLOCK_N keys per KV tile, WARPS warps (wavefronts) per block, STAGES K/V
/// buffers in the cp.async pipeline, and OVERLAP (S of the next tile computed during the
/// softmax of this one). The space is declared, pruned and compiled in step.cu (space(),
/// heuristic()); tuner() chooses among its shapes per call, with the tuner every tuned step
/// shares (common/include/flashsteps/tuner.h says in which order: FLASHSTEPS_CONFIG, the
/// user's cache FLASHSTEPS_TUNE_CACHE, FLASHSTEPS_TUNE=1, the tables of
/// steps/06_autotuned/tuned/, heuristic()).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "flashsteps/attention.h"
#include "flashsteps/tuner.h"
#include "flashsteps/vendor.h"

namespace flashsteps::step06 {

/// One point of the configuration space.
struct TileChoice {
  int block_m = 0;  ///< BLOCK_M: query rows per block
  int block_n = 0;  ///< BLOCK_N: keys per KV tile
  int warps = 0;    ///< warps (NVIDIA) or wavefronts (AMD) per block
  int stages = 0;   ///< K/V shared-memory buffers (pipeline depth)
  int overlap = 0;  ///< 1: S of tile j + 1 is computed during the softmax of tile j

  /// "m128_n64_w4_s2", with "_ov" appended when overlap is 1.
  std::string name() const;
  /// Parses name(); nullopt when @p text is not of that form.
  static std::optional<TileChoice> parse(const std::string& text);
  /// Same five parameters.
  bool operator==(const TileChoice& other) const {
    return block_m == other.block_m && block_n == other.block_n && warps == other.warps && stages == other.stages &&
           overlap == other.overlap;
  }
};

/// A compiled point of the space: its shape and the launcher of its kernel.
using Candidate = tuning::Tuner<TileChoice>::Candidate;

// ---- The space (defined in step.cu) ----

/// The pruned configuration space of a compiled head dim (one of kTensorCoreHeadDims,
/// dispatch.h), in the order it was declared; empty for any other value.
const std::vector<Candidate>& space(int head_dim);
/// The untuned default for a compiled head dim (always in its space): step 05's fixed shapes
/// (FlashAttention-2's at D = 32, 96 and 128, not at 64 and 256). They do not depend on the
/// mask, so the mask is not an argument.
TileChoice heuristic(int head_dim);

// ---- The tuner (tuner.cpp) ----

/// Step 06's tuner: forced variable FLASHSTEPS_CONFIG (e.g. `m128_n64_w4_s2`), cache variable
/// FLASHSTEPS_TUNE_CACHE (default `$HOME/.cache/flashsteps/step06.json`), table format
/// `flashsteps-step06-tuning/1`, the tables of steps/06_autotuned/tuned/ compiled in, and
/// heuristic() as the default. tuner().shapes(d) lists the space, tuner().selected(args) says
/// which shape a call would run, tuning::ScopedTunerOptions(tuner(), ...) forces one.
tuning::Tuner<TileChoice>& tuner();

/// Runs @p choice on @p args (validated first).
/// @throws Unsupported "configuration <name> is not in step 06's space for head_dim <d>: ..."
///         when @p choice is not in the space of the problem's compiled head dim.
void attention_forward_with(const AttentionArgs& args, vendor::Stream stream, const TileChoice& choice);

}  // namespace flashsteps::step06
