// SPDX-License-Identifier: Apache-2.0
// The shared tuner (common/include/flashsteps/tuner.h) of steps 06 and 09, on a made-up space
// of three shapes whose launchers only record that they ran: the order of the choice (forced
// shape, the user's cache, the checked-in tables at the nearest bucket, the default), the
// options and their scope, the JSON tables, and (with a GPU, for its events) the timing of
// every candidate. Nothing here launches a kernel, so all but the timing runs without a GPU.
// Linked into test_step06, whose chapter introduces the tuner.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "flashsteps/tuner.h"
#include "test_util.h"

namespace flashsteps {
namespace {

// A shape of the made-up space: "f1", "f2", "f3".
struct FakeShape {
  int n = 0;
  std::string name() const { return "f" + std::to_string(n); }
  static std::optional<FakeShape> parse(const std::string& text) {
    FakeShape s;
    char tail = 0;
    if (std::sscanf(text.c_str(), "f%d%c", &s.n, &tail) != 1 || s.name() != text) return std::nullopt;
    return s;
  }
  bool operator==(const FakeShape& o) const { return n == o.n; }
};
using FakeTuner = tuning::Tuner<FakeShape>;

std::vector<std::string> g_launched;  // the shapes launched, in order
template <int N>
void fake_launch(const AttentionArgs&, vendor::Stream) {
  g_launched.push_back("f" + std::to_string(N));
}
const std::vector<FakeTuner::Candidate>& fake_space(int head_dim) {
  static const std::vector<FakeTuner::Candidate> space = {{{1}, &fake_launch<1>}, {{2}, &fake_launch<2>}, {{3}, &fake_launch<3>}};
  static const std::vector<FakeTuner::Candidate> none;
  return head_dim == 64 ? space : none;
}
int fake_head_dim(std::int64_t head_dim) { return head_dim <= 64 ? 64 : 0; }
FakeShape fake_default(const AttentionArgs& args, int) { return args.mask == Mask::none ? FakeShape{1} : FakeShape{2}; }

constexpr tuning::TunerNames kNames{"fake step", "fake", "shape", "FLASHSTEPS_FAKE_SHAPE", "FLASHSTEPS_FAKE_CACHE", "f1"};
constexpr const char* kFormat = "flashsteps-fake-tuning/1";

// The device a key of this process names ("" without a GPU).
std::string this_device() { return vendor::device_count() > 0 ? vendor::device_name() : std::string(); }

// A table of one full entry at head dim 64 and bucket @p bucket choosing @p choice.
std::string table_text(std::int64_t bucket, const std::string& choice) {
  tuning::TuningTable t(kFormat);
  t.insert({{this_device(), DType::bf16, 64, false, bucket}, choice, {{"f1", 2.0}, {choice, 1.0}}});
  return t.to_json();
}

// A problem of head dim 64: 2048 rows (bucket 2048), bf16, full or causal.
AttentionArgs problem(Mask mask) {
  AttentionArgs a = testing::made_up_args(64);
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) t->shape[2] = 2048, t->stride[1] = 2048 * 64, t->stride[0] = 2 * 2048 * 64;
  a.mask = mask;
  return a;
}

TEST(Tuner, DefaultWithoutTablesOrCache) {
  const char* const no_tables[] = {nullptr};
  FakeTuner tuner(kNames, no_tables, &fake_head_dim, &fake_space, &fake_default);
  const tuning::ScopedTunerOptions options(tuner, {std::nullopt, false, ""});
  EXPECT_EQ(tuner.selected(problem(Mask::none)).name(), "f1");
  EXPECT_EQ(tuner.selected(problem(Mask::causal_top_left)).name(), "f2");
  g_launched.clear();
  tuner.select(problem(Mask::causal_top_left), nullptr, true).launch(problem(Mask::causal_top_left), nullptr);
  EXPECT_EQ(g_launched, std::vector<std::string>{"f2"});
}

// The checked-in table decides its key at the nearest bucket; a key it lacks (causal here)
// takes the default, and so does a choice that is not in the space.
TEST(Tuner, CheckedInTableAtTheNearestBucket) {
  const std::string text = table_text(8192, "f3");
  const char* const tables[] = {text.c_str(), nullptr};
  FakeTuner tuner(kNames, tables, &fake_head_dim, &fake_space, &fake_default);
  const tuning::ScopedTunerOptions options(tuner, {std::nullopt, false, ""});
  EXPECT_EQ(tuner.selected(problem(Mask::none)).name(), "f3");
  EXPECT_EQ(tuner.selected(problem(Mask::causal_bottom_right)).name(), "f2");
  const std::string stale = table_text(2048, "f9");
  const char* const stale_tables[] = {stale.c_str(), nullptr};
  FakeTuner stale_tuner(kNames, stale_tables, &fake_head_dim, &fake_space, &fake_default);
  const tuning::ScopedTunerOptions stale_options(stale_tuner, {std::nullopt, false, ""});
  EXPECT_EQ(stale_tuner.selected(problem(Mask::none)).name(), "f1");
}

// The user's cache comes before the checked-in table, the forced shape before both; a
// forced shape outside the space is refused by name.
TEST(Tuner, ForcedThenCacheThenTable) {
  const std::string text = table_text(2048, "f3");
  const char* const tables[] = {text.c_str(), nullptr};
  FakeTuner tuner(kNames, tables, &fake_head_dim, &fake_space, &fake_default);
  const std::string cache = ::testing::TempDir() + "flashsteps_fake_cache.json";
  {
    tuning::TuningTable t(kFormat);
    t.insert({{this_device(), DType::bf16, 64, false, 2048}, "f2", {}});
    t.save(cache);
  }
  {
    const tuning::ScopedTunerOptions options(tuner, {std::nullopt, false, cache});
    EXPECT_EQ(tuner.selected(problem(Mask::none)).name(), "f2");
  }
  {
    const tuning::ScopedTunerOptions options(tuner, {std::string("f1"), false, cache});
    EXPECT_EQ(tuner.selected(problem(Mask::none)).name(), "f1");
  }
  {
    const tuning::ScopedTunerOptions options(tuner, {std::string("f7"), false, cache});
    try {
      tuner.selected(problem(Mask::none));
      ADD_FAILURE() << "ran a forced shape outside the space";
    } catch (const Unsupported& e) {
      EXPECT_EQ(std::string(e.what()), "forced shape f7 is not in fake step's space for head_dim 64: f1, f2, f3");
    }
  }
  EXPECT_THROW(tuner.find(64, FakeShape{4}, "shape"), Unsupported);
  EXPECT_EQ(tuner.find(64, FakeShape{3}, "shape").shape, FakeShape{3});
  std::remove(cache.c_str());
}

// A cache file that is not a table of this step is an error that names the file.
TEST(Tuner, CacheOfAnotherFormatIsRefusedByName) {
  const char* const no_tables[] = {nullptr};
  FakeTuner tuner(kNames, no_tables, &fake_head_dim, &fake_space, &fake_default);
  const std::string cache = ::testing::TempDir() + "flashsteps_fake_other.json";
  tuning::TuningTable("flashsteps-step06-tuning/1").save(cache);
  const tuning::ScopedTunerOptions options(tuner, {std::nullopt, false, cache});
  try {
    tuner.selected(problem(Mask::none));
    ADD_FAILURE() << "read another step's table";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), cache + ": tuning table: \"format\" must be \"flashsteps-fake-tuning/1\"");
  }
  std::remove(cache.c_str());
}

// The options the step's variables give, read through a lookup.
TEST(Tuner, OptionsFromTheStepsVariables) {
  const char* const no_tables[] = {nullptr};
  const FakeTuner tuner(kNames, no_tables, &fake_head_dim, &fake_space, &fake_default);
  const tuning::TunerOptions set = tuner.options_from_environment([](const char* name) -> const char* {
    if (std::strcmp(name, "FLASHSTEPS_FAKE_SHAPE") == 0) return "f3";
    if (std::strcmp(name, "FLASHSTEPS_TUNE") == 0) return "1";
    if (std::strcmp(name, "FLASHSTEPS_FAKE_CACHE") == 0) return "/tmp/fake.json";
    if (std::strcmp(name, "FLASHSTEPS_CONFIG") == 0) return "m128_n64_w4_s2";  // step 06's: not read
    return nullptr;
  });
  EXPECT_EQ(set.forced, std::optional<std::string>("f3"));
  EXPECT_TRUE(set.tune);
  EXPECT_EQ(set.cache_path, "/tmp/fake.json");
  const tuning::TunerOptions home = tuner.options_from_environment(
      [](const char* name) -> const char* { return std::strcmp(name, "HOME") == 0 ? "/home/u" : nullptr; });
  EXPECT_FALSE(home.forced.has_value());
  EXPECT_FALSE(home.tune);
  EXPECT_EQ(home.cache_path, "/home/u/.cache/flashsteps/fake.json");
  EXPECT_EQ(tuner.options_from_environment([](const char*) -> const char* { return nullptr; }).cache_path,
            "flashsteps_fake_tuning.json");
  try {
    tuner.options_from_environment(
        [](const char* name) -> const char* { return std::strcmp(name, "FLASHSTEPS_FAKE_SHAPE") == 0 ? "f03" : nullptr; });
    ADD_FAILURE() << "accepted a forced value that is not a shape name";
  } catch (const Unsupported& e) {
    EXPECT_EQ(std::string(e.what()), "FLASHSTEPS_FAKE_SHAPE (f03) is not a fake step shape name such as f1");
  }
}

// Options set by the program replace the environment's until they are reset, and nest.
TEST(Tuner, ScopedOptionsRestoreThePreviousOnes) {
  const char* const no_tables[] = {nullptr};
  FakeTuner tuner(kNames, no_tables, &fake_head_dim, &fake_space, &fake_default);
  {
    const tuning::ScopedTunerOptions outer(tuner, {std::string("f1"), false, ""});
    EXPECT_EQ(tuner.options().forced, std::optional<std::string>("f1"));
    {
      const tuning::ScopedTunerOptions inner(tuner, {std::string("f2"), true, "/tmp/x.json"});
      EXPECT_EQ(tuner.options().forced, std::optional<std::string>("f2"));
      EXPECT_TRUE(tuner.options().tune);
    }
    EXPECT_EQ(tuner.options().forced, std::optional<std::string>("f1"));
    EXPECT_FALSE(tuner.options().tune);
  }
  EXPECT_FALSE(tuner.set_options(std::nullopt).has_value());  // back to the environment
  const testing::ScopedEnv env("FLASHSTEPS_FAKE_SHAPE", "f2");
  EXPECT_EQ(tuner.options().forced, std::optional<std::string>("f2"));
}

// The table format: written, read back, looked up at the nearest bucket (in log2), refused
// when it is another step's or not JSON.
TEST(TuningTable, RoundTripAndNearestBucket) {
  tuning::TuningTable t(kFormat);
  tuning::TuneEntry e;
  e.key = {"GPU X", DType::bf16, 128, true, 4096};
  e.choice = "f2";
  e.median_ms = {{"f2", 1.5}, {"f1", 2.0}};
  t.insert(e);
  t.insert({{"GPU X", DType::bf16, 128, true, 512}, "f1", {}});
  t.set_meta("command", "test");
  const tuning::TuningTable back = tuning::TuningTable::from_json(t.to_json(), kFormat);
  ASSERT_EQ(back.entries.size(), 2u);
  ASSERT_EQ(back.entries[0].median_ms.size(), 2u);
  EXPECT_EQ(back.entries[0].median_ms[0].first, "f2");
  EXPECT_EQ(back.entries[0].median_ms[0].second, 1.5);
  tuning::TuneKey k = e.key;
  k.seqlen_bucket = 16384;  // 2 octaves from 4096, 5 from 512
  EXPECT_EQ(back.lookup(k), std::optional<std::string>("f2"));
  k.seqlen_bucket = 1024;  // 1 octave from 512, 2 from 4096
  EXPECT_EQ(back.lookup(k), std::optional<std::string>("f1"));
  k.causal = false;  // no entry for full attention
  EXPECT_FALSE(back.lookup(k).has_value());
  k = e.key, k.device = "GPU Y";  // nor for another GPU
  EXPECT_FALSE(back.lookup(k).has_value());
  EXPECT_THROW(tuning::TuningTable::from_json(t.to_json(), "flashsteps-step09-tuning/1"), InvalidArgument);
  EXPECT_THROW(tuning::TuningTable::from_json("{\"format\": \"other\"}", kFormat), InvalidArgument);
  EXPECT_THROW(tuning::TuningTable::from_json("{\"format\": \"flashsteps-fake-tuning/1\"}", kFormat), InvalidArgument);
  EXPECT_THROW(tuning::TuningTable::from_json("not json", kFormat), InvalidArgument);
  try {
    tuning::TuningTable::from_json(
        "{\"format\": \"flashsteps-fake-tuning/1\", \"entries\": [{\"device\": \"X\", \"dtype\": \"fp32\", "
        "\"head_dim\": 64, \"causal\": false, \"seqlen_bucket\": 128, \"choice\": \"f1\"}]}",
        kFormat);
    ADD_FAILURE() << "accepted an fp32 entry";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "tuning table: entries[0].dtype (fp32) must be fp16 or bf16");
  }
}

TEST(TuningTable, SeqlenBuckets) {
  const std::pair<std::int64_t, std::int64_t> expected[] = {{1, 128},      {128, 128},     {129, 256},
                                                            {2048, 2048},  {2049, 4096},   {65536, 65536},
                                                            {1 << 20, 65536}};
  for (const auto& [n, bucket] : expected) EXPECT_EQ(tuning::seqlen_bucket(n), bucket) << n;
}

// With a GPU (for its events): every candidate is launched warmup + reps times, in space
// order, and timed; the entry has a median for each and chooses one of them.
TEST(Tuner, TuneTimesEveryCandidate) {
  if (vendor::device_count() == 0) GTEST_SKIP() << "no GPU visible to the " << vendor::kName << " runtime";
  const char* const no_tables[] = {nullptr};
  FakeTuner tuner(kNames, no_tables, &fake_head_dim, &fake_space, &fake_default);
  g_launched.clear();
  const tuning::TuneEntry entry = tuner.tune(problem(Mask::none), nullptr, nullptr, 2, 5);
  ASSERT_EQ(g_launched.size(), 3u * 7u);
  EXPECT_EQ(g_launched.front(), "f1");
  EXPECT_EQ(g_launched.back(), "f3");
  ASSERT_EQ(entry.median_ms.size(), 3u);
  EXPECT_EQ(entry.median_ms[0].first, "f1");
  EXPECT_EQ(entry.median_ms[2].first, "f3");
  EXPECT_EQ(entry.key.str(), this_device() + "/bf16/hd64/full/n2048");
  double best = entry.median_ms[0].second;
  for (const auto& [name, ms] : entry.median_ms) best = ms < best ? ms : best;
  const auto chosen = std::find_if(entry.median_ms.begin(), entry.median_ms.end(),
                                   [&](const auto& timed) { return timed.first == entry.choice; });
  ASSERT_NE(chosen, entry.median_ms.end()) << entry.choice << " was not timed";
  EXPECT_EQ(chosen->second, best);
}

// The user's cache answers its own keys only: a cache of another bucket leaves the key to the
// checked-in table (at its nearest bucket), and a cached name outside the space falls through.
TEST(Tuner, CacheAnswersItsOwnBucketOnly) {
  const std::string text = table_text(8192, "f3");
  const char* const tables[] = {text.c_str(), nullptr};
  FakeTuner tuner(kNames, tables, &fake_head_dim, &fake_space, &fake_default);
  const std::string cache = ::testing::TempDir() + "flashsteps_fake_cache_buckets.json";
  tuning::TuningTable t(kFormat);
  t.insert({{this_device(), DType::bf16, 64, false, 512}, "f2", {}});  // problem() is bucket 2048
  t.insert({{this_device(), DType::bf16, 64, true, 2048}, "f9", {}});  // not in the space
  t.save(cache);
  const tuning::ScopedTunerOptions options(tuner, {std::nullopt, false, cache});
  EXPECT_EQ(tuner.selected(problem(Mask::none)).name(), "f3");             // the table, not the cache's n512
  EXPECT_EQ(tuner.selected(problem(Mask::causal_top_left)).name(), "f2");  // f9 skipped: the default
  EXPECT_EQ(t.lookup({this_device(), DType::bf16, 64, false, 2048}, /*nearest=*/false), std::nullopt);
  EXPECT_EQ(t.lookup({this_device(), DType::bf16, 64, false, 2048}), std::optional<std::string>("f2"));
  std::remove(cache.c_str());
}

// With a GPU (for its events) and tuning on: a key the cache lacks is tuned (every candidate
// launched warmup + reps times), the choice is one of them and is written to the cache; the
// next call of that key reads it without tuning again.
TEST(Tuner, TuningOnTunesANewBucketAndCachesIt) {
  if (vendor::device_count() == 0) GTEST_SKIP() << "no GPU visible to the " << vendor::kName << " runtime";
  const char* const no_tables[] = {nullptr};
  FakeTuner tuner(kNames, no_tables, &fake_head_dim, &fake_space, &fake_default);
  const std::string cache = ::testing::TempDir() + "flashsteps_fake_cache_tune.json";
  tuning::TuningTable t(kFormat);
  t.insert({{this_device(), DType::bf16, 64, false, 512}, "f2", {}});
  t.save(cache);
  const tuning::ScopedTunerOptions options(tuner, {std::nullopt, true, cache});
  g_launched.clear();
  const std::string chosen = tuner.select(problem(Mask::none), nullptr, true).shape.name();
  EXPECT_EQ(g_launched.size(), 3u * (2u + 7u));
  const tuning::TuningTable written = tuning::TuningTable::load(cache, kFormat);
  ASSERT_EQ(written.entries.size(), 2u);
  EXPECT_EQ(written.entries[1].key.str(), this_device() + "/bf16/hd64/full/n2048");
  EXPECT_EQ(written.entries[1].choice, chosen);
  EXPECT_EQ(written.entries[1].median_ms.size(), 3u);
  g_launched.clear();
  EXPECT_EQ(tuner.select(problem(Mask::none), nullptr, true).shape.name(), chosen);
  EXPECT_TRUE(g_launched.empty());
  std::remove(cache.c_str());
}

// Malformed tables are refused with the offending field named.
TEST(TuningTable, MalformedFieldsAreNamed) {
  const auto message = [](const std::string& text) {
    try {
      tuning::TuningTable::from_json(text, kFormat);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string head = std::string("{\"format\": \"") + kFormat + "\", \"entries\": [";
  EXPECT_EQ(message("{\"format\": 1}"), std::string("tuning table: \"format\" must be \"") + kFormat + "\"");
  EXPECT_EQ(message(head + "{\"device\": \"X\", \"dtype\": \"bf16\", \"head_dim\": \"128\"}]}"),
            "tuning table: entries[0].head_dim (\"128\") has the wrong type");
  EXPECT_EQ(message(head + "{\"device\": \"X\", \"dtype\": \"bf16\", \"head_dim\": 128, \"causal\": false}]}"),
            "tuning table: entries[0].seqlen_bucket is missing");
  EXPECT_EQ(message(head + "{\"device\": \"X\", \"dtype\": \"bf16\", \"head_dim\": 128, \"causal\": false, "
                           "\"seqlen_bucket\": 512, \"choice\": \"f1\", \"median_ms\": {\"f1\": \"fast\"}}]}"),
            "tuning table: entries[0].median_ms.f1 (\"fast\") must be a number");
  EXPECT_EQ(message(head + "3]}"), "tuning table: entries[0] must be an object");
}

}  // namespace
}  // namespace flashsteps
