// SPDX-License-Identifier: Apache-2.0
// The real-activation fixture: it loads, has the advertised shape, and the reference runs
// on it. Malformed headers are rejected with the field named.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "flashsteps/fixture.h"
#include "flashsteps/reference.h"

namespace flashsteps {
namespace {

TEST(Fixture, MiniLmLoadsWithItsShape) {
  const QkvFixture f = load_qkv_fixture(default_fixture_path());
  EXPECT_EQ(f.layers, 6);
  EXPECT_EQ(f.heads, 12);
  EXPECT_EQ(f.seqlen, 128);
  EXPECT_EQ(f.head_dim, 32);
  EXPECT_FLOAT_EQ(f.softmax_scale, 1.0f / std::sqrt(32.0f));
  EXPECT_FALSE(f.causal);
}

TEST(Fixture, ReferenceOnRealActivationsIsFiniteAndPeaked) {
  const HostInputs in = fixture_inputs(load_qkv_fixture(default_fixture_path()));
  const reference::Result r = reference::run(in);
  for (double x : r.o) ASSERT_TRUE(std::isfinite(x));
  // Real attention is far from uniform: some row's LSE is well above log(N) + mean score.
  double max_lse = -INFINITY;
  for (double x : r.lse) max_lse = std::max(max_lse, x);
  EXPECT_GT(max_lse, std::log(128.0) + 1.0);
}

TEST(Fixture, MalformedHeadersNameTheField) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "flashsteps_fixture_test";
  std::filesystem::create_directories(dir);
  auto error_for = [&](const std::string& json) -> std::string {
    const auto path = dir / "bad.json";
    std::ofstream(path) << json;
    try {
      load_qkv_fixture(path.string());
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_for("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_for(R"({"format": "other"})").find("\"format\""), std::string::npos);
  EXPECT_NE(error_for(R"({"format": "flashsteps-qkv-v1", "dtype": "float32"})").find("\"dtype\""), std::string::npos);
  const std::string header = R"({"format": "flashsteps-qkv-v1", "dtype": "float16", "layout": "LHND",
      "layers": 1, "heads": 1, "seqlen": 2, "head_dim": 2, "softmax_scale": 0.7, "causal": false, "bin": "bad.bin"})";
  std::ofstream(dir / "bad.bin") << "short";
  EXPECT_NE(error_for(header).find("bytes; the header's shape needs 24"), std::string::npos);
  auto with = [](std::string h, const std::string& from, const std::string& to) {
    h.replace(h.find(from), from.size(), to);
    return h;
  };
  // Sizes are positive JSON integers of 64 bits, named as written.
  for (const auto& [layers, why] : {std::pair<const char*, const char*>{"6.99", "must be an integer"},
                                    {"9223372036854775808", "is too large"},
                                    {"0", "must be positive"}}) {
    const std::string error = error_for(with(header, "\"layers\": 1", std::string("\"layers\": ") + layers));
    EXPECT_NE(error.find(std::string("\"layers\" = ") + layers + " " + why), std::string::npos) << error;
  }
  // A scale float32 cannot hold as a positive number, or whose scale * log2(e) overflows
  // it (validate()'s rule), is named as written.
  for (const char* scale : {"-1", "0", "1e-50", "1e+300", "3.4e+38"})
    EXPECT_NE(error_for(with(header, "0.7", scale)).find(std::string("\"softmax_scale\" = ") + scale),
              std::string::npos)
        << scale << ": " << error_for(with(header, "0.7", scale));
  // A shape whose element count wraps around 64 bits (2^62 * 4 * 2 * 2 = 2^66, i.e. 0) must
  // not be taken for the empty file it would otherwise match.
  std::ofstream(dir / "empty.bin").flush();
  const std::string huge = with(header, "\"layers\": 1, \"heads\": 1", "\"layers\": 4611686018427387904, \"heads\": 4");
  const std::string wraps = with(huge, "bad.bin", "empty.bin");
  EXPECT_NE(error_for(wraps).find("layers * heads * seqlen * head_dim is too large"), std::string::npos)
      << error_for(wraps);
  EXPECT_NE(load_qkv_fixture(default_fixture_path()).model, "");
}

}  // namespace
}  // namespace flashsteps
