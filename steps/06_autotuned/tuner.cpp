// SPDX-License-Identifier: Apache-2.0
// Step 06's tuning bookkeeping: names of tile shapes, keys, and the JSON tables (tuner.h).
#include "tuner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

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

int padded_head_dim(std::int64_t head_dim) {
  for (int d : {32, 64, 96, 128, 256})
    if (head_dim <= d) return d;
  return 0;
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
  k.head_dim = padded_head_dim(args.head_dim());
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

std::string cache_path() {
  if (const char* p = std::getenv("FLASHSTEPS_TUNE_CACHE"); p != nullptr && *p != '\0') return p;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/flashsteps/step06.json";
  return "flashsteps_step06_tuning.json";
}

}  // namespace flashsteps::step06
