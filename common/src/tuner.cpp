// SPDX-License-Identifier: Apache-2.0
// The tuner of steps 06 and 09 (tuner.h): which shape of a step's space runs a call (the
// options, the user's cache, the checked-in tables), the timing of the candidates, and the
// JSON tables. It knows shapes only by name; the step's Tuner<Shape> gives it the space.
#include "flashsteps/tuner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace flashsteps::tuning {

namespace {
using Json = nlohmann::ordered_json;  // ordered: median_ms keeps the space's order

DType parse_dtype(const std::string& name, const std::string& where) {
  if (name == "fp16") return DType::f16;
  if (name == "bf16") return DType::bf16;
  throw InvalidArgument(where + ".dtype (" + name + ") must be fp16 or bf16");
}

// Field @p name of the object @p e, as a T; InvalidArgument naming "<where>.<name>" otherwise.
template <class T>
T field(const Json& e, const char* name, const std::string& where) {
  if (!e.contains(name)) throw InvalidArgument(where + "." + name + " is missing");
  const Json& v = e.at(name);
  const bool ok = std::is_same_v<T, std::string> ? v.is_string()
                  : std::is_same_v<T, bool>      ? v.is_boolean()
                                                 : v.is_number_integer();
  if (!ok) throw InvalidArgument(where + "." + name + " (" + v.dump() + ") has the wrong type");
  return v.get<T>();
}

// Events created for one tune() and destroyed however it ends (a launch may throw).
struct EventSet {
  std::vector<vendor::Event> events;
  explicit EventSet(std::size_t n) : events(n) {
    for (vendor::Event& e : events) e = vendor::event_create();
  }
  ~EventSet() {
    for (vendor::Event& e : events) vendor::event_destroy(e);
  }
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
};
}  // namespace

std::string TuneKey::str() const {
  return device + "/" + dtype_name(dtype) + "/hd" + std::to_string(head_dim) + (causal ? "/causal" : "/full") + "/n" +
         std::to_string(seqlen_bucket);
}

std::int64_t seqlen_bucket(std::int64_t seqlen) {
  std::int64_t b = 128;
  while (b < seqlen && b < 65536) b *= 2;
  return b;
}

TuneKey make_key(const AttentionArgs& args, const std::string& device, int head_dim) {
  TuneKey k;
  k.device = device;
  k.dtype = args.q.dtype;
  k.head_dim = head_dim;
  k.causal = args.mask != Mask::none;
  k.seqlen_bucket = seqlen_bucket(std::max(args.seqlen_q(), args.seqlen_k()));
  return k;
}

// ---- Tables ----

TuningTable TuningTable::from_json(const std::string& json_text, const std::string& format) {
  TuningTable t(format);
  Json j;
  try {
    j = Json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("tuning table: not JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != format)
    throw InvalidArgument("tuning table: \"format\" must be \"" + format + "\"");
  if (j.contains("meta")) {
    if (!j["meta"].is_object()) throw InvalidArgument("tuning table: \"meta\" must be an object");
    for (const auto& [name, value] : j["meta"].items()) t.set_meta(name, value.is_string() ? value.get<std::string>() : value.dump());
  }
  if (!j.contains("entries") || !j["entries"].is_array()) throw InvalidArgument("tuning table: \"entries\" must be a list");
  const Json& entries = j["entries"];
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Json& e = entries[i];
    const std::string where = "tuning table: entries[" + std::to_string(i) + "]";
    if (!e.is_object()) throw InvalidArgument(where + " must be an object");
    TuneEntry entry;
    entry.key.device = field<std::string>(e, "device", where);
    entry.key.dtype = parse_dtype(field<std::string>(e, "dtype", where), where);
    entry.key.head_dim = field<int>(e, "head_dim", where);
    entry.key.causal = field<bool>(e, "causal", where);
    entry.key.seqlen_bucket = field<std::int64_t>(e, "seqlen_bucket", where);
    entry.choice = field<std::string>(e, "choice", where);
    if (entry.choice.empty()) throw InvalidArgument(where + ".choice is empty");
    if (e.contains("median_ms")) {
      if (!e["median_ms"].is_object()) throw InvalidArgument(where + ".median_ms must be an object");
      for (const auto& [name, ms] : e["median_ms"].items()) {
        if (!ms.is_number()) throw InvalidArgument(where + ".median_ms." + name + " (" + ms.dump() + ") must be a number");
        entry.median_ms.emplace_back(name, ms.get<double>());
      }
    }
    t.entries.push_back(entry);
  }
  return t;
}

TuningTable TuningTable::load(const std::string& path, const std::string& format) {
  std::ifstream in(path);
  if (!in) return TuningTable(format);
  std::stringstream text;
  text << in.rdbuf();
  try {
    return from_json(text.str(), format);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(path + ": " + e.what());
  }
}

std::string TuningTable::to_json() const {
  nlohmann::ordered_json j;
  j["format"] = format_;
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
    o["choice"] = e.choice;
    nlohmann::ordered_json times = nlohmann::ordered_json::object();
    for (const auto& [name, ms] : e.median_ms) times[name] = ms;
    o["median_ms"] = times;
    list.push_back(o);
  }
  j["entries"] = list;
  return j.dump(1) + "\n";
}

void TuningTable::save(const std::string& path) const {
  const std::filesystem::path p(path);
  std::error_code error;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), error);
  if (error) throw InvalidArgument("tuning table: cannot create the folder of " + path + ": " + error.message());
  std::ofstream out(path);
  out << to_json();
  out.flush();
  if (!out) throw InvalidArgument("tuning table: cannot write " + path);
}

std::optional<std::string> TuningTable::lookup(const TuneKey& key, bool nearest) const {
  const TuneEntry* best = nullptr;
  double best_distance = 0.0;
  for (const TuneEntry& e : entries) {
    if (e.key.device != key.device || e.key.dtype != key.dtype || e.key.head_dim != key.head_dim ||
        e.key.causal != key.causal || (!nearest && e.key.seqlen_bucket != key.seqlen_bucket))
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

// ---- The tuner: names, options, tables ----

TunerCore::TunerCore(TunerNames names, const char* const* tables) : names_(names), tables_(tables) {}

std::string TunerCore::table_format() const { return std::string("flashsteps-") + names_.id + "-tuning/1"; }

const TuningTable& TunerCore::checked_in_table() const {
  std::call_once(tables_once_, [this] {  // parsed on first use (a throw leaves it for the next call)
    TuningTable all(table_format());
    for (const char* const* text = tables_; text != nullptr && *text != nullptr; ++text)
      for (const TuneEntry& e : TuningTable::from_json(*text, table_format()).entries) all.insert(e);
    tables_merged_ = std::move(all);
  });
  return *tables_merged_;
}

const std::vector<std::string>& TunerCore::shape_names(int head_dim) const {
  std::lock_guard<std::mutex> lock(names_mutex_);
  auto it = names_by_head_dim_.find(head_dim);
  if (it == names_by_head_dim_.end()) it = names_by_head_dim_.emplace(head_dim, build_names(head_dim)).first;
  return it->second;  // std::map: the reference outlives later insertions
}

std::size_t TunerCore::index_of(int head_dim, const std::string& name, const std::string& what) const {
  const std::vector<std::string>& names = shape_names(head_dim);
  const auto it = std::find(names.begin(), names.end(), name);
  if (it != names.end()) return static_cast<std::size_t>(it - names.begin());
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  throw Unsupported(what + " " + name + " is not in " + names_.step + "'s space for head_dim " + std::to_string(head_dim) +
                    ": " + (list.empty() ? std::string("none") : list));
}

TuneKey TunerCore::key(const AttentionArgs& args) const {
  // One device per process; a process without one keys its calls to "", which no table holds.
  static const std::string device = vendor::device_count() > 0 ? vendor::device_name() : std::string();
  return make_key(args, device, compiled_head_dim(args.head_dim()));
}

TunerOptions TunerCore::options_from_environment(Lookup lookup) const {
  const auto get = [lookup](const char* name) -> std::string {
    const char* value = lookup != nullptr ? lookup(name) : std::getenv(name);
    return value != nullptr ? value : "";
  };
  TunerOptions o;
  if (const std::string forced = get(names_.forced_variable); !forced.empty()) {
    if (!is_shape_name(forced))
      throw Unsupported(std::string(names_.forced_variable) + " (" + forced + ") is not a " + names_.step +
                        " shape name such as " + names_.example);
    o.forced = forced;
  }
  o.tune = get("FLASHSTEPS_TUNE") == "1";
  o.cache_path = get(names_.cache_variable);
  if (o.cache_path.empty())
    o.cache_path = get("HOME").empty() ? std::string("flashsteps_") + names_.id + "_tuning.json"
                                       : get("HOME") + "/.cache/flashsteps/" + names_.id + ".json";
  return o;
}

TunerOptions TunerCore::options() const {
  {
    std::lock_guard<std::mutex> lock(options_mutex_);
    if (options_set_) return *options_set_;
  }
  return options_from_environment();
}

std::optional<TunerOptions> TunerCore::set_options(std::optional<TunerOptions> options) {
  std::lock_guard<std::mutex> lock(options_mutex_);
  std::swap(options, options_set_);
  return options;
}

// ---- The choice of a call, and the tuning ----

// [start:select]
std::size_t TunerCore::select_index(const AttentionArgs& args, vendor::Stream stream, bool may_tune) {
  const int head_dim = compiled_head_dim(args.head_dim());
  const TunerOptions options = this->options();
  if (options.forced) return index_of(head_dim, *options.forced, std::string("forced ") + names_.shape_word);
  const std::vector<std::string>& names = shape_names(head_dim);
  const auto index = [&](const std::optional<std::string>& name) {  // names.size() when absent
    return name ? static_cast<std::size_t>(std::find(names.begin(), names.end(), *name) - names.begin()) : names.size();
  };
  const TuneKey key = this->key(args);
  std::lock_guard<std::mutex> lock(cache_mutex_);  // several host threads may call the step
  if (!cache_ || cache_loaded_path_ != options.cache_path) {  // the user's cache, read when first needed
    cache_ = options.cache_path.empty() ? TuningTable(table_format()) : TuningTable::load(options.cache_path, table_format());
    cache_loaded_path_ = options.cache_path;
  }
  // The cache answers its own keys only, so that FLASHSTEPS_TUNE=1 tunes every new bucket.
  if (const std::size_t i = index(cache_->lookup(key, /*nearest=*/false)); i < names.size()) return i;
  if (may_tune && options.tune) {
    const TuneEntry entry = tune(args, stream, &std::cerr);
    cache_->insert(entry);
    if (!options.cache_path.empty()) cache_->save(options.cache_path);
    std::cerr << "[" << names_.id << " tune] " << key.str() << ": chose " << entry.choice << " (cached in "
              << (options.cache_path.empty() ? "memory only" : options.cache_path) << ")\n";
    return index(entry.choice);
  }
  if (const std::size_t i = index(checked_in_table().lookup(key)); i < names.size()) return i;
  return default_index(args, head_dim);
}
// [end:select]

// [start:tune]
TuneEntry TunerCore::tune(const AttentionArgs& args, vendor::Stream stream, std::ostream* progress, int warmup, int reps) {
  TuneEntry entry;
  entry.key = key(args);
  const std::vector<std::string>& names = shape_names(entry.key.head_dim);
  if (names.empty())
    throw Unsupported(std::string(names_.step) + ": no shape compiled for head_dim " + std::to_string(args.head_dim()));
  if (reps < 1 || warmup < 0)
    throw InvalidArgument("tune: reps (" + std::to_string(reps) + ") must be at least 1 and warmup (" +
                          std::to_string(warmup) + ") at least 0");
  // Each timed launch sits between its own two events, all queued back to back (nothing
  // waits between launches, so no launch latency is timed); read once the stream drains.
  EventSet event_set(2 * static_cast<std::size_t>(reps));
  std::vector<vendor::Event>& events = event_set.events;
  double best = 0.0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    for (int w = 0; w < warmup; ++w) launch_at(entry.key.head_dim, i, args, stream);
    for (int r = 0; r < reps; ++r) {
      vendor::event_record(events[2 * r], stream);
      launch_at(entry.key.head_dim, i, args, stream);
      vendor::event_record(events[2 * r + 1], stream);
    }
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) ms.push_back(vendor::event_elapsed_ms(events[2 * r], events[2 * r + 1]));
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    entry.median_ms.emplace_back(names[i], median);
    if (i == 0 || median < best) best = median, entry.choice = names[i];
    if (progress != nullptr)
      *progress << "[" << names_.id << " tune] " << entry.key.str() << " " << (i + 1) << "/" << names.size() << " "
                << names[i] << " " << median << " ms" << std::endl;
  }
  return entry;
}
// [end:tune]

}  // namespace flashsteps::tuning
