// SPDX-License-Identifier: Apache-2.0
/// @file tuner.h
/// @brief Step 06's configuration space and tuner: which tile shape runs a problem, and why.
///
/// A tile shape (TileChoice) is the five compile-time parameters of the kernel: BLOCK_M query
/// rows per block, BLOCK_N keys per KV tile, WARPS warps (wavefronts) per block, STAGES K/V
/// buffers in the cp.async pipeline, and OVERLAP (S of the next tile computed during the
/// softmax of this one). The space is declared, pruned and compiled in step.cu (space(),
/// heuristic()); everything else here, the choice of a shape per call, the caches and the
/// tuning, is in tuner.cpp.
///
/// attention_forward() picks a shape per problem *key* (device, dtype, padded head dim, causal
/// or not, seqlen bucket) with select(), in this order:
///  1. TunerOptions::forced (environment: FLASHSTEPS_CONFIG, e.g. `m128_n64_w4_s2`) forces one
///     shape (for tests and the search-space plot; Unsupported if the head dim's space lacks it);
///  2. the user's tuning cache, a JSON file (TunerOptions::cache_path; environment:
///     FLASHSTEPS_TUNE_CACHE, default `$HOME/.cache/flashsteps/step06.json`), when it holds the key;
///  3. with TunerOptions::tune (environment: FLASHSTEPS_TUNE=1): tune() times every candidate
///     on the call's own buffers, prints its progress and choice to stderr, and appends the
///     choice to the cache file;
///  4. the tuned table checked in for this GPU (steps/06_autotuned/tuned/), nearest bucket;
///  5. heuristic(): step 05's fixed shapes.
/// The options come from the environment unless a program sets them (set_tuner_options(),
/// ScopedTunerOptions). Nothing ever edits source to tune.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flashsteps/attention.h"
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
struct Candidate {
  TileChoice choice;                                      ///< the shape
  void (*launch)(const AttentionArgs&, vendor::Stream);  ///< launches it (args checked by the caller)
};

// ---- The space (defined in step.cu) ----

/// The pruned configuration space of a compiled head dim (one of kTensorCoreHeadDims,
/// dispatch.h), in the order it was declared; empty for any other value.
const std::vector<Candidate>& space(int head_dim);
/// The untuned default for a compiled head dim (always in its space): step 05's fixed shapes
/// (FlashAttention-2's at D = 32, 96 and 128, not at 64 and 256). They do not depend on the
/// mask, so the mask is not an argument.
TileChoice heuristic(int head_dim);

// ---- Choosing a shape (tuner.cpp) ----

/// The shapes of space(@p head_dim).
std::vector<TileChoice> candidates(int head_dim);
/// The candidate of @p choice in the space of the compiled head dim @p head_dim.
/// @throws Unsupported "<what> <name> is not in step 06's space for head_dim <d>: <the space>".
const Candidate& find_candidate(int head_dim, const TileChoice& choice, const char* what = "configuration");

/// Runs @p choice on @p args (validated first).
/// @throws Unsupported when @p choice is not in the space of the problem's head dim.
void attention_forward_with(const AttentionArgs& args, vendor::Stream stream, const TileChoice& choice);

/// How select() chooses: what the environment says, unless a program sets it.
struct TunerOptions {
  /// Run this shape on every call (FLASHSTEPS_CONFIG).
  std::optional<TileChoice> forced;
  /// Time every candidate for a key that the cache lacks, and cache the choice (FLASHSTEPS_TUNE=1).
  bool tune = false;
  /// The user's tuning cache (FLASHSTEPS_TUNE_CACHE, else `$HOME/.cache/flashsteps/step06.json`,
  /// else `flashsteps_step06_tuning.json`); empty: no cache, nothing is read or written.
  std::string cache_path;

  /// A variable's value, or nullptr when it is not set (std::getenv's contract).
  using Lookup = const char* (*)(const char* name);
  /// The options the variables above give; @p lookup reads them (nullptr: the process environment).
  /// @throws Unsupported when FLASHSTEPS_CONFIG is set but is not a shape name.
  static TunerOptions from_environment(Lookup lookup = nullptr);
};

/// The options select() uses now: those set by set_tuner_options(), else from_environment().
TunerOptions tuner_options();
/// Makes @p options the process's options (nullopt: the environment's again), for every thread;
/// returns the previous setting.
std::optional<TunerOptions> set_tuner_options(std::optional<TunerOptions> options);

/// Sets the tuner's options for its lifetime, then restores the previous setting.
class ScopedTunerOptions {
 public:
  /// Sets @p options (set_tuner_options()).
  explicit ScopedTunerOptions(TunerOptions options) : previous_(set_tuner_options(std::move(options))) {}
  ~ScopedTunerOptions() { set_tuner_options(std::move(previous_)); }
  ScopedTunerOptions(const ScopedTunerOptions&) = delete;
  ScopedTunerOptions& operator=(const ScopedTunerOptions&) = delete;

 private:
  std::optional<TunerOptions> previous_;
};

/// The candidate a call of @p args runs, in the order at the top of this file, under
/// tuner_options(); step 3 (tuning on @p stream) only when @p may_tune. @p args must have
/// passed validate() and check_tensor_core_args().
/// @throws Unsupported for a forced shape outside the head dim's space
/// @throws InvalidArgument when the cache file exists but does not parse
const Candidate& select(const AttentionArgs& args, vendor::Stream stream, bool may_tune);

/// The shape attention_forward() would use for @p args now (select() without tuning).
/// @throws Unsupported for a forced shape outside the head dim's space, as attention_forward().
TileChoice selected_choice(const AttentionArgs& args);

// ---- Keys, tuning and tables (tuner.cpp) ----

/// What a tuning decision is keyed by.
struct TuneKey {
  std::string device;         ///< GPU name, e.g. "NVIDIA H200"
  DType dtype = DType::bf16;  ///< fp16 or bf16
  int head_dim = 0;           ///< the compiled head dim the problem runs at (padded_head_dim_tc())
  bool causal = false;        ///< any causal mask
  std::int64_t seqlen_bucket = 0;  ///< seqlen_bucket(max(seqlen_q, seqlen_k))

  /// "NVIDIA H200/bf16/hd128/causal/n4096", for messages.
  std::string str() const;
};

/// Smallest power of two >= @p seqlen, clamped to [128, 65536].
std::int64_t seqlen_bucket(std::int64_t seqlen);
/// The key of @p args on the GPU named @p device.
TuneKey make_key(const AttentionArgs& args, const std::string& device);

/// A tuning result: the choice and the median time of every candidate.
struct TuneEntry {
  TuneKey key;        ///< what was tuned
  TileChoice choice;  ///< the fastest candidate
  std::vector<std::pair<TileChoice, double>> median_ms;  ///< every candidate, in space order
};

/// Times every candidate of the problem's head dim on @p args (@p warmup launches, then the
/// median of @p reps launches queued back to back, each between its own two events on
/// @p stream), writing progress lines to @p progress when not null. The outputs of @p args
/// are overwritten.
/// @throws InvalidArgument / Unsupported as attention_forward() for @p args
TuneEntry tune(const AttentionArgs& args, vendor::Stream stream, std::ostream* progress, int warmup = 2,
               int reps = 7);

/// A set of tuning decisions, read from and written to JSON:
/// `{"format": "flashsteps-step06-tuning/1", "meta": {...}, "entries": [{"device", "dtype",
/// "head_dim", "causal", "seqlen_bucket", "choice", "median_ms": {name: ms}}]}`.
class TuningTable {
 public:
  /// Parses @p json_text. @throws InvalidArgument naming the offending entry.
  static TuningTable from_json(const std::string& json_text);
  /// Reads @p path; an empty table when the file does not exist.
  /// @throws InvalidArgument when it exists but does not parse.
  static TuningTable load(const std::string& path);
  /// Writes the table to @p path (creating parent folders).
  void save(const std::string& path) const;
  /// JSON text of the table.
  std::string to_json() const;

  /// The exact key, else the same device, dtype, head dim and causality at the nearest bucket.
  std::optional<TileChoice> lookup(const TuneKey& key) const;
  /// Adds or replaces the entry of @p entry.key.
  void insert(const TuneEntry& entry);
  /// Free-form metadata (command, date, commit), kept as strings.
  void set_meta(const std::string& name, const std::string& value);

  std::vector<TuneEntry> entries;  ///< in insertion order
 private:
  std::vector<std::pair<std::string, std::string>> meta_;
};

/// The tables checked in under steps/06_autotuned/tuned/ (embedded at build time), merged.
const TuningTable& checked_in_table();

}  // namespace flashsteps::step06
