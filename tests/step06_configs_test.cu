// SPDX-License-Identifier: Apache-2.0
// Step 06 runs whichever configuration its tuner picks, so every configuration of its space
// must be correct, not only the default: for each compiled head dim and each configuration,
// a small matrix against the float64 reference (ragged and multi-tile seqlens, both causal
// alignments with Nq != Nk both ways, GQA, a padded head dim, the BSHD layout).
// Linked into test_step06 beside the shared conformance suite.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "flashsteps/dispatch.h"
#include "flashsteps/verify.h"
#include "flashsteps/harness.h"
#include "flashsteps/reference.h"
#include "flashsteps/step.h"
#include "test_util.h"
#include "tuner.h"

namespace flashsteps {
namespace {

struct ConfigCase {
  step06::TileChoice choice;
  Problem problem;
  std::string name() const { return choice.name() + "_" + problem.name(); }
};

using testing::make;

std::vector<ConfigCase> config_cases() {
  std::vector<ConfigCase> cases;
  for (int d : kTensorCoreHeadDims)
    for (const step06::TileChoice& c : step06::tuner().shapes(d)) {
      cases.push_back({c, make(1, 2, 2, 1, 1, d, DType::f16, Mask::none)});
      cases.push_back({c, make(1, 2, 2, 300, 300, d, DType::bf16, Mask::causal_bottom_right)});
      cases.push_back({c, make(2, 4, 2, 130, 257, d - 8, DType::f16, Mask::causal_top_left)});
      cases.push_back({c, make(1, 2, 2, 257, 130, d, DType::bf16, Mask::causal_bottom_right)});
      cases.push_back({c, make(1, 3, 3, 200, 333, d, DType::bf16, Mask::none, Layout::bshd)});
    }
  return cases;
}

class EveryConfiguration : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(EveryConfiguration, MatchesFloat64Reference) {
  if (vendor::device_count() == 0) GTEST_SKIP() << "no GPU visible to the " << vendor::kName << " runtime";
  const ConfigCase& c = GetParam();
  const HostInputs in = make_random_inputs(c.problem, seed_from_name(c.problem.name()));
  const reference::Result ref = reference::run(in);
  DeviceCase device_case(in);
  DeviceCase::Output out;
  {
    // The tuner's options force the configuration through the public entry point.
    const tuning::ScopedTunerOptions forced(step06::tuner(), {c.choice.name()});
    out = run_once(device_case, StepFns{&step06::attention_forward, &step06::workspace_bytes});
  }
  EXPECT_TRUE(out.guards_intact) << "a write landed outside a buffer";
  EXPECT_EQ(out.unwritten, 0) << "output elements left unwritten (still NaN from the poison)";
  const Verdict v = verify_output(c.problem, ref.o, ref.lse, out.o, out.lse);
  EXPECT_EQ(v.failure, "") << c.name();
  const DeviceCase::Output base = run_once(device_case, StepFns{&step01::attention_forward, &step01::workspace_bytes});
  const Verdict vb = verify_output(c.problem, ref.o, ref.lse, base.o, base.lse);
  EXPECT_EQ(check_against_baseline(v.o, vb.o, c.problem.dtype), "") << c.name();
}

INSTANTIATE_TEST_SUITE_P(Space, EveryConfiguration, ::testing::ValuesIn(config_cases()),
                         [](const ::testing::TestParamInfo<ConfigCase>& info) {
                           return testing::test_name(info.param.name());
                         });

// Causal blocks go heaviest first within sections of (batch, head) pairs whose K and V fit in
// L2 together, section after section (step.cu, l2_sections.h); the default 32 MiB makes one
// section of every small problem, so the conformance suite never sees a second. With
// FLASHSTEPS_STEP06_SECTION_MIB = 1, 4 x 12 query heads of 4 x 4 K/V heads (GQA, three per K/V
// head) and 520 keys (bf16): K/V heads of 66,560 bytes (D = 32), 133,120 (64), 199,680 (96),
// 266,240 (128) and 532,480 (256) make sections of 45, 21, 15, 9 and 3 query heads, so the last
// of the 48 pairs' sections is short (3, 6, 3 and 3 pairs) at every head dim but 256; at 600
// keys, 45, 18, 15, 9 and 3. Both causal alignments, Nq = 520 = 4 x 128 + 8 (a short last
// query tile), every compiled head dim, the tuner's configuration.
TEST(Sections, ShortLastSectionMatchesFloat64Reference) {
  if (vendor::device_count() == 0) GTEST_SKIP() << "no GPU visible to the " << vendor::kName << " runtime";
  const testing::ScopedEnv env("FLASHSTEPS_STEP06_SECTION_MIB", "1");
  for (int d : kTensorCoreHeadDims)
    for (const auto& [mask, nk] : {std::pair{Mask::causal_top_left, 520}, std::pair{Mask::causal_bottom_right, 600}}) {
      const Problem problem = make(4, 12, 4, 520, nk, d, DType::bf16, mask);
      const HostInputs in = make_random_inputs(problem, seed_from_name(problem.name()));
      const reference::Result ref = reference::run(in);
      DeviceCase device_case(in);
      const DeviceCase::Output out = run_once(device_case, StepFns{&step06::attention_forward, &step06::workspace_bytes});
      EXPECT_TRUE(out.guards_intact) << problem.name();
      EXPECT_EQ(out.unwritten, 0) << problem.name();
      EXPECT_EQ(verify_output(problem, ref.o, ref.lse, out.o, out.lse).failure, "") << problem.name();
    }
}

// A section size that is not a whole number of MiB is refused by name, with its value, before
// any launch of a causal call (no GPU needed: the pointers are never read).
TEST(Sections, BadSectionSizeIsRefusedByName) {
  AttentionArgs a = testing::made_up_args(64);
  a.mask = Mask::causal_bottom_right;
  const step06::TileChoice choice = step06::heuristic(64);
  for (const char* bad : {"-1", "abc", "3x", "1.5"}) {
    const testing::ScopedEnv env("FLASHSTEPS_STEP06_SECTION_MIB", bad);
    try {
      step06::attention_forward_with(a, nullptr, choice);
      ADD_FAILURE() << "FLASHSTEPS_STEP06_SECTION_MIB=" << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), std::string("FLASHSTEPS_STEP06_SECTION_MIB (") + bad + ") is not a whole number of MiB");
    }
  }
}

// The space is what the chapter says it is: every compiled head dim has configurations, the
// heuristic default is one of them, and names round-trip.
TEST(Space, EveryHeadDimHasCandidatesAndTheDefaultIsOne) {
  for (int d : kTensorCoreHeadDims) {
    const std::vector<step06::TileChoice> c = step06::tuner().shapes(d);
    ASSERT_FALSE(c.empty()) << "head_dim " << d;
    const step06::TileChoice h = step06::heuristic(d);
    EXPECT_NE(std::find(c.begin(), c.end(), h), c.end()) << h.name();
    for (const step06::TileChoice& t : c) {
      const auto parsed = step06::TileChoice::parse(t.name());
      ASSERT_TRUE(parsed.has_value()) << t.name();
      EXPECT_EQ(*parsed, t);
    }
  }
  EXPECT_TRUE(step06::tuner().shapes(48).empty());  // not compiled: D = 48 runs the 64 kernels
  EXPECT_TRUE(step06::tuner().shapes(512).empty());
  const auto overlapped = step06::TileChoice::parse("m128_n32_w4_s3_ov");
  ASSERT_TRUE(overlapped.has_value());
  EXPECT_EQ(overlapped->overlap, 1);
  EXPECT_EQ(overlapped->name(), "m128_n32_w4_s3_ov");
  EXPECT_FALSE(step06::TileChoice::parse("m128_n64_w4").has_value());
  EXPECT_FALSE(step06::TileChoice::parse("m128_n64_w4_s2x").has_value());
}

TEST(Space, ForcedConfigurationOutsideTheSpaceIsRejected) {
  const AttentionArgs a = testing::made_up_args(64);
  EXPECT_THROW(step06::attention_forward_with(a, nullptr, step06::TileChoice{128, 64, 2, 2}), Unsupported);
  const tuning::ScopedTunerOptions forced(step06::tuner(), {step06::TileChoice{999, 64, 4, 2}.name()});
  try {
    step06::attention_forward(a, nullptr);
    ADD_FAILURE() << "accepted a configuration outside the space";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("forced configuration m999_n64_w4_s2"), std::string::npos) << e.what();
  }
}

// Step 06's names for the shared tuner's options (tests/tuner_test.cu tests the rest):
// FLASHSTEPS_CONFIG, FLASHSTEPS_TUNE and FLASHSTEPS_TUNE_CACHE, else a cache under $HOME,
// read through a lookup instead of the process's environment.
TEST(TunerOptions, FromEnvironment) {
  const tuning::TunerCore& tuner = step06::tuner();
  const tuning::TunerOptions set = tuner.options_from_environment([](const char* name) -> const char* {
    if (std::strcmp(name, "FLASHSTEPS_CONFIG") == 0) return "m128_n32_w4_s3_ov";
    if (std::strcmp(name, "FLASHSTEPS_TUNE") == 0) return "1";
    if (std::strcmp(name, "FLASHSTEPS_TUNE_CACHE") == 0) return "/tmp/cache.json";
    return nullptr;
  });
  ASSERT_TRUE(set.forced.has_value());
  EXPECT_EQ(step06::TileChoice::parse(*set.forced), (step06::TileChoice{128, 32, 4, 3, 1}));
  EXPECT_TRUE(set.tune);
  EXPECT_EQ(set.cache_path, "/tmp/cache.json");
  const tuning::TunerOptions home = tuner.options_from_environment([](const char* name) -> const char* {
    return std::strcmp(name, "HOME") == 0 ? "/home/u" : std::strcmp(name, "FLASHSTEPS_TUNE") == 0 ? "0" : nullptr;
  });
  EXPECT_FALSE(home.forced.has_value());
  EXPECT_FALSE(home.tune);
  EXPECT_EQ(home.cache_path, "/home/u/.cache/flashsteps/step06.json");
  EXPECT_EQ(tuner.options_from_environment([](const char*) -> const char* { return nullptr; }).cache_path,
            "flashsteps_step06_tuning.json");
  try {
    tuner.options_from_environment([](const char* name) -> const char* {
      return std::strcmp(name, "FLASHSTEPS_CONFIG") == 0 ? "m128_n64" : nullptr;
    });
    ADD_FAILURE() << "accepted a FLASHSTEPS_CONFIG that is not a shape name";
  } catch (const Unsupported& e) {
    EXPECT_EQ(std::string(e.what()), "FLASHSTEPS_CONFIG (m128_n64) is not a step 06 shape name such as m128_n64_w4_s2");
  }
}

// The padding rule of the tensor-core steps, which is also the head dim of a tuning key.
TEST(Space, PaddedHeadDim) {
  const std::pair<int, int> expected[] = {{1, 32}, {32, 32}, {40, 64}, {64, 64}, {72, 96}, {96, 96},
                                          {104, 128}, {128, 128}, {200, 256}, {256, 256}, {264, 0}};
  for (const auto& [d, padded] : expected) EXPECT_EQ(padded_head_dim_tc(d), padded) << "head_dim " << d;
}

// Tuning on (TunerOptions::tune, FLASHSTEPS_TUNE=1): the first call of a key times every
// candidate on the call's own buffers, writes the choice to the cache file, and still returns
// the right answer; a second process would then read the choice from that file.
TEST(RuntimeTuning, TunesCachesAndStaysCorrect) {
  if (vendor::device_count() == 0) GTEST_SKIP() << "no GPU visible to the " << vendor::kName << " runtime";
  const Problem p = make(1, 4, 2, 333, 333, 64, DType::bf16, Mask::causal_top_left);
  const HostInputs in = make_random_inputs(p, seed_from_name(p.name()));
  const reference::Result ref = reference::run(in);
  DeviceCase device_case(in);
  const std::string cache = ::testing::TempDir() + "flashsteps_step06_tune_test.json";
  std::remove(cache.c_str());
  const tuning::ScopedTunerOptions tune_on(step06::tuner(), {std::nullopt, true, cache});
  const DeviceCase::Output out = run_once(device_case, StepFns{&step06::attention_forward, &step06::workspace_bytes});
  const Verdict v = verify_output(p, ref.o, ref.lse, out.o, out.lse);
  EXPECT_EQ(v.failure, "") << p.name();
  EXPECT_EQ(out.unwritten, 0);
  // The cache file holds this problem's key, with a time for every candidate.
  const tuning::TuningTable table = tuning::TuningTable::load(cache, "flashsteps-step06-tuning/1");
  const tuning::TuneKey key = step06::tuner().key(device_case.args());
  EXPECT_EQ(key.device, vendor::device_name());
  EXPECT_EQ(key.head_dim, 64);
  ASSERT_TRUE(table.lookup(key).has_value()) << key.str() << " not in " << cache;
  const auto entry = std::find_if(table.entries.begin(), table.entries.end(),
                                  [&](const tuning::TuneEntry& e) { return e.key.str() == key.str(); });
  ASSERT_NE(entry, table.entries.end());
  EXPECT_EQ(entry->median_ms.size(), step06::tuner().shapes(64).size());
  EXPECT_EQ(step06::tuner().selected(device_case.args()).name(), *table.lookup(key));
  std::remove(cache.c_str());
}

// The tables of steps/06_autotuned/tuned/ parse, and every choice in them is a shape of the
// space of its head dim (a table from before a shape left the space would silently fall
// back to the heuristic).
// Only the tables of this build's vendor are held to its space (AMD's LDS prunes shapes that
// NVIDIA's tables choose). With a GPU, a key of its own table gets that table's choice.
TEST(TuningTable, CheckedInTablesParseAndNameShapesOfTheSpace) {
  const tuning::TuningTable& t = step06::tuner().checked_in_table();
  EXPECT_FALSE(t.entries.empty());
#if FLASHSTEPS_VENDOR_HIP
  const std::string brand = "AMD";
#else
  const std::string brand = "NVIDIA";
#endif
  const tuning::ScopedTunerOptions plain(step06::tuner(), {std::nullopt, false, ""});
  const std::string device = step06::tuner().key(testing::made_up_args(64)).device;
  for (const tuning::TuneEntry& e : t.entries) {
    if (e.key.device.rfind(brand, 0) != 0) continue;
    const std::vector<std::string>& names = step06::tuner().shape_names(e.key.head_dim);
    EXPECT_NE(std::find(names.begin(), names.end(), e.choice), names.end()) << e.key.str() << ": " << e.choice;
    if (e.key.device == device)
      EXPECT_EQ(step06::tuner().selected(testing::made_up_args_of(e.key)).name(), e.choice) << e.key.str();
  }
}

}  // namespace
}  // namespace flashsteps
