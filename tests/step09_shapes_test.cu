// SPDX-License-Identifier: Apache-2.0
// Step 09 runs a shape per problem (shapes.h), so every shape of its space must be correct,
// not only the default one: for each compiled head dim and each shape, a small matrix against
// the float64 reference (ragged and multi-tile seqlens, more work tiles than SMs so that a
// persistent block walks several, among them tiles that see no key and tiles whose last
// consumer has no rows, both causal alignments with Nq != Nk both ways, GQA, a
// padded head dim, the BSHD layout, masked query tiles that start before row 0). Linked into
// test_step09 beside the conformance suite.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "flashsteps/dispatch.h"
#include "flashsteps/harness.h"
#include "flashsteps/reference.h"
#include "flashsteps/step.h"
#include "flashsteps/verify.h"
#include "shapes.h"
#include "test_util.h"

namespace flashsteps {
namespace {

struct ShapeCase {
  step09::TileShape shape;
  Problem problem;
  std::string name() const { return shape.name() + "_" + problem.name(); }
};

using testing::make;

std::vector<ShapeCase> shape_cases() {
  std::vector<ShapeCase> cases;
  for (int d : kHopperHeadDims)
    for (const step09::TileShape& s : step09::tuner().shapes(d)) {
      cases.push_back({s, make(1, 2, 2, 1, 1, d, DType::f16, Mask::none)});
      cases.push_back({s, make(1, 2, 2, 300, 300, d, DType::bf16, Mask::causal_bottom_right)});
      cases.push_back({s, make(2, 4, 2, 130, 257, d - 8, DType::f16, Mask::causal_top_left)});
      cases.push_back({s, make(1, 2, 2, 257, 130, d, DType::bf16, Mask::causal_bottom_right)});
      cases.push_back({s, make(1, 3, 3, 200, 333, d, DType::bf16, Mask::none, Layout::bshd)});
      // 4 x 24 heads x 6 or 8 query tiles (576 or 768 work tiles): more than four times the
      // 132 SMs of an H200, so every block takes four or more tiles (the K/V ring's phases,
      // q_full / q_empty's parities both ways round) and the last wave is short, dealt forwards
      // (wave 4 of 576) or backwards (wave 5 of 768).
      cases.push_back({s, make(4, 24, 2, 1000, 1000, d, DType::bf16, Mask::none)});
      cases.push_back({s, make(4, 24, 2, 1000, 1000, d, DType::f16, Mask::causal_top_left)});
      // A walk of two or more tiles per block (2 x 24 heads: 288 to 432 work tiles) with work
      // tiles that see no key at all (bottom-right, 320 more queries than keys: the first two
      // or three query tiles of every head) and a tile whose consumers differ, one seeing no
      // key, the next some; and with a last query tile of 26 (BLOCK_M 128) or 90 rows (192),
      // whose last consumer has no rows: every way a consumer releases Q.
      cases.push_back({s, make(2, 24, 2, 1000, 680, d, DType::bf16, Mask::causal_bottom_right)});
      cases.push_back({s, make(2, 24, 2, 1050, 1000, d, DType::f16, Mask::none)});
      // Masked problems align their query tiles to the last row (work_tile()): the first tile
      // starts before row 0 by whole consumers, which then load zeros, see no key and store
      // nothing. One row (BLOCK_M 128: one consumer before row 0; 192: two), 65 rows (192: one
      // consumer before row 0, the last with one row; 128: no shift), 1024 (192: the first
      // tile's two first consumers before row 0 in every head; 128: no shift), and 830 rows in
      // 4 x 24 heads, a walk of three or more work tiles per block with a shifted first tile
      // in every head (128: shift 64 over 672 work tiles; 192: shift 128 over 480).
      cases.push_back({s, make(1, 2, 2, 1, 1, d, DType::bf16, Mask::causal_top_left)});
      cases.push_back({s, make(1, 2, 2, 65, 65, d, DType::f16, Mask::causal_bottom_right)});
      cases.push_back({s, make(2, 8, 2, 1024, 1024, d, DType::bf16, Mask::causal_top_left)});
      cases.push_back({s, make(4, 24, 2, 830, 830, d, DType::bf16, Mask::causal_top_left)});
    }
  return cases;
}

// The shape the test's entry point forces (StepFns takes plain function pointers).
step09::TileShape g_shape;
void forward_with_g_shape(const AttentionArgs& a, vendor::Stream s) { step09::attention_forward_with(a, s, g_shape); }

class EveryShape : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(EveryShape, MatchesFloat64Reference) {
  if (vendor::device_count() == 0) GTEST_SKIP() << "no GPU visible to the " << vendor::kName << " runtime";
  const ShapeCase& c = GetParam();
  const HostInputs in = make_random_inputs(c.problem, seed_from_name(c.problem.name()));
  const reference::Result ref = reference::run(in);
  DeviceCase device_case(in);
  g_shape = c.shape;
  const DeviceCase::Output out = run_once(device_case, StepFns{&forward_with_g_shape, &step09::workspace_bytes});
  EXPECT_TRUE(out.guards_intact) << "a write landed outside a buffer";
  EXPECT_EQ(out.unwritten, 0) << "output elements left unwritten (still NaN from the poison)";
  const Verdict v = verify_output(c.problem, ref.o, ref.lse, out.o, out.lse);
  EXPECT_EQ(v.failure, "") << c.name();
  const DeviceCase::Output base = run_once(device_case, StepFns{&step01::attention_forward, &step01::workspace_bytes});
  const Verdict vb = verify_output(c.problem, ref.o, ref.lse, base.o, base.lse);
  EXPECT_EQ(check_against_baseline(v.o, vb.o, c.problem.dtype), "") << c.name();
}

INSTANTIATE_TEST_SUITE_P(Space, EveryShape, ::testing::ValuesIn(shape_cases()),
                         [](const ::testing::TestParamInfo<ShapeCase>& info) {
                           return testing::test_name(info.param.name());
                         });

// Causal problems take their work tiles from a counter in the workspace, heaviest first within
// sections of heads whose K and V fit in L2, and so do full problems whose last query tile is
// short; full problems of whole tiles are dealt statically (the scheduler in step.cu). 4 x 12
// query heads of 4 x 4 K/V heads (GQA, three per K/V head). 520 rows: 240 work tiles at
// BLOCK_M 128 (D = 128), 144 at 192 (D = 64), more than the 132 SMs of an H200, so that blocks
// claim tiles from the counter (520 = 4 x 128 + 8 = 2 x 192 + 136: a short last tile at both).
// 768 rows (6 x 128, 4 x 192: 288 and 192 tiles, more than one wave at both) take the static
// deal, which leaves the counter alone. So does a causal problem of 130 rows: 48 work tiles
// at D = 64, 96 at D = 128, no more than the SMs, so each block's first tile is its only one
// and is dealt without the counter (and without its memset). Every claim past a block's first
// tile adds one to the counter, and so does each block's last claim, which finds nothing
// left: after the call it holds the number of work tiles exactly, or the 0x7F7F7F7F it was
// filled with where the tiles were dealt statically.
// FLASHSTEPS_STEP09_SECTION_MIB = 1 makes sections of 9 query heads at D = 128 (266,240 bytes
// of K/V per K/V head at 520 keys: 5 sections and a last one of 3) and of 21 at D = 64 (2 and
// a last one of 6; at 600 keys 18: 2 and a last one of 12); 0 makes one section of all 48.
// The workspace is filled with 0x7F before each call: a counter left at 0x7F7F7F7F would
// hand out no tile past the blocks' first ones, left as NaN by the poison. (0xFF would not
// do: the first claim would wrap round to gridDim.x - 1, a tile done twice, and the rest
// would follow in order.)
TEST(Scheduler, CounterAndSectionsMatchFloat64Reference) {
  if (vendor::device_count() == 0) GTEST_SKIP() << "no GPU visible to the " << vendor::kName << " runtime";
  struct Case {
    Mask mask;
    std::int64_t nq, nk;
  };
  for (int d : kHopperHeadDims)
    for (const Case& c : {Case{Mask::causal_top_left, 520, 520}, Case{Mask::causal_bottom_right, 520, 600},
                          Case{Mask::none, 520, 600}, Case{Mask::none, 768, 600},
                          Case{Mask::causal_bottom_right, 130, 130}})
      for (const char* mib : {"1", "0"}) {
        if (c.mask == Mask::none && *mib == '0') continue;  // sections order causal tiles only
        const Problem problem = make(4, 12, 4, c.nq, c.nk, d, DType::bf16, c.mask);
        const std::string name = problem.name() + " FLASHSTEPS_STEP09_SECTION_MIB=" + mib;
        const testing::ScopedEnv env("FLASHSTEPS_STEP09_SECTION_MIB", mib);
        const HostInputs in = make_random_inputs(problem, seed_from_name(problem.name()));
        const reference::Result ref = reference::run(in);
        DeviceCase device_case(in);
        const std::size_t bytes = step09::workspace_bytes(device_case.args());
        ASSERT_EQ(bytes, sizeof(std::uint32_t)) << name;
        device_case.reserve_workspace(bytes);
        vendor::memset_device(device_case.args().workspace, 0x7F, bytes);
        const DeviceCase::Output out = run_once(device_case, StepFns{&step09::attention_forward, &step09::workspace_bytes});
        EXPECT_TRUE(out.guards_intact) << name;
        EXPECT_EQ(out.unwritten, 0) << name;
        EXPECT_EQ(verify_output(problem, ref.o, ref.lse, out.o, out.lse).failure, "") << name;
        const int block_m = step09::tuner().selected(device_case.args()).block_m;  // the shape that ran
        const auto tiles = static_cast<std::uint32_t>(problem.batch * problem.heads_q * ((c.nq + block_m - 1) / block_m));
        std::uint32_t counter = 0;
        vendor::copy_to_host(&counter, device_case.args().workspace, sizeof counter);
        const bool claimed = (c.mask != Mask::none || c.nq % block_m != 0) && tiles > vendor::multiprocessor_count();
        EXPECT_EQ(counter, claimed ? tiles : 0x7F7F7F7Fu) << name;
      }
}

// The counter is the only workspace: 4 bytes for every problem that is not empty, none for an
// empty one; a call without it, or a causal one with a bad FLASHSTEPS_STEP09_SECTION_MIB, is
// refused by name before anything is launched (no GPU needed: the pointers are never read).
TEST(Scheduler, EveryProblemNeedsItsCounter) {
  AttentionArgs a = testing::made_up_args();
  for (Mask mask : {Mask::none, Mask::causal_bottom_right}) {
    a.mask = mask;
    EXPECT_EQ(step09::workspace_bytes(a), sizeof(std::uint32_t));
    try {
      step09::attention_forward(a, nullptr);
      ADD_FAILURE() << "ran a problem without its tile counter";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("workspace_size = 0 bytes (workspace null): step 09 needs 4 bytes"),
                std::string::npos)
          << e.what();
    }
  }
  unsigned char unaligned[8];
  a.workspace = unaligned + 1, a.workspace_size = 4;
  try {
    step09::attention_forward(a, nullptr);
    ADD_FAILURE() << "took a misaligned tile counter";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("workspace: must be 4-byte aligned"), std::string::npos) << e.what();
  }
  for (const char* bad : {"-1", "abc", "3x"}) {
    const testing::ScopedEnv env("FLASHSTEPS_STEP09_SECTION_MIB", bad);
    alignas(4) unsigned char counter[4];
    a.workspace = counter;
    try {
      step09::attention_forward(a, nullptr);
      ADD_FAILURE() << "FLASHSTEPS_STEP09_SECTION_MIB=" << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("FLASHSTEPS_STEP09_SECTION_MIB"), std::string::npos) << e.what();
    }
  }
  for (TensorView* t : {&a.q, &a.o}) t->shape[2] = 0;
  EXPECT_EQ(step09::workspace_bytes(a), 0u);
}

// work_tile() adds a tile's rows to its first row in 32 bits: a causal call of 2^31 - 1 query
// rows (within TMA's coordinates, and of D = 8, 32 GiB per tensor, within an H200) is refused
// by name before anything is launched.
TEST(Scheduler, QueryRowsBeyondThe32BitTileRowsAreRefused) {
  AttentionArgs a = testing::made_up_args();
  a.mask = Mask::causal_bottom_right;
  for (TensorView* t : {&a.q, &a.o}) {
    t->shape[1] = 1, t->shape[2] = std::numeric_limits<std::int32_t>::max(), t->shape[3] = 8;
    t->stride[3] = 1, t->stride[2] = 8, t->stride[1] = t->shape[2] * 8, t->stride[0] = t->stride[1];
  }
  for (TensorView* t : {&a.k, &a.v}) {
    t->shape[1] = 1, t->shape[2] = 16, t->shape[3] = 8;
    t->stride[3] = 1, t->stride[2] = 8, t->stride[1] = 16 * 8, t->stride[0] = 16 * 8;
  }
  a.q.data = reinterpret_cast<void*>(std::uintptr_t{1} << 40), a.o.data = reinterpret_cast<void*>(std::uintptr_t{1} << 41);
  try {
    step09::attention_forward(a, nullptr);
    ADD_FAILURE() << "accepted 2^31 - 1 query rows";
  } catch (const Unsupported& e) {
    EXPECT_EQ(std::string(e.what()),
              "step 09: q.shape[2] (seqlen_q) = 2147483647 exceeds a work tile's 32-bit rows (2147483391)");
  }
}

// The space is what shapes.h says: both compiled head dims have shapes, each default is one
// of them, names round-trip, and a shape outside the space is refused by name before any launch.
TEST(Space, EveryHeadDimHasShapesAndTheDefaultsAreAmongThem) {
  for (int d : kHopperHeadDims) {
    const std::vector<step09::TileShape> s = step09::tuner().shapes(d);
    ASSERT_FALSE(s.empty()) << "head_dim " << d;
    for (Mask m : {Mask::none, Mask::causal_bottom_right, Mask::causal_top_left}) {
      for (std::int64_t n : {1, 1024, 1025, 2048, 2049, 4096, 4097, 16384}) {
        const step09::TileShape def = step09::default_shape(d, m, n);
        EXPECT_NE(std::find(s.begin(), s.end(), def), s.end()) << def.name();
      }
    }
    for (const step09::TileShape& t : s) {
      const auto parsed = step09::TileShape::parse(t.name());
      ASSERT_TRUE(parsed.has_value()) << t.name();
      EXPECT_EQ(*parsed, t);
    }
  }
  EXPECT_EQ(step09::default_shape(128, Mask::none, 8192).name(), "m128_n176_s2");
  EXPECT_EQ(step09::default_shape(128, Mask::none, 4097).name(), "m128_n176_s2");
  EXPECT_EQ(step09::default_shape(128, Mask::none, 4096).name(), "m128_n160_s2");
  EXPECT_EQ(step09::default_shape(128, Mask::none, 2049).name(), "m128_n160_s2");
  EXPECT_EQ(step09::default_shape(128, Mask::none, 2048).name(), "m128_n128_s2");
  EXPECT_EQ(step09::default_shape(128, Mask::none, 512).name(), "m128_n128_s2");
  EXPECT_EQ(step09::default_shape(128, Mask::causal_top_left, 8192).name(), "m128_n128_s2");
  EXPECT_EQ(step09::default_shape(64, Mask::none, 512).name(), "m192_n128_s2");
  EXPECT_EQ(step09::default_shape(64, Mask::causal_bottom_right, 1024).name(), "m192_n128_s2");
  EXPECT_EQ(step09::default_shape(64, Mask::causal_bottom_right, 1025).name(), "m192_n128_s2");
  EXPECT_TRUE(step09::tuner().shapes(96).empty());
  EXPECT_FALSE(step09::TileShape::parse("m0128_n176_s2").has_value());
  EXPECT_FALSE(step09::TileShape::parse("m128_n176").has_value());
  EXPECT_FALSE(step09::TileShape::parse("m128_n176_s2x").has_value());
}

TEST(Space, ShapeOutsideTheSpaceIsRefusedByName) {
  AttentionArgs a = testing::made_up_args();
  try {
    step09::attention_forward_with(a, nullptr, step09::TileShape{192, 176, 2});
    ADD_FAILURE() << "accepted a shape outside the space";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("shape m192_n176_s2 is not in step 09's space for head_dim 128"),
              std::string::npos)
        << e.what();
  }
}

// Step 09's shape is chosen by step 06's tuner (shapes.h): its own variables, its own table
// format, the default where nothing else decides, and FLASHSTEPS_STEP09_SHAPE, forced,
// refused by name when it is not a shape of the space (before anything is launched: no GPU needed).
TEST(Tuner, StepNinesVariablesTablesAndDefault) {
  tuning::TunerCore& tuner = step09::tuner();
  EXPECT_EQ(tuner.table_format(), "flashsteps-step09-tuning/1");
  const tuning::TunerOptions o = tuner.options_from_environment([](const char* name) -> const char* {
    if (std::strcmp(name, "FLASHSTEPS_STEP09_SHAPE") == 0) return "m128_n160_s2";
    if (std::strcmp(name, "FLASHSTEPS_STEP09_TUNE_CACHE") == 0) return "/tmp/nine.json";
    if (std::strcmp(name, "FLASHSTEPS_TUNE_CACHE") == 0) return "/tmp/six.json";  // step 06's
    return std::strcmp(name, "FLASHSTEPS_TUNE") == 0 ? "1" : nullptr;
  });
  EXPECT_EQ(o.forced, std::optional<std::string>("m128_n160_s2"));
  EXPECT_EQ(o.cache_path, "/tmp/nine.json");
  EXPECT_TRUE(o.tune);
  EXPECT_EQ(tuner.options_from_environment([](const char* name) -> const char* {
              return std::strcmp(name, "HOME") == 0 ? "/home/u" : nullptr;
            }).cache_path,
            "/home/u/.cache/flashsteps/step09.json");
  // Every choice of the checked-in tables is a shape of its head dim's space, and on a GPU
  // that has a table, a key of it gets the table's choice.
  const tuning::ScopedTunerOptions plain(step09::tuner(), {std::nullopt, false, ""});
  const std::string device = tuner.key(testing::made_up_args()).device;
  EXPECT_FALSE(tuner.checked_in_table().entries.empty());
  for (const tuning::TuneEntry& e : tuner.checked_in_table().entries) {
    const std::vector<std::string>& names = tuner.shape_names(e.key.head_dim);
    EXPECT_NE(std::find(names.begin(), names.end(), e.choice), names.end()) << e.key.str() << ": " << e.choice;
    if (e.key.device == device)
      EXPECT_EQ(step09::tuner().selected(testing::made_up_args_of(e.key)).name(), e.choice) << e.key.str();
  }
  // Without a cache or a table entry for the key (a GPU named "" has none), default_shape().
  AttentionArgs a = testing::made_up_args();
  if (vendor::device_count() == 0) {
    for (Mask m : {Mask::none, Mask::causal_top_left}) {
      a.mask = m;
      EXPECT_EQ(step09::tuner().selected(a), step09::default_shape(128, m, a.seqlen_k())) << int(m);
    }
  }
  {
    const tuning::ScopedTunerOptions forced(step09::tuner(), {std::string("m192_n128_s2"), false, ""});
    EXPECT_EQ(step09::tuner().selected(testing::made_up_args(64)).name(), "m192_n128_s2");
    try {
      step09::attention_forward(a, nullptr);  // D = 128 has no 192-row shape
      ADD_FAILURE() << "ran a forced shape outside the space";
    } catch (const Unsupported& e) {
      EXPECT_EQ(std::string(e.what()),
                "forced shape m192_n128_s2 is not in step 09's space for head_dim 128: m128_n176_s2, m128_n160_s2, "
                "m128_n128_s2");
    }
  }
  const testing::ScopedEnv env("FLASHSTEPS_STEP09_SHAPE", "m128_n176");
  const tuning::ScopedTunerOptions from_environment(step09::tuner(), std::nullopt);
  try {
    step09::attention_forward(a, nullptr);
    ADD_FAILURE() << "accepted FLASHSTEPS_STEP09_SHAPE=m128_n176";
  } catch (const Unsupported& e) {
    EXPECT_EQ(std::string(e.what()),
              "FLASHSTEPS_STEP09_SHAPE (m128_n176) is not a step 09 shape name such as m128_n176_s2");
  }
}

}  // namespace
}  // namespace flashsteps

namespace flashsteps {
namespace {

// TMA coordinates are 32-bit: a batch or head count past 2^31 - 1 is refused by name, before
// any tensor map is encoded or anything is launched (the pointers here are never touched).
TEST(Limits, BatchAndHeadsPastTmaCoordinatesAreRefusedByName) {
  for (int dim : {0, 1}) {
    AttentionArgs a;
    std::uintptr_t address = 0;
    for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) {
      t->data = reinterpret_cast<void*>(address += std::uintptr_t{1} << 56);  // far apart: no overlap
      t->dtype = DType::bf16;
      t->shape[0] = 1, t->shape[1] = 1, t->shape[2] = 16, t->shape[3] = 128;
      t->shape[dim] = std::int64_t{1} << 31;
      t->stride[3] = 1, t->stride[2] = 128, t->stride[1] = 16 * 128;
      t->stride[0] = t->shape[1] * 16 * 128;
    }
    try {
      step09::attention_forward(a, nullptr);
      ADD_FAILURE() << "accepted " << (dim == 0 ? "a batch" : "a head count") << " of 2^31";
    } catch (const Unsupported& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(dim == 0 ? "q.shape[0] (batch) = 2147483648" : "q.shape[1] (heads_q) = 2147483648"),
                std::string::npos)
          << what;
    }
  }
}

// work_tile() divides in 32 bits: B * Hq * ceil(Nq / BLOCK_M) past 2^31 - 1 is refused by
// name, with the BLOCK_M of the shape that would run, before anything is launched (so also
// on a machine without a GPU). Heads of 2^30 pass the TMA limits above. With Nq = 257 the
// default shape at D = 128 (BLOCK_M = 128) makes 3 query tiles of each head; with Nq = 129
// the forced 128-row shape at D = 64 makes 2, where the default 192-row one would make 1
// (2^30 work tiles, within the limit): so the check must use the forced shape's BLOCK_M.
TEST(Limits, WorkTilesPast32BitsAreRefusedByName) {
  struct Case {
    int head_dim;
    std::int64_t seqlen_q;
    const step09::TileShape* forced;
    const char* expected;
  };
  const step09::TileShape m128{128, 128, 2};
  const Case cases[] = {
      {128, 257, nullptr,
       "step 09: q.shape[0] (batch) * q.shape[1] (heads_q) * ceil(q.shape[2] (seqlen_q) / 128) (work tiles) = "
       "3221225472 exceeds the 32-bit work-tile index (2147483647)"},
      {64, 129, &m128,
       "step 09: q.shape[0] (batch) * q.shape[1] (heads_q) * ceil(q.shape[2] (seqlen_q) / 128) (work tiles) = "
       "2147483648 exceeds the 32-bit work-tile index (2147483647)"},
  };
  for (const Case& c : cases) {
    AttentionArgs a;
    std::uintptr_t address = 0;
    for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) {
      t->data = reinterpret_cast<void*>(address += std::uintptr_t{1} << 56);  // far apart: no overlap
      t->dtype = DType::bf16;
      t->shape[0] = 1, t->shape[1] = std::int64_t{1} << 30, t->shape[2] = c.seqlen_q, t->shape[3] = c.head_dim;
      t->stride[3] = 1, t->stride[2] = c.head_dim, t->stride[1] = c.seqlen_q * c.head_dim;
      t->stride[0] = t->shape[1] * t->stride[1];
    }
    try {
      if (c.forced != nullptr) step09::attention_forward_with(a, nullptr, *c.forced);
      else step09::attention_forward(a, nullptr);
      ADD_FAILURE() << "accepted 2^30 heads of " << c.seqlen_q << " query rows at head_dim " << c.head_dim;
    } catch (const Unsupported& e) {
      EXPECT_EQ(std::string(e.what()), c.expected);
    }
  }
}

}  // namespace
}  // namespace flashsteps
