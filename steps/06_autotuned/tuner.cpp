// SPDX-License-Identifier: Apache-2.0
// Step 06's tuner (tuner.h): which shape of the space runs a call (the options, the user's
// cache, the checked-in tables), the timing of the candidates, and the JSON tables.
#include "tuner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "flashsteps/dispatch.h"
#include "flashsteps/step06_tuned_tables.h"  // generated: kTunedTables[], the files of tuned/

namespace flashsteps::step06 {

namespace {
constexpr const char* kFormat = "flashsteps-step06-tuning/1";

DType parse_dtype(const std::string& name, const std::string& where) {
  if (name == "fp16") return DType::f16;
  if (name == "bf16") return DType::bf16;
  throw InvalidArgument(where + ".dtype (" + name + ") must be fp16 or bf16");
}
}  // namespace

std::string TileChoice::name() const {
  return "m" + std::to_string(block_m) + "_n" + std::to_string(block_n) + "_w" + std::to_string(warps) + "_s" +
         std::to_string(stages) + (overlap != 0 ? "_ov" : "");
}

std::optional<TileChoice> TileChoice::parse(const std::string& text) {
  TileChoice c;
  std::string base = text;
  if (base.size() > 3 && base.compare(base.size() - 3, 3, "_ov") == 0) base.resize(base.size() - 3), c.overlap = 1;
  char tail = 0;
  if (std::sscanf(base.c_str(), "m%d_n%d_w%d_s%d%c", &c.block_m, &c.block_n, &c.warps, &c.stages, &tail) != 4)
    return std::nullopt;
  if (c.name() != text) return std::nullopt;  // no signs, no leading zeros
  return c;
}

std::string TuneKey::str() const {
  return device + "/" + dtype_name(dtype) + "/hd" + std::to_string(head_dim) + (causal ? "/causal" : "/full") + "/n" +
         std::to_string(seqlen_bucket);
}

std::int64_t seqlen_bucket(std::int64_t seqlen) {
  std::int64_t b = 128;
  while (b < seqlen && b < 65536) b *= 2;
  return b;
}

TuneKey make_key(const AttentionArgs& args, const std::string& device) {
  TuneKey k;
  k.device = device;
  k.dtype = args.q.dtype;
  k.head_dim = padded_head_dim_tc(args.head_dim());
  k.causal = args.mask != Mask::none;
  k.seqlen_bucket = seqlen_bucket(std::max(args.seqlen_q(), args.seqlen_k()));
  return k;
}

TuningTable TuningTable::from_json(const std::string& json_text) {
  TuningTable t;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("tuning table: not JSON: ") + e.what());
  }
  if (j.value("format", std::string()) != kFormat)
    throw InvalidArgument(std::string("tuning table: \"format\" must be \"") + kFormat + "\"");
  if (j.contains("meta"))
    for (const auto& [name, value] : j["meta"].items()) t.set_meta(name, value.is_string() ? value.get<std::string>() : value.dump());
  const nlohmann::json& entries = j.at("entries");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const nlohmann::json& e = entries[i];
    const std::string where = "tuning table: entries[" + std::to_string(i) + "]";
    try {
      TuneEntry entry;
      entry.key.device = e.at("device").get<std::string>();
      entry.key.dtype = parse_dtype(e.at("dtype").get<std::string>(), where);
      entry.key.head_dim = e.at("head_dim").get<int>();
      entry.key.causal = e.at("causal").get<bool>();
      entry.key.seqlen_bucket = e.at("seqlen_bucket").get<std::int64_t>();
      const std::optional<TileChoice> choice = TileChoice::parse(e.at("choice").get<std::string>());
      if (!choice) throw InvalidArgument(where + ".choice (" + e.at("choice").dump() + ") is not of the form m128_n64_w4_s2");
      entry.choice = *choice;
      if (e.contains("median_ms"))
        for (const auto& [name, ms] : e["median_ms"].items())
          if (std::optional<TileChoice> c = TileChoice::parse(name)) entry.median_ms.emplace_back(*c, ms.get<double>());
      t.entries.push_back(entry);
    } catch (const nlohmann::json::exception& ex) {
      throw InvalidArgument(where + ": " + ex.what());
    }
  }
  return t;
}

TuningTable TuningTable::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  try {
    return from_json(text.str());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(path + ": " + e.what());
  }
}

std::string TuningTable::to_json() const {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const auto& [name, value] : meta_) meta[name] = value;
  j["meta"] = meta;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const TuneEntry& e : entries) {
    nlohmann::ordered_json o;
    o["device"] = e.key.device;
    o["dtype"] = dtype_name(e.key.dtype);
    o["head_dim"] = e.key.head_dim;
    o["causal"] = e.key.causal;
    o["seqlen_bucket"] = e.key.seqlen_bucket;
    o["choice"] = e.choice.name();
    nlohmann::ordered_json times = nlohmann::ordered_json::object();
    for (const auto& [c, ms] : e.median_ms) times[c.name()] = ms;
    o["median_ms"] = times;
    list.push_back(o);
  }
  j["entries"] = list;
  return j.dump(1) + "\n";
}

void TuningTable::save(const std::string& path) const {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path);
  out << to_json();
  if (!out) throw InvalidArgument("tuning cache: cannot write " + path);
}

std::optional<TileChoice> TuningTable::lookup(const TuneKey& key) const {
  const TuneEntry* best = nullptr;
  double best_distance = 0.0;
  for (const TuneEntry& e : entries) {
    if (e.key.device != key.device || e.key.dtype != key.dtype || e.key.head_dim != key.head_dim ||
        e.key.causal != key.causal)
      continue;
    const double distance = std::abs(std::log2(static_cast<double>(e.key.seqlen_bucket)) -
                                     std::log2(static_cast<double>(key.seqlen_bucket)));
    if (best == nullptr || distance < best_distance) best = &e, best_distance = distance;
  }
  if (best == nullptr) return std::nullopt;
  return best->choice;
}

void TuningTable::insert(const TuneEntry& entry) {
  for (TuneEntry& e : entries)
    if (e.key.str() == entry.key.str()) {
      e = entry;
      return;
    }
  entries.push_back(entry);
}

void TuningTable::set_meta(const std::string& name, const std::string& value) {
  for (auto& [n, v] : meta_)
    if (n == name) {
      v = value;
      return;
    }
  meta_.emplace_back(name, value);
}

const TuningTable& checked_in_table() {
  static const TuningTable merged = [] {
    TuningTable all;
    for (const char* text : kTunedTables)
      if (text != nullptr)
        for (const TuneEntry& e : TuningTable::from_json(text).entries) all.insert(e);
    return all;
  }();
  return merged;
}

// ---- The space's shapes, and one shape run on demand ----

namespace {
const Candidate* find(int head_dim, const TileChoice& choice) {
  for (const Candidate& c : space(head_dim))
    if (c.choice == choice) return &c;
  return nullptr;
}
}  // namespace

std::vector<TileChoice> candidates(int head_dim) {
  std::vector<TileChoice> out;
  for (const Candidate& c : space(head_dim)) out.push_back(c.choice);
  return out;
}

const Candidate& find_candidate(int head_dim, const TileChoice& choice, const char* what) {
  if (const Candidate* c = find(head_dim, choice)) return *c;
  std::string list;
  for (const Candidate& c : space(head_dim)) list += (list.empty() ? "" : ", ") + c.choice.name();
  throw Unsupported(std::string(what) + " " + choice.name() + " is not in step 06's space for head_dim " +
                    std::to_string(head_dim) + ": " + list);
}

void attention_forward_with(const AttentionArgs& args, vendor::Stream stream, const TileChoice& choice) {
  validate(args);
  check_tensor_core_args(args, "step 06");
  const Candidate& c = find_candidate(padded_head_dim_tc(args.head_dim()), choice);
  if (is_empty(args)) return;
  c.launch(args, stream);
}

// ---- The options: the environment's, or the program's ----

TunerOptions TunerOptions::from_environment(Lookup lookup) {
  const auto get = [lookup](const char* name) -> std::string {
    const char* value = lookup != nullptr ? lookup(name) : std::getenv(name);
    return value != nullptr ? value : "";
  };
  TunerOptions o;
  if (const std::string forced = get("FLASHSTEPS_CONFIG"); !forced.empty()) {
    o.forced = TileChoice::parse(forced);
    if (!o.forced) throw Unsupported("FLASHSTEPS_CONFIG (" + forced + ") is not a shape name such as m128_n64_w4_s2");
  }
  o.tune = get("FLASHSTEPS_TUNE") == "1";
  o.cache_path = get("FLASHSTEPS_TUNE_CACHE");
  if (o.cache_path.empty())
    o.cache_path = get("HOME").empty() ? "flashsteps_step06_tuning.json" : get("HOME") + "/.cache/flashsteps/step06.json";
  return o;
}

namespace {
// The options a program set (nullopt: the environment's), and the lock that guards them.
std::mutex options_mutex;
std::optional<TunerOptions> options_set;
}  // namespace

TunerOptions tuner_options() {
  std::lock_guard<std::mutex> lock(options_mutex);
  return options_set ? *options_set : TunerOptions::from_environment();
}

std::optional<TunerOptions> set_tuner_options(std::optional<TunerOptions> options) {
  std::lock_guard<std::mutex> lock(options_mutex);
  std::swap(options, options_set);
  return options;
}

// ---- The choice of a call, and the tuner ----

// [start:select]
namespace {
std::string device_name() {
  static const std::string name = vendor::device_name();  // one device per process
  return name;
}

// The user's tuning cache: the file of the options' cache path, read when first needed (and
// again when the path changes), and the lock that guards it.
std::mutex cache_mutex;
TuningTable& user_cache(const std::string& path) {
  static std::string loaded_path;
  static TuningTable table;
  if (path != loaded_path) {
    table = path.empty() ? TuningTable() : TuningTable::load(path);
    loaded_path = path;
  }
  return table;
}
}  // namespace

const Candidate& select(const AttentionArgs& args, vendor::Stream stream, bool may_tune) {
  const int head_dim = padded_head_dim_tc(args.head_dim());
  const TunerOptions options = tuner_options();
  if (options.forced) return find_candidate(head_dim, *options.forced, "forced configuration");
  const TuneKey key = make_key(args, device_name());
  std::lock_guard<std::mutex> lock(cache_mutex);
  TuningTable& cache = user_cache(options.cache_path);
  if (std::optional<TileChoice> cached = cache.lookup(key))
    if (const Candidate* c = find(head_dim, *cached)) return *c;
  if (may_tune && options.tune) {
    const TuneEntry entry = tune(args, stream, &std::cerr);
    cache.insert(entry);
    if (!options.cache_path.empty()) cache.save(options.cache_path);
    std::cerr << "[step06 tune] " << key.str() << ": chose " << entry.choice.name() << " (cached in "
              << (options.cache_path.empty() ? "memory only" : options.cache_path) << ")\n";
    return *find(head_dim, entry.choice);
  }
  if (std::optional<TileChoice> tuned = checked_in_table().lookup(key))
    if (const Candidate* c = find(head_dim, *tuned)) return *c;
  return *find(head_dim, heuristic(head_dim));
}
// [end:select]

TileChoice selected_choice(const AttentionArgs& args) { return select(args, nullptr, false).choice; }

// [start:tune]
TuneEntry tune(const AttentionArgs& args, vendor::Stream stream, std::ostream* progress, int warmup, int reps) {
  validate(args);
  check_tensor_core_args(args, "step 06");  // head_dim up to 256: the space is not empty
  TuneEntry entry;
  entry.key = make_key(args, device_name());
  const std::vector<Candidate>& cands = space(entry.key.head_dim);
  // Each timed launch sits between its own two events, all queued back to back (nothing
  // waits between launches, so no launch latency is timed); read once the stream drains.
  std::vector<vendor::Event> events(2 * static_cast<std::size_t>(reps));
  for (vendor::Event& e : events) e = vendor::event_create();
  double best = 0.0;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    for (int w = 0; w < warmup; ++w) cands[i].launch(args, stream);
    for (int r = 0; r < reps; ++r) {
      vendor::event_record(events[2 * r], stream);
      cands[i].launch(args, stream);
      vendor::event_record(events[2 * r + 1], stream);
    }
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) ms.push_back(vendor::event_elapsed_ms(events[2 * r], events[2 * r + 1]));
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    entry.median_ms.emplace_back(cands[i].choice, median);
    if (i == 0 || median < best) best = median, entry.choice = cands[i].choice;
    if (progress != nullptr)
      *progress << "[step06 tune] " << entry.key.str() << " " << (i + 1) << "/" << cands.size() << " "
                << cands[i].choice.name() << " " << median << " ms" << std::endl;
  }
  for (vendor::Event& e : events) vendor::event_destroy(e);
  return entry;
}
// [end:tune]

}  // namespace flashsteps::step06
