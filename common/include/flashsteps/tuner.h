// SPDX-License-Identifier: Apache-2.0
/// @file tuner.h
/// @brief The tuner of the steps that compile a configuration space (step 06, step 09):
/// which shape of the space runs a call, the timing of the candidates, and the JSON tables.
///
/// A step declares its space (a list of shapes per compiled head dim, each with the launcher
/// of its kernel) and an untuned default; a Tuner<Shape> chooses among them per problem *key*
/// (device, dtype, compiled head dim, causal or not, seqlen bucket) in this order:
///  1. TunerOptions::forced (environment: the step's forced variable, FLASHSTEPS_CONFIG for
///     step 06, FLASHSTEPS_STEP09_SHAPE for step 09) runs one shape on every call (tests,
///     measurements; Unsupported when the head dim's space lacks it);
///  2. the user's tuning cache, a JSON file (TunerOptions::cache_path; environment: the step's
///     cache variable, default `$HOME/.cache/flashsteps/<step id>.json`), when it holds the
///     exact key (its own bucket: a cache of other buckets does not answer);
///  3. with TunerOptions::tune (environment: FLASHSTEPS_TUNE=1, for every tuned step): time
///     every candidate on the call's own buffers, print progress and choice to stderr, and
///     add the choice to the cache file (rewritten whole);
///  4. the tables checked in for this GPU (steps/NN_slug/tuned/*.json, compiled in), nearest
///     seqlen bucket;
///  5. the step's default (step 06: step 05's fixed shapes; step 09: its measured defaults).
/// The options come from the environment unless a program sets them (set_options(),
/// ScopedTunerOptions). Nothing ever edits source to tune. The choice is made on the host, per
/// call, before anything is launched; a step's tool tune_stepNN (tools/tune/tune_main.cu)
/// runs step 3 over the standard problem set and writes the table of step 4.
///
/// Shapes travel as their names (`m128_n64_w4_s2`, `m128_n176_s2`): in the tables, the cache,
/// the options and the messages. A Shape type gives name(), a static parse() and operator==.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flashsteps/attention.h"
#include "flashsteps/vendor.h"

namespace flashsteps::tuning {

/// Launches one compiled shape on checked arguments (the step validated them).
using Launch = void (*)(const AttentionArgs& args, vendor::Stream stream);

/// What a tuning decision is keyed by.
struct TuneKey {
  std::string device;         ///< GPU name, e.g. "NVIDIA H200"
  DType dtype = DType::bf16;  ///< fp16 or bf16
  int head_dim = 0;           ///< the compiled head dim the problem runs at (the step's padding rule)
  bool causal = false;        ///< any causal mask
  std::int64_t seqlen_bucket = 0;  ///< seqlen_bucket(max(seqlen_q, seqlen_k))

  /// "NVIDIA H200/bf16/hd128/causal/n4096", for messages.
  std::string str() const;
};

/// Smallest power of two >= @p seqlen, clamped to [128, 65536].
std::int64_t seqlen_bucket(std::int64_t seqlen);
/// The key of @p args on the GPU named @p device, whose compiled head dim is @p head_dim.
TuneKey make_key(const AttentionArgs& args, const std::string& device, int head_dim);

/// A tuning result: the chosen shape and the median time of every candidate, by name.
struct TuneEntry {
  TuneKey key;         ///< what was tuned
  std::string choice;  ///< the fastest candidate's name
  std::vector<std::pair<std::string, double>> median_ms;  ///< every candidate, in space order
};

/// A set of tuning decisions of one step, read from and written to JSON:
/// `{"format": "flashsteps-<step id>-tuning/1", "meta": {...}, "entries": [{"device", "dtype",
/// "head_dim", "causal", "seqlen_bucket", "choice", "median_ms": {name: ms}}]}`.
/// The format names the step, so that one step never reads another's table.
class TuningTable {
 public:
  /// An empty table of the format @p format ("flashsteps-step06-tuning/1").
  explicit TuningTable(std::string format) : format_(std::move(format)) {}
  /// Parses @p json_text, which must be of @p format.
  /// @throws InvalidArgument naming the offending field or entry.
  static TuningTable from_json(const std::string& json_text, const std::string& format);
  /// Reads @p path; an empty table when the file does not exist.
  /// @throws InvalidArgument when it exists but does not parse.
  static TuningTable load(const std::string& path, const std::string& format);
  /// Writes the table to @p path, replacing the file (creating parent folders).
  /// @throws InvalidArgument when it cannot.
  void save(const std::string& path) const;
  /// JSON text of the table.
  std::string to_json() const;

  /// The exact key's choice, else (with @p nearest) that of the same device, dtype, head dim
  /// and causality at the nearest bucket (in log2); nullopt when there is none.
  std::optional<std::string> lookup(const TuneKey& key, bool nearest = true) const;
  /// Adds or replaces the entry of @p entry.key.
  void insert(const TuneEntry& entry);
  /// Free-form metadata (command, date, commit), kept as strings.
  void set_meta(const std::string& name, const std::string& value);
  /// The format this table reads and writes.
  const std::string& format() const { return format_; }

  std::vector<TuneEntry> entries;  ///< in insertion order
 private:
  std::string format_;
  std::vector<std::pair<std::string, std::string>> meta_;
};

/// How a tuner chooses: what the environment says, unless a program sets it.
struct TunerOptions {
  /// Run the shape of this name on every call (the step's forced variable).
  std::optional<std::string> forced;
  /// Time every candidate for a key that the cache lacks, and cache the choice (FLASHSTEPS_TUNE=1).
  bool tune = false;
  /// The user's tuning cache (the step's cache variable, else
  /// `$HOME/.cache/flashsteps/<step id>.json`, else `flashsteps_<step id>_tuning.json`); empty:
  /// no cache, nothing is read or written.
  std::string cache_path;
};

/// A variable's value, or nullptr when it is not set (std::getenv's contract).
using Lookup = const char* (*)(const char* name);

/// What a step calls its tuner's things.
struct TunerNames {
  const char* step;             ///< "step 06": messages ("... is not in step 06's space ...")
  const char* id;               ///< "step06": table format, cache file, "[step06 tune]" progress lines
  const char* shape_word;       ///< "configuration" or "shape": messages
  const char* forced_variable;  ///< "FLASHSTEPS_CONFIG"
  const char* cache_variable;   ///< "FLASHSTEPS_TUNE_CACHE"
  const char* example;          ///< a shape name for messages, "m128_n64_w4_s2"
};

/// The half of a tuner that knows shapes only by name: options, cache, tables, the order of
/// the choice, the timing (tuner.cpp). Tuner<Shape> below gives it the step's space.
class TunerCore {
 public:
  /// @p tables: the step's checked-in tables as JSON texts, a nullptr-terminated array.
  TunerCore(TunerNames names, const char* const* tables);
  virtual ~TunerCore() = default;
  TunerCore(const TunerCore&) = delete;
  TunerCore& operator=(const TunerCore&) = delete;

  /// The step's names.
  const TunerNames& names() const { return names_; }
  /// "flashsteps-<id>-tuning/1".
  std::string table_format() const;
  /// The options the step's variables give; @p lookup reads them (nullptr: the process environment).
  /// @throws Unsupported when the forced variable is set but is not a shape name.
  TunerOptions options_from_environment(Lookup lookup = nullptr) const;
  /// The options the choice uses now: those set by set_options(), else options_from_environment().
  TunerOptions options() const;
  /// Makes @p options this tuner's options (nullopt: the environment's again), for every
  /// thread; returns the previous setting.
  std::optional<TunerOptions> set_options(std::optional<TunerOptions> options);
  /// The checked-in tables, merged (parsed once).
  /// @throws InvalidArgument when one does not parse (the build embeds them unchecked).
  const TuningTable& checked_in_table() const;
  /// The key of @p args on this process's GPU ("" without one: no table matches it).
  TuneKey key(const AttentionArgs& args) const;
  /// The compiled head dim a problem of head dim @p head_dim runs at (0: none).
  virtual int compiled_head_dim(std::int64_t head_dim) const = 0;
  /// The names of the space of compiled head dim @p head_dim, in declared order.
  const std::vector<std::string>& shape_names(int head_dim) const;

  /// Index (in shape_names()) of the shape a call of @p args runs, in the order at the top
  /// of this file; step 3 (tuning on @p stream) only when @p may_tune. @p args must have
  /// passed the step's checks.
  /// @throws Unsupported for a forced shape outside the head dim's space
  /// @throws InvalidArgument when the cache file exists but does not parse
  std::size_t select_index(const AttentionArgs& args, vendor::Stream stream, bool may_tune);
  /// Times every candidate of the problem's head dim on @p args (@p warmup launches, then
  /// the median of @p reps launches queued back to back, each between its own two events
  /// on @p stream), writing progress lines to @p progress when not null. The outputs of
  /// @p args are overwritten. @p args must have passed the step's checks.
  /// @throws InvalidArgument when @p reps < 1 or @p warmup < 0; else what a launch throws
  TuneEntry tune(const AttentionArgs& args, vendor::Stream stream, std::ostream* progress, int warmup = 2,
                 int reps = 7);

 protected:
  /// Index of the shape named @p name in the space of @p head_dim.
  /// @throws Unsupported "<what> <name> is not in <step>'s space for head_dim <d>: <the space>".
  std::size_t index_of(int head_dim, const std::string& name, const std::string& what) const;

 private:
  virtual std::vector<std::string> build_names(int head_dim) const = 0;
  virtual bool is_shape_name(const std::string& text) const = 0;
  virtual std::size_t default_index(const AttentionArgs& args, int head_dim) const = 0;
  virtual void launch_at(int head_dim, std::size_t index, const AttentionArgs& args, vendor::Stream stream) const = 0;

  TunerNames names_;
  const char* const* tables_;
  mutable std::once_flag tables_once_;  // guards tables_merged_
  mutable std::optional<TuningTable> tables_merged_;
  mutable std::mutex options_mutex_;  // guards options_set_
  std::optional<TunerOptions> options_set_;
  std::mutex cache_mutex_;  // guards the user's cache, and tuning
  std::string cache_loaded_path_;
  std::optional<TuningTable> cache_;
  mutable std::mutex names_mutex_;  // guards names_by_head_dim_
  mutable std::map<int, std::vector<std::string>> names_by_head_dim_;
};

/// A step's tuner: TunerCore with the step's space of @p Shape (name(), static parse(),
/// operator==).
template <class Shape>
class Tuner final : public TunerCore {
 public:
  /// One compiled point of the space.
  struct Candidate {
    Shape shape;    ///< the shape
    Launch launch;  ///< launches it
  };
  /// The space of a compiled head dim, in declared order; empty for any other value.
  using Space = const std::vector<Candidate>& (*)(int head_dim);
  /// The untuned default of a call (always in the space of @p head_dim).
  using Default = Shape (*)(const AttentionArgs& args, int head_dim);
  /// The compiled head dim a head dim runs at (0: none).
  using HeadDim = int (*)(std::int64_t head_dim);

  /// The tuner of the step named by @p names, over @p space, with the checked-in @p tables
  /// (nullptr-terminated JSON texts), @p head_dim the step's padding rule and @p fallback its default.
  Tuner(TunerNames names, const char* const* tables, HeadDim head_dim, Space space, Default fallback)
      : TunerCore(names, tables), head_dim_(head_dim), space_(space), default_(fallback) {}

  int compiled_head_dim(std::int64_t head_dim) const override { return head_dim_(head_dim); }
  /// The space of compiled head dim @p head_dim.
  const std::vector<Candidate>& space(int head_dim) const { return space_(head_dim); }
  /// The shapes of space(@p head_dim).
  std::vector<Shape> shapes(int head_dim) const {
    std::vector<Shape> out;
    for (const Candidate& c : space_(head_dim)) out.push_back(c.shape);
    return out;
  }
  /// The candidate of @p shape in the space of @p head_dim.
  /// @throws Unsupported "<what> <name> is not in <step>'s space for head_dim <d>: <the space>".
  const Candidate& find(int head_dim, const Shape& shape, const std::string& what) const {
    return space_(head_dim)[index_of(head_dim, shape.name(), what)];
  }
  /// The candidate a call of @p args runs (TunerCore::select_index()).
  const Candidate& select(const AttentionArgs& args, vendor::Stream stream, bool may_tune) {
    const std::size_t i = select_index(args, stream, may_tune);
    return space_(compiled_head_dim(args.head_dim()))[i];
  }
  /// The shape a call of @p args would run now, short of tuning; nothing is launched.
  Shape selected(const AttentionArgs& args) { return select(args, nullptr, false).shape; }

 private:
  std::vector<std::string> build_names(int head_dim) const override {
    std::vector<std::string> out;
    for (const Candidate& c : space_(head_dim)) out.push_back(c.shape.name());
    return out;
  }
  bool is_shape_name(const std::string& text) const override { return Shape::parse(text).has_value(); }
  std::size_t default_index(const AttentionArgs& args, int head_dim) const override {
    return index_of(head_dim, default_(args, head_dim).name(), std::string("default ") + names().shape_word);
  }
  void launch_at(int head_dim, std::size_t index, const AttentionArgs& args, vendor::Stream stream) const override {
    space_(head_dim)[index].launch(args, stream);
  }

  HeadDim head_dim_;
  Space space_;
  Default default_;
};

/// Sets a tuner's options for its lifetime, then restores the previous setting.
class ScopedTunerOptions {
 public:
  /// Sets @p options on @p tuner (TunerCore::set_options()).
  ScopedTunerOptions(TunerCore& tuner, TunerOptions options)
      : tuner_(tuner), previous_(tuner.set_options(std::move(options))) {}
  /// Makes @p tuner read the environment's options again (TunerCore::set_options(std::nullopt)).
  ScopedTunerOptions(TunerCore& tuner, std::nullopt_t) : tuner_(tuner), previous_(tuner.set_options(std::nullopt)) {}
  ~ScopedTunerOptions() { tuner_.set_options(std::move(previous_)); }
  ScopedTunerOptions(const ScopedTunerOptions&) = delete;
  ScopedTunerOptions& operator=(const ScopedTunerOptions&) = delete;

 private:
  TunerCore& tuner_;
  std::optional<TunerOptions> previous_;
};

}  // namespace flashsteps::tuning
