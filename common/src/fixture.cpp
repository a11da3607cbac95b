// SPDX-License-Identifier: Apache-2.0
#include "flashsteps/fixture.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "flashsteps/host_dtype.h"

namespace flashsteps {

namespace fs = std::filesystem;

namespace {

template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.contains(key)) throw InvalidArgument(path + ": missing field \"" + key + "\"");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw InvalidArgument(path + ": field \"" + key + "\" has the wrong type");
  }
}

// A size: a JSON integer (not 6.99, which get<> would truncate) from 1 to 2^63 - 1.
std::int64_t positive_field(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.contains(key)) throw InvalidArgument(path + ": missing field \"" + key + "\"");
  const nlohmann::json& value = j.at(key);
  const std::string named = path + ": field \"" + key + "\" = " + value.dump();
  if (!value.is_number_integer()) throw InvalidArgument(named + " must be an integer");
  if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw InvalidArgument(named + " is too large (64-bit sizes)");
  if (value.get<std::int64_t>() <= 0) throw InvalidArgument(named + " must be positive");
  return value.get<std::int64_t>();
}

}  // namespace

QkvFixture load_qkv_fixture(const std::string& json_path) {
  std::ifstream in(json_path);
  if (!in) throw InvalidArgument("fixture header " + json_path + " cannot be opened");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("fixture header " + json_path + " is not valid JSON: " + e.what());
  }
  QkvFixture f;
  f.json_path = json_path;
  if (field<std::string>(j, "format", json_path) != "flashsteps-qkv-v1")
    throw InvalidArgument(json_path + ": field \"format\" must be \"flashsteps-qkv-v1\"");
  if (field<std::string>(j, "dtype", json_path) != "float16")
    throw InvalidArgument(json_path + ": field \"dtype\" must be \"float16\"");
  if (field<std::string>(j, "layout", json_path) != "LHND")
    throw InvalidArgument(json_path + ": field \"layout\" must be \"LHND\"");
  f.layers = positive_field(j, "layers", json_path);
  f.heads = positive_field(j, "heads", json_path);
  f.seqlen = positive_field(j, "seqlen", json_path);
  f.head_dim = positive_field(j, "head_dim", json_path);
  // Read in double and converted as the steps' callers convert it (validate()'s rule, and
  // what float32 loses), so a bad value is named as written, not as the 0 or inf it becomes.
  f.softmax_scale = softmax_scale_from_double(field<double>(j, "softmax_scale", json_path),
                                              json_path + ": field \"softmax_scale\"");
  f.causal = field<bool>(j, "causal", json_path);
  if (j.contains("provenance") && j["provenance"].contains("model"))
    f.model = j["provenance"]["model"].get<std::string>();

  const fs::path bin = fs::path(json_path).parent_path() / field<std::string>(j, "bin", json_path);
  std::ifstream data(bin, std::ios::binary);
  if (!data) throw InvalidArgument("fixture data " + bin.string() + " cannot be opened");
  // Elements per tensor, checked so that a huge header cannot wrap around to the file's size.
  const std::optional<std::int64_t> elems = checked_product(
      {f.layers, f.heads, f.seqlen, f.head_dim}, std::numeric_limits<std::int64_t>::max() / (3 * 2));  // Q, K, V of 2 bytes
  if (!elems)
    throw InvalidArgument(json_path + ": layers * heads * seqlen * head_dim is too large (Q, K and V of that many " +
                          "float16 elements exceed 64-bit sizes)");
  const std::size_t per_tensor = static_cast<std::size_t>(*elems);
  const std::uintmax_t expected = 3 * per_tensor * sizeof(std::uint16_t);
  if (fs::file_size(bin) != expected)
    throw InvalidArgument("fixture data " + bin.string() + " has " + std::to_string(fs::file_size(bin)) +
                          " bytes; the header's shape needs " + std::to_string(expected));
  for (std::vector<std::uint16_t>* t : {&f.q, &f.k, &f.v}) {
    t->resize(per_tensor);
    data.read(reinterpret_cast<char*>(t->data()), static_cast<std::streamsize>(per_tensor * sizeof(std::uint16_t)));
  }
  if (!data) throw InvalidArgument("fixture data " + bin.string() + " could not be read whole");
  return f;
}

std::string default_fixture_path() {
  if (const char* env = std::getenv("FLASHSTEPS_FIXTURE")) return env;
  const fs::path rel = fs::path("tests") / "data" / "minilm_qkv.json";
  std::vector<fs::path> candidates = {fs::path(FLASHSTEPS_SOURCE_DIR) / rel};
  for (fs::path dir = fs::current_path(); !dir.empty(); dir = dir.parent_path()) {
    candidates.push_back(dir / rel);
    if (dir == dir.parent_path()) break;
  }
  for (const fs::path& c : candidates)
    if (fs::exists(c)) return c.string();
  throw InvalidArgument("the MiniLM fixture (tests/data/minilm_qkv.json) was not found; set FLASHSTEPS_FIXTURE");
}

HostInputs fixture_inputs(const QkvFixture& f, DType dtype) {
  Problem p;
  p.batch = f.layers;
  p.heads_q = p.heads_kv = f.heads;
  p.seqlen_q = p.seqlen_k = f.seqlen;
  p.head_dim = f.head_dim;
  p.dtype = dtype;
  p.mask = f.causal ? Mask::causal_bottom_right : Mask::none;
  p.layout = Layout::bhsd;
  p.softmax_scale = f.softmax_scale;
  p.with_lse = true;
  HostInputs in;
  in.problem = p;
  in.layout = make_layout(p);
  const std::size_t esize = dtype_size(dtype);
  const std::vector<std::uint16_t>* src[3] = {&f.q, &f.k, &f.v};
  std::vector<double>* canon[3] = {&in.q, &in.k, &in.v};
  for (int t = 0; t < 3; ++t) {
    in.buffers[t].resize(src[t]->size() * esize);
    canon[t]->resize(src[t]->size());
    for (std::size_t e = 0; e < src[t]->size(); ++e) {
      const float x = round_to(bits_to_float((*src[t])[e], DType::f16), dtype);
      store_element(in.buffers[t].data() + e * esize, x, dtype);
      (*canon[t])[e] = x;
    }
  }
  return in;
}

}  // namespace flashsteps
