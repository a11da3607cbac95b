// SPDX-License-Identifier: Apache-2.0
// Step 10's own tests, linked into test_step10 beside the shared conformance suite.
//  - Plan (CPU, no GPU needed): the split-count heuristic, the tile per packed-row count, the
//    forced counts (ScopedNumSplits, FLASHSTEPS_NUM_SPLITS) and the workspace size.
//  - SwizzledLayout (CPU): the decode tile's shared-memory layout (tile::Swizzled).
//  - SplitKv (GPU): decode and chunked-prefill shapes against the float64 reference at forced
//    split counts from 1 to more than the key tiles (empty splits), GQA ratios 1, 4 and 8, both
//    causal alignments with Nq < Nk (splits whose keys are all masked) and Nq > Nk (fully
//    masked rows), every head-dim bucket, strides, no LSE and no keys at all.
//  - SplitKvHugeLogits (GPU): the combine subtracts the maximum before it scales, at every
//    split count (exact outputs at logits near 1e11).
//  - SplitKvStream (GPU): calls back to back on one stream, the second reading the first's O
//    and reusing its workspace (each kernel may start before the one ahead has finished).
// The whole conformance suite runs at any split count too: FLASHSTEPS_NUM_SPLITS=3 ./test_step10.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "flashsteps/dispatch.h"
#include "flashsteps/harness.h"
#include "flashsteps/reference.h"
#include "flashsteps/step.h"
#include "flashsteps/tile.h"
#include "flashsteps/verify.h"
#include "splits.h"
#include "test_util.h"

namespace flashsteps {
namespace {

using testing::make;

const StepFns kStep10{&step10::attention_forward, &step10::workspace_bytes};
const StepFns kStep01{&step01::attention_forward, &step01::workspace_bytes};

// Args of @p p with fake, never dereferenced device pointers (validation and planning only).
AttentionArgs fake_args(const Problem& p) {
  const ProblemLayout layout = make_layout(p);
  AttentionArgs a;
  a.q = make_view(p, layout, 'q', reinterpret_cast<void*>(0x10000000));
  a.k = make_view(p, layout, 'k', reinterpret_cast<void*>(0x20000000));
  a.v = make_view(p, layout, 'v', reinterpret_cast<void*>(0x30000000));
  a.o = make_view(p, layout, 'o', reinterpret_cast<void*>(0x40000000));
  a.mask = p.mask;
  return a;
}

// ---------------------------------------------------------------------------- CPU: the plan

TEST(Plan, OneSplitWhenTheUnsplitGridFillsTheGpu) {
  EXPECT_EQ(step10::choose_num_splits(132, 1024, 132, 1), 1);
  EXPECT_EQ(step10::choose_num_splits(100000, 1024, 132, 1), 1);
  EXPECT_EQ(step10::choose_num_splits(64, 1024, 0, 1), 1) << "no device: no SM count, one split";
  EXPECT_EQ(step10::choose_num_splits(0, 1024, 132, 1), 1);
}

TEST(Plan, DecodeSplitCountsOnAnH200) {
  // 132 SMs, one block each per wave.
  EXPECT_EQ(step10::choose_num_splits(64, 1024, 132, 1), 2);    // B = 8, Hkv = 8: 128 blocks, 0.97 of a wave
  EXPECT_EQ(step10::choose_num_splits(8, 1024, 132, 1), 16);    // B = 1: 128 blocks (15 would leave 12 SMs idle)
  EXPECT_EQ(step10::choose_num_splits(32, 1024, 132, 1), 4);    // B = 1, Hkv = 32
  EXPECT_EQ(step10::choose_num_splits(256, 1024, 132, 1), 1);   // B = 32: 1.94 waves unsplit
  EXPECT_EQ(step10::choose_num_splits(100, 1024, 132, 1), 9);   // 900 blocks: 6.8 waves, 97 % of the SM slots busy
  // The prefill tile aims at the two blocks an SM holds: chunked prefill, Nq = 128, Hkv = 8
  // (64 row tiles) gets 4 splits, 256 blocks for 264.
  EXPECT_EQ(step10::choose_num_splits(64, 128, 132, 2), 4);
  // Short keys cap the count at kMinTilesPerSplit tiles per split; below the cap the count
  // that keeps the most blocks busy: 8 blocks grow towards one wave up to the cap, 8 splits;
  // 100 blocks with a cap of 8 keep 95 % busy at no count, most at 5 (500 blocks, 3.79 waves).
  EXPECT_EQ(step10::choose_num_splits(8, 16, 132, 1), 16 / step10::kMinTilesPerSplit);
  EXPECT_EQ(step10::choose_num_splits(100, 16, 132, 1), 5);
  EXPECT_EQ(step10::choose_num_splits(8, 3, 132, 1), 1);
  // Never above kMaxSplits.
  EXPECT_LE(step10::choose_num_splits(1, 1 << 20, 1000, 1), step10::kMaxSplits);
}

TEST(Plan, TheDecodeTileAimsAtOneBlockPerSm) {
  for (int d : {32, 64, 96, 128, 256}) {
    EXPECT_EQ(step10::target_blocks_per_sm(step10::decode_tile(d), d), 1) << "head_dim " << d;
    EXPECT_EQ(step10::target_blocks_per_sm(step10::prefill_tile(d), d),
              step10::resident_blocks_per_sm(step10::prefill_tile(d), d))
        << "head_dim " << d;
  }
#if !FLASHSTEPS_VENDOR_HIP
  EXPECT_EQ(step10::resident_blocks_per_sm(step10::prefill_tile(128), 128), 2);  // 85 KiB each of 228
  EXPECT_EQ(step10::resident_blocks_per_sm(step10::decode_tile(128), 128), 2);   // 106 KiB each
#endif
}

TEST(Plan, EveryChoiceIsWithinItsBounds) {
  for (std::int64_t blocks : {1, 3, 8, 17, 64, 100, 263})
    for (std::int64_t tiles : {0, 1, 2, 5, 16, 100, 1024, 100000})
      for (int sms : {1, 80, 132, 304})
        for (int per_sm : {1, 2, 3}) {
          const int s = step10::choose_num_splits(blocks, tiles, sms, per_sm);
          EXPECT_GE(s, 1);
          EXPECT_LE(s, std::max<std::int64_t>(1, std::min<std::int64_t>(tiles / step10::kMinTilesPerSplit,
                                                                          step10::kMaxSplits)));
        }
}

TEST(Plan, TileFollowsThePackedRows) {
  // Hq = 32, Hkv = 8: G = 4. Decode (Nq = 1): 4 packed rows, the 16-row decode tile.
  Problem p = make(1, 32, 8, 1, 8192, 128, DType::bf16, Mask::none, Layout::bshd);
  step10::SplitPlan plan = step10::plan_splits(fake_args(p), 132, 0);
  EXPECT_EQ(plan.group, 4);
  EXPECT_EQ(plan.packed_rows, 4);
  EXPECT_EQ(plan.tile.block_m, step10::decode_tile(128).block_m);
  EXPECT_EQ(plan.m_tiles, 1);
  EXPECT_EQ(plan.key_tiles, (8192 + plan.tile.block_n - 1) / plan.tile.block_n);
  EXPECT_EQ(plan.batch_heads_kv, 8);
  // Chunked prefill (Nq = 128): 512 packed rows, the prefill tile.
  p.seqlen_q = 128, p.mask = Mask::causal_bottom_right;
  plan = step10::plan_splits(fake_args(p), 132, 0);
  EXPECT_EQ(plan.packed_rows, 512);
  EXPECT_EQ(plan.tile.block_m, step10::prefill_tile(128).block_m);
  EXPECT_EQ(plan.m_tiles, 512 / plan.tile.block_m);
  EXPECT_EQ(plan.blocks(), 8 * plan.m_tiles * plan.num_splits);
  // D = 80 runs at the padded head dim 96.
  p.head_dim = 80;
  EXPECT_EQ(step10::plan_splits(fake_args(p), 132, 0).head_dim, 96);
}

TEST(Plan, ForcedAndEnvironmentCounts) {
  const testing::ScopedEnv clear("FLASHSTEPS_NUM_SPLITS", nullptr);
  const AttentionArgs a = fake_args(make(2, 8, 2, 1, 1000, 64, DType::f16, Mask::none));
  EXPECT_EQ(step10::plan_splits(a, 132, 0).source, step10::SplitSource::heuristic);
  {
    const testing::ScopedEnv env("FLASHSTEPS_NUM_SPLITS", "5");
    EXPECT_EQ(step10::plan_splits(a, 132, 0).num_splits, 5);
    EXPECT_EQ(step10::plan_splits(a, 132, 0).source, step10::SplitSource::environment);
    const step10::SplitPlan forced = step10::plan_splits(a, 132, 200);  // a forced count wins, even past the tiles
    EXPECT_EQ(forced.num_splits, 200);
    EXPECT_EQ(forced.source, step10::SplitSource::forced);
  }
  for (const char* bad : {"0", "-3", "abc", "7x", "257"}) {
    const testing::ScopedEnv env("FLASHSTEPS_NUM_SPLITS", bad);
    try {
      step10::plan_splits(a, 132, 0);
      ADD_FAILURE() << "FLASHSTEPS_NUM_SPLITS=" << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("FLASHSTEPS_NUM_SPLITS"), std::string::npos) << e.what();
    }
  }
}

// What the benchmark records beside a forced count: the heuristic's own choice, whatever is forced.
TEST(Plan, HeuristicCountIgnoresWhatIsForced) {
  const Problem p = make(8, 32, 8, 1, 65536, 128, DType::bf16, Mask::none, Layout::bshd);
  const AttentionArgs a = fake_args(p);
  const int sms = vendor::device_count() > 0 ? vendor::multiprocessor_count() : 0;
  const step10::SplitPlan plan = step10::plan_splits(a, sms, 1);
  const int want = step10::choose_num_splits(plan.batch_heads_kv * plan.m_tiles, plan.key_tiles, sms,
                                             step10::target_blocks_per_sm(plan.tile, plan.head_dim));
  EXPECT_EQ(step10::heuristic_num_splits(a), want);
  {
    const testing::ScopedEnv env("FLASHSTEPS_NUM_SPLITS", "7");
    EXPECT_EQ(step10::plan_for_device(a).num_splits, 7);
    EXPECT_EQ(step10::heuristic_num_splits(a), want);
    const step10::ScopedNumSplits forced(3);
    EXPECT_EQ(step10::plan_for_device(a).num_splits, 3);
    EXPECT_EQ(step10::heuristic_num_splits(a), want);
  }
}

TEST(Plan, ScopedNumSplitsNestsAndRejectsOutOfRange) {
  const testing::ScopedEnv clear("FLASHSTEPS_NUM_SPLITS", nullptr);
  const AttentionArgs a = fake_args(make(1, 4, 1, 1, 100, 64, DType::bf16, Mask::none));
  {
    const step10::ScopedNumSplits outer(3);
    EXPECT_EQ(step10::plan_for_device(a).num_splits, 3);
    {
      const step10::ScopedNumSplits inner(9);
      EXPECT_EQ(step10::plan_for_device(a).num_splits, 9);
      EXPECT_EQ(step10::workspace_bytes(a), step10::workspace_bytes_for(a, 9));
    }
    EXPECT_EQ(step10::plan_for_device(a).num_splits, 3);
  }
  EXPECT_EQ(step10::plan_for_device(a).source, step10::SplitSource::heuristic);
  for (int bad : {0, -1, step10::kMaxSplits + 1}) {
    try {
      const step10::ScopedNumSplits s(bad);
      ADD_FAILURE() << "num_splits " << bad << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("num_splits"), std::string::npos) << e.what();
    }
  }
}

TEST(Plan, WorkspaceBytes) {
  const AttentionArgs a = fake_args(make(3, 8, 2, 5, 100, 80, DType::bf16, Mask::none));
  EXPECT_EQ(step10::workspace_bytes_for(a, 1), 0u);
  // 4 splits of B Hq Nq = 120 rows: the partial O at the padded head dim 96, then m and l.
  EXPECT_EQ(step10::workspace_bytes_for(a, 4), std::size_t{4} * 120 * (96 + 2) * sizeof(float));
  // 64-bit sizes: 256 splits of 2^22 rows of 256 columns is 2^40 bytes and more.
  const AttentionArgs big = fake_args(make(1024, 64, 64, 64, 1, 256, DType::bf16, Mask::none));
  EXPECT_EQ(step10::workspace_bytes_for(big, 256), std::size_t{256} * (1 << 22) * 258 * sizeof(float));
}

TEST(Plan, MissingWorkspaceIsRefusedBeforeAnyLaunch) {
  // Fake pointers: the refusal comes before anything touches the device.
  const AttentionArgs a = fake_args(make(1, 8, 2, 1, 1000, 64, DType::f16, Mask::none));
  const step10::ScopedNumSplits forced(4);
  try {
    step10::attention_forward(a, nullptr);
    ADD_FAILURE() << "ran 4 splits without a workspace";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------ CPU: the swizzled tile layout

// tile::Swizzled (tile.h), the decode tile's shared-memory layout, at the three head dims it
// serves: each row's elements stay in the row, 16-byte units stay whole (a cp.async or an
// ldmatrix row moves one unit), every 128 bytes of a row fill one aligned 128-byte line (what
// lets a warp's copies reach L2 as whole-line requests), and eight consecutive rows put any one
// unit on eight different bank groups (four 4-byte banks each: ldmatrix reads them at once).
template <int COLS>
void check_swizzled_layout() {
  using tile::Swizzled;
  constexpr int kRows = 32, kUnits = COLS / tile::kChunk;
  for (int r = 0; r < kRows; ++r) {
    std::set<int> offsets;
    for (int c = 0; c < COLS; ++c) {
      const int at = Swizzled::offset<COLS>(r, c);
      ASSERT_GE(at, r * COLS) << "row " << r << " col " << c;
      ASSERT_LT(at, (r + 1) * COLS) << "row " << r << " col " << c;
      offsets.insert(at);
      if (c % tile::kChunk != 0) ASSERT_EQ(at, Swizzled::offset<COLS>(r, c - 1) + 1) << "unit split at col " << c;
    }
    ASSERT_EQ(offsets.size(), static_cast<std::size_t>(COLS)) << "row " << r << " is not a permutation";
    for (int line = 0; line < kUnits / 8; ++line) {  // the 8 units of each 128 bytes: one line
      std::set<int> lines;
      for (int u = 8 * line; u < 8 * line + 8; ++u) lines.insert(Swizzled::offset<COLS>(r, u * tile::kChunk) * 2 / 128);
      ASSERT_EQ(lines.size(), 1u) << "row " << r << ", 128-byte piece " << line << " spans several lines";
      EXPECT_EQ(*lines.begin(), (r * COLS * 2 + 128 * line) / 128);
    }
  }
  for (int r0 = 0; r0 < kRows; r0 += 8)
    for (int u = 0; u < kUnits; ++u) {
      std::set<int> groups;
      for (int r = r0; r < r0 + 8; ++r) groups.insert(Swizzled::offset<COLS>(r, u * tile::kChunk) * 2 / 16 % 8);
      EXPECT_EQ(groups.size(), 8u) << "rows " << r0 << "-" << r0 + 7 << ", unit " << u << ": bank conflict";
    }
}

TEST(SwizzledLayout, RowsOfWholeLinesWithoutBankConflicts) {
  check_swizzled_layout<64>();
  check_swizzled_layout<128>();
  check_swizzled_layout<256>();
}

// What the swizzle is for: step 06's padded rows (144 bytes at head dim 64) straddle two
// 128-byte lines from the second row on.
TEST(SwizzledLayout, PaddedRowsStraddleLines) {
  for (int r = 1; r < 8; ++r) {
    const int first = tile::Padded::offset<64>(r, 0) * 2 / 128, last = (tile::Padded::offset<64>(r, 63) * 2 + 1) / 128;
    EXPECT_NE(first, last) << "row " << r;
  }
}

// ---------------------------------------------------------------------------- GPU: the matrix

bool has_device() {
  static const bool present = vendor::device_count() > 0;
  return present;
}
#define REQUIRE_DEVICE() \
  if (!has_device()) GTEST_SKIP() << "no GPU visible to the " << vendor::kName << " runtime"

struct SplitCase {
  Problem problem;
  int splits;  // 0: the heuristic's count
  std::string name() const { return (splits == 0 ? std::string("auto") : "s" + std::to_string(splits)) + "_" + problem.name(); }
};

std::vector<SplitCase> split_cases() {
  std::vector<SplitCase> cases;
  auto add = [&](const Problem& p, std::initializer_list<int> splits) {
    for (int s : splits) cases.push_back({p, s});
  };
  // Decode: Nq = 1, Nk from 1 (one key) past several tiles, GQA ratios 1, 4 and 8; split
  // counts past the key tiles leave splits empty.
  int n = 0;
  for (std::int64_t nk : {1, 2, 17, 64, 65, 300, 1025, 4100})
    for (auto [hq, hkv] : std::vector<std::pair<int, int>>{{8, 8}, {8, 2}, {16, 2}})
      add(make(2, hq, hkv, 1, nk, 128, n++ % 2 ? DType::f16 : DType::bf16, Mask::none, Layout::bshd), {0, 1, 2, 5, 64});
  // Causal, Nq < Nk, both alignments: top-left hides most keys from every row (whole splits
  // masked); bottom-right is chunked prefill. Nq > Nk: bottom-right masks whole rows.
  for (auto [nq, nk] : std::vector<std::pair<int, int>>{{1, 100}, {3, 200}, {16, 1000}, {130, 700}, {50, 20}})
    for (Mask m : {Mask::causal_bottom_right, Mask::causal_top_left})
      add(make(2, 8, 2, nq, nk, 64, DType::bf16, m), {0, 1, 3, 40});
  // The decode tile's warps split each tile's keys: 16 keys per warp at D = 128 (and 96), two
  // warps at D = 256. Causal rows that stop inside a tile leave some warps' slices fully masked.
  for (std::int64_t d : {128, 256})
    for (auto [nq, nk] : std::vector<std::pair<int, int>>{{1, 100}, {3, 200}})
      add(make(2, 8, 2, nq, nk, d, DType::f16, Mask::causal_top_left), {1, 3});
  // Chunked prefill as the benchmark runs it (Nq = 128, bottom-right), at a test's size, and at
  // D = 256, whose prefill tile's partial results fill the K/V buffers most tightly.
  for (std::int64_t d : {64, 128})
    add(make(1, 8, 2, 128, 1000, d, DType::f16, Mask::causal_bottom_right, Layout::bshd), {0, 1, 4, 13});
  add(make(1, 8, 2, 128, 1000, 256, DType::f16, Mask::causal_bottom_right, Layout::bshd), {1, 4});
  // The combine kernel past its first reads (kAhead kGroups splits: 16 at D = 256, 40 at
  // D = 96, 64 at D = 64, 128 at D = 32) and at kMaxSplits, most splits empty.
  for (std::int64_t d : {32, 64, 96, 256})
    add(make(1, 8, 2, 1, 777, d, DType::bf16, Mask::none), {200, 256});
  // Every head-dim bucket of the tensor-core steps, padded ones included.
  for (std::int64_t d : {16, 32, 40, 64, 80, 96, 200, 256})
    add(make(1, 8, 2, 1, 777, d, DType::bf16, Mask::none), {0, 1, 6});
  // Strides: a packed QKV buffer (Hq = Hkv, Nq = Nk) and the BHSD layout.
  add(make(2, 4, 4, 70, 70, 64, DType::f16, Mask::causal_bottom_right, Layout::packed_qkv), {1, 3});
  add(make(2, 32, 8, 1, 2000, 128, DType::bf16, Mask::none, Layout::bhsd), {0, 7});
  // Explicit scale, no LSE, no keys at all (every split empty: O = 0, LSE = -inf).
  {
    Problem p = make(2, 8, 2, 1, 500, 64, DType::bf16, Mask::none);
    p.softmax_scale = 0.3f;
    add(p, {1, 4});
    p.with_lse = false;
    add(p, {1, 4});
  }
  add(make(1, 8, 2, 3, 0, 64, DType::bf16, Mask::none), {1, 4});
  // Many (batch, KV head) pairs with a few splits each, and MQA (G = 32: the prefill tile at Nq = 1).
  add(make(64, 8, 2, 1, 300, 64, DType::f16, Mask::none, Layout::bshd), {0, 2});
  add(make(2, 32, 1, 1, 3000, 128, DType::bf16, Mask::none, Layout::bshd), {0, 1, 9});
  return cases;
}

class SplitKv : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitKv, MatchesFloat64Reference) {
  REQUIRE_DEVICE();
  const SplitCase& c = GetParam();
  const Problem& p = c.problem;
  const HostInputs in = make_random_inputs(p, seed_from_name(p.name()));
  const reference::Result ref = reference::run(in);
  DeviceCase device_case(in);
  DeviceCase::Output out;
  if (c.splits > 0) {
    const step10::ScopedNumSplits forced(c.splits);
    out = run_once(device_case, kStep10);
  } else {
    out = run_once(device_case, kStep10);
  }
  EXPECT_TRUE(out.guards_intact) << "a write landed outside a buffer";
  EXPECT_EQ(out.unwritten, 0) << "output elements left unwritten (still NaN from the poison)";
  const Verdict v = verify_output(p, ref.o, ref.lse, out.o, out.lse);
  EXPECT_EQ(v.failure, "") << c.name();
  const DeviceCase::Output base = run_once(device_case, kStep01);
  const Verdict vb = verify_output(p, ref.o, ref.lse, base.o, base.lse);
  EXPECT_EQ(check_against_baseline(v.o, vb.o, p.dtype), "") << c.name();
}

INSTANTIATE_TEST_SUITE_P(Matrix, SplitKv, ::testing::ValuesIn(split_cases()),
                         [](const ::testing::TestParamInfo<SplitCase>& info) {
                           return testing::test_name(info.param.name());
                         });

// ---------------------------------------------------------------------------- GPU: huge logits

// bf16, Q = K = 133120 (exact), V[j, :] = j - 64 over 128 keys, GQA 4: every logit is
// 133120^2 * 64 / 8 = 141767475200 and O = mean(V) = -0.5 in every row. Each split's maximum
// is the same huge number, so a combine that scaled before subtracting (exp2(m_s * c - m * c))
// would lose everything to the rounding of m * c; subtracting first gives weights of exactly 1.
TEST(SplitKvHugeLogits, EqualLogits1e11AtEverySplitCount) {
  REQUIRE_DEVICE();
  const Problem p = make(1, 4, 1, 1, 128, 64, DType::bf16, Mask::none);
  const HostInputs in = make_inputs(p, [&](int t, std::int64_t c) {
    return t < 2 ? 133120.0f : static_cast<float>(c / p.head_dim % p.seqlen_k - 64);
  });
  DeviceCase device_case(in);
  const double want_lse = 141767475200.0 + std::log(128.0);
  const double lse_tol = std::max(kLseMaxAbs, (p.head_dim + 4) * std::ldexp(want_lse, -24));
  for (int splits : {1, 2, 3, 8, 17}) {
    const step10::ScopedNumSplits forced(splits);
    const DeviceCase::Output out = run_once(device_case, kStep10);
    for (std::size_t e = 0; e < out.o.size(); ++e)
      ASSERT_NEAR(out.o[e], -0.5, tolerance(p.dtype).max_abs) << splits << " splits, O element " << e;
    for (std::size_t r = 0; r < out.lse.size(); ++r)
      ASSERT_NEAR(out.lse[r], want_lse, lse_tol) << splits << " splits, LSE row " << r;
  }
}

// Integer scores times a scale of 1e8 (logits near 1e10), both masks: only the keys that tie
// for the row maximum weigh, and they fall in different splits; against the reference.
TEST(SplitKvHugeLogits, IntegerScoresHugeScaleAtEverySplitCount) {
  REQUIRE_DEVICE();
  for (Mask m : {Mask::none, Mask::causal_bottom_right, Mask::causal_top_left}) {
    Problem p = make(2, 8, 2, 3, 300, 64, DType::bf16, m, Layout::bshd);
    p.softmax_scale = 1e8f;
    const HostInputs random = make_random_inputs(p, seed_from_name(p.name()));
    const HostInputs in = make_inputs(p, [&](int tensor, std::int64_t c) {
      const std::vector<double>& r = tensor == 0 ? random.q : tensor == 1 ? random.k : random.v;
      const double x = r[static_cast<std::size_t>(c)];
      return static_cast<float>(tensor < 2 ? std::round(2.0 * x) : x);
    });
    const reference::Result ref = reference::run(in);
    DeviceCase device_case(in);
    for (int splits : {1, 2, 5, 40}) {
      const step10::ScopedNumSplits forced(splits);
      const DeviceCase::Output out = run_once(device_case, kStep10);
      Problem o_only = p;
      o_only.with_lse = false;
      EXPECT_EQ(verify_output(o_only, ref.o, ref.lse, out.o, out.lse).failure, "") << splits << " splits, " << p.name();
      for (std::size_t i = 0; i < ref.lse.size(); ++i) {
        const double tol = std::max(kLseMaxAbs, (p.head_dim + 4) * std::ldexp(std::fabs(ref.lse[i]), -24));
        ASSERT_TRUE(ref.lse[i] == out.lse[i] || std::fabs(out.lse[i] - ref.lse[i]) <= tol)
            << splits << " splits, " << p.name() << ": LSE[" << i << "] = " << out.lse[i] << ", reference " << ref.lse[i];
      }
    }
  }
}

// ---------------------------------------------------------------------------- GPU: one stream

// Calls on one stream may overlap where dependent launches are on (vendor::launch_dependent):
// a call's split kernel may start before the kernel ahead of it finishes, and must wait for it
// before it reads what that kernel writes or writes what it reads. Here call 2 reads call 1's
// O as its Q (read after write) and shares call 1's workspace, which call 1's combine reads
// while call 2's split kernel would overwrite it (write after read), at every pairing of a
// split call (split kernel and combine) and a one-split call (split kernel only).
TEST(SplitKvStream, BackToBackCallsWaitForTheKernelAhead) {
  REQUIRE_DEVICE();
  const Problem p = make(2, 8, 2, 1, 4100, 128, DType::bf16, Mask::none, Layout::bshd);
  const HostInputs in1 = make_random_inputs(p, seed_from_name(p.name()));
  const HostInputs in2 = make_random_inputs(p, seed_from_name(p.name() + "/second"));
  const reference::Result ref1 = reference::run(in1);
  DeviceCase first(in1), second(in2);
  for (auto [s1, s2] : std::vector<std::pair<int, int>>{{5, 5}, {5, 1}, {1, 5}, {1, 1}}) {
    AttentionArgs call2 = second.args();
    call2.q = first.args().o;
    for (int s : {s1, s2}) {
      const step10::ScopedNumSplits forced(s);
      first.reserve_workspace(step10::workspace_bytes(first.args()));
    }
    call2.workspace = first.args().workspace;
    call2.workspace_size = first.args().workspace_size;
    first.poison_outputs();
    second.poison_outputs();
    {
      const step10::ScopedNumSplits forced(s1);
      step10::attention_forward(first.args(), nullptr);
    }
    {
      const step10::ScopedNumSplits forced(s2);
      step10::attention_forward(call2, nullptr);
    }
    const DeviceCase::Output out1 = first.download(), out2 = second.download();
    const std::string calls = std::to_string(s1) + " then " + std::to_string(s2) + " splits";
    ASSERT_EQ(out1.unwritten, 0) << calls;
    ASSERT_EQ(out2.unwritten, 0) << calls << ": call 2 read call 1's O before it was written";
    EXPECT_EQ(verify_output(p, ref1.o, ref1.lse, out1.o, out1.lse).failure, "") << calls << ", call 1";
    // Call 2's reference: Q is call 1's O as it came back (bf16 values, exact), K and V its own.
    const HostInputs in2_seen = make_inputs(p, [&](int t, std::int64_t c) {
      const std::vector<double>& x = t == 0 ? out1.o : t == 1 ? in2.k : in2.v;
      return static_cast<float>(x[static_cast<std::size_t>(c)]);
    });
    const reference::Result ref2 = reference::run(in2_seen);
    EXPECT_EQ(verify_output(p, ref2.o, ref2.lse, out2.o, out2.lse).failure, "") << calls << ", call 2";
  }
}

}  // namespace
}  // namespace flashsteps
