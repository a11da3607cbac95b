// SPDX-License-Identifier: Apache-2.0
// The conformance suite, written once and linked to every step (FLASHSTEPS_STEP_NS picks it).
// Every case runs the step on the GPU and asserts against the float64 reference: O and LSE
// within the dtype's tolerance, every output element written, no write outside a buffer,
// and (for steps after 01) FlashAttention's rule: at most 2x step 01's error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "flashsteps/verify.h"
#include "flashsteps/fixture.h"
#include "flashsteps/harness.h"
#include "flashsteps/reference.h"
#include "flashsteps/step.h"
#include "test_util.h"

namespace flashsteps {
namespace {

const StepFns kStep{&step::attention_forward, &step::workspace_bytes};
const StepFns kBaseline{&step01::attention_forward, &step01::workspace_bytes};

bool has_device() {
  static const bool present = vendor::device_count() > 0;
  return present;
}

#define REQUIRE_DEVICE() \
  if (!has_device()) GTEST_SKIP() << "no GPU visible to the " << vendor::kName << " runtime"

// One run of the step on @p device_case into @p out. An Unsupported the step declares
// (StepInfo) makes the test skip, any other fails it; either way @p out stays empty, and the
// caller returns. (Void: GoogleTest's skip and failure macros return from their function.)
void run_step(DeviceCase& device_case, const Problem& p, std::optional<DeviceCase::Output>& out) {
  try {
    out = run_once(device_case, kStep);
  } catch (const Unsupported& e) {
    // Only what the step declares it does not support may be skipped; anything else is a bug.
    if (declares_support(step::info(), p.dtype, p.head_dim)) FAIL() << "rejected a supported case: " << e.what();
    GTEST_SKIP() << "step " << step::info().index << " does not support this case: " << e.what();
  }
}

// Runs the step on @p in and checks everything the contract promises.
void check_step(const HostInputs& in) {
  const Problem& p = in.problem;
  const reference::Result ref = reference::run(in);
  DeviceCase device_case(in);
  std::optional<DeviceCase::Output> run;
  run_step(device_case, p, run);
  if (!run) return;
  const DeviceCase::Output& out = *run;
  EXPECT_TRUE(out.guards_intact) << "a write landed outside a buffer";
  EXPECT_EQ(out.unwritten, 0) << "output elements left unwritten (still NaN from the poison)";
  const Verdict v = verify_output(p, ref.o, ref.lse, out.o, out.lse);
  EXPECT_EQ(v.failure, "") << p.name();
  if (step::info().index != 1) {
    const DeviceCase::Output base = run_once(device_case, kBaseline);
    const Verdict vb = verify_output(p, ref.o, ref.lse, base.o, base.lse);
    EXPECT_EQ(check_against_baseline(v.o, vb.o, p.dtype), "") << p.name();
  }
}

using testing::make;

// The matrix. Sizes stay small enough for the float64 reference to run in seconds.
std::vector<Problem> conformance_cases() {
  std::vector<Problem> cases;
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  const Mask causal[] = {Mask::causal_bottom_right, Mask::causal_top_left};
  // Sequence lengths that are not a multiple of any tile.
  for (DType t : dtypes)
    for (std::int64_t n : {1, 17, 127, 1025})
      for (Mask m : {Mask::none, Mask::causal_bottom_right}) cases.push_back(make(1, 2, 2, n, n, 64, t, m));
  // Nq != Nk both ways, both causal alignments (Nq > Nk bottom-right masks whole rows).
  for (auto [nq, nk] : std::vector<std::pair<int, int>>{{17, 100}, {100, 17}, {1, 64}, {64, 1}, {130, 257}, {257, 130}})
    for (Mask m : causal) cases.push_back(make(2, 2, 2, nq, nk, 64, DType::bf16, m));
  // Head dims: the compiled ones and padded ones in every bucket (16 -> 32, 200 -> 256, ...).
  for (std::int64_t d : {16, 32, 40, 64, 80, 96, 128, 200, 256})
    for (DType t : {DType::f16, DType::bf16}) cases.push_back(make(1, 2, 2, 77, 77, d, t, Mask::causal_bottom_right));
  // GQA / MQA ratios.
  for (auto [hq, hkv] : std::vector<std::pair<int, int>>{{32, 8}, {6, 3}, {8, 1}})
    for (Mask m : {Mask::none, Mask::causal_bottom_right}) cases.push_back(make(2, hq, hkv, 65, 65, 64, DType::f16, m));
  // Layouts (strides): BHSD, BSHD, views into one packed QKV buffer.
  for (Layout l : {Layout::bhsd, Layout::bshd, Layout::packed_qkv})
    for (DType t : dtypes) cases.push_back(make(2, 4, 4, 100, 100, 64, t, Mask::causal_bottom_right, l));
  cases.push_back(make(2, 8, 2, 50, 90, 128, DType::bf16, Mask::causal_top_left, Layout::bshd));
  // Explicit softmax scales, honoured exactly.
  for (float scale : {0.05f, 0.3f})
    for (DType t : {DType::f32, DType::bf16}) {
      Problem p = make(1, 2, 2, 60, 60, 64, t, Mask::none);
      p.softmax_scale = scale;
      cases.push_back(p);
    }
  // Large logits (|S| in the hundreds): exp(S) overflows float32 unless the row max is
  // subtracted first, so a kernel that skips it fails here. (16-bit dtypes: at |S| ~ 100 the
  // float32 rounding of S alone moves O by ~1e-4, beyond the fp32 table's 1e-5.)
  for (DType t : {DType::f16, DType::bf16})
    for (Mask m : {Mask::none, Mask::causal_bottom_right}) {
      Problem p = make(1, 2, 2, 70, 70, 64, t, m);
      p.softmax_scale = 8.0f;
      cases.push_back(p);
    }
  // No keys at all (every row fully masked), and no LSE requested.
  cases.push_back(make(1, 2, 2, 5, 0, 64, DType::bf16, Mask::none));
  {
    Problem p = make(1, 2, 2, 33, 33, 64, DType::f16, Mask::causal_bottom_right);
    p.with_lse = false;
    cases.push_back(p);
  }
  // More (batch, head) pairs than one grid dimension holds (65535).
  cases.push_back(make(700, 100, 100, 3, 3, 32, DType::f16, Mask::causal_bottom_right));
  return cases;
}

class Conformance : public ::testing::TestWithParam<Problem> {};

TEST_P(Conformance, MatchesFloat64Reference) {
  REQUIRE_DEVICE();
  const Problem& p = GetParam();
  check_step(make_random_inputs(p, seed_from_name(p.name())));
}

INSTANTIATE_TEST_SUITE_P(Matrix, Conformance, ::testing::ValuesIn(conformance_cases()),
                         [](const ::testing::TestParamInfo<Problem>& info) {
                           return testing::test_name(info.param.name());
                         });

// Real activations: Q, K, V of every layer and head of all-MiniLM-L6-v2 (tests/data).
TEST(RealActivations, MiniLmEveryLayerAndHead) {
  REQUIRE_DEVICE();
  const QkvFixture fixture = load_qkv_fixture(default_fixture_path());
  check_step(fixture_inputs(fixture, DType::f16));
  check_step(fixture_inputs(fixture, DType::bf16));
}

// Huge logits. The online softmax must subtract the row max before it scales (tile.h says
// why): exp2(S * scale * log2(e) - m * scale * log2(e)) in one FFMA subtracts a float32
// rounding of m * scale * log2(e) that is off by up to half an ulp of itself, which is 128 at
// a logit of 2^31 / log2(e) ~ 1.5e9, and 2^128 overflows. These inputs have exact outputs.

// LSE is float32, and so is the score it is made of: S is a float32 sum of head_dim
// products, whose rounding error is bounded by about head_dim * 2^-24 * |S| (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., section 3.1), and the scale, the
// running max and the log add a few roundings more. So beyond |LSE| ~ 1e3 the absolute limit
// kLseMaxAbs gives way to (head_dim + 4) units of 2^-24 relative.
double lse_limit(double ref, std::int64_t head_dim) {
  return std::max(kLseMaxAbs, static_cast<double>(head_dim + 4) * std::ldexp(std::fabs(ref), -24));
}

// Runs the step on @p in; expects O[b, h, n, d] == expected_o(n) within the dtype's
// tolerance and LSE[b, h, n] == expected_lse(n) within lse_limit().
template <typename OFn, typename LseFn>
void check_exact(const HostInputs& in, OFn expected_o, LseFn expected_lse) {
  const Problem& p = in.problem;
  DeviceCase device_case(in);
  std::optional<DeviceCase::Output> run;
  run_step(device_case, p, run);
  if (!run) return;
  const DeviceCase::Output& out = *run;
  const double tol = tolerance(p.dtype).max_abs;
  int reported = 0;
  const std::size_t rows = out.o.size() / static_cast<std::size_t>(p.head_dim);
  for (std::size_t row = 0; row < rows; ++row) {
    const std::int64_t n = static_cast<std::int64_t>(row) % p.seqlen_q;
    const double want_o = expected_o(n), want_lse = expected_lse(n);
    for (std::int64_t d = 0; d < p.head_dim; ++d) {
      const double got = out.o[row * p.head_dim + d];
      if (!(std::fabs(got - want_o) <= tol * std::max(1.0, std::fabs(want_o))) && reported++ < 5)
        ADD_FAILURE() << p.name() << ": O[row " << row << "][" << d << "] = " << got << ", expected " << want_o;
    }
    if (!p.with_lse) continue;
    const double got_lse = out.lse[row];
    if (!(std::fabs(got_lse - want_lse) <= lse_limit(want_lse, p.head_dim)) && reported++ < 5)
      ADD_FAILURE() << p.name() << ": LSE[row " << row << "] = " << got_lse << ", expected " << want_lse;
  }
}

// Row n of a canonical [B, H, N, D] tensor element c.
std::int64_t seq_index(std::int64_t c, std::int64_t seqlen, std::int64_t head_dim) { return c / head_dim % seqlen; }

TEST(HugeLogits, OneKeyLogit1e11) {
  REQUIRE_DEVICE();
  // bf16, every element 133120 (exact): logit = 133120^2 * 64 / 8 = 141767475200.
  const Problem p = make(1, 1, 1, 1, 1, 64, DType::bf16, Mask::none);
  check_exact(make_inputs(p, [](int, std::int64_t) { return 133120.0f; }),  //
              [](std::int64_t) { return 133120.0; }, [](std::int64_t) { return 141767475200.0; });
}

TEST(HugeLogits, EqualLogits1e11) {
  REQUIRE_DEVICE();
  // bf16, Q = K = 133120, V[j, :] = j - 64 over 128 keys: every logit equal, O = mean(V) = -0.5.
  const Problem p = make(1, 1, 1, 1, 128, 64, DType::bf16, Mask::none);
  auto value = [&](int t, std::int64_t c) {
    return t < 2 ? 133120.0f : static_cast<float>(seq_index(c, p.seqlen_k, p.head_dim) - 64);
  };
  check_exact(make_inputs(p, value), [](std::int64_t) { return -0.5; },
              [](std::int64_t) { return 141767475200.0 + std::log(128.0); });
}

TEST(HugeLogits, EqualLogits3e10Fp16BothMasks) {
  REQUIRE_DEVICE();
  // fp16, Q = K = 60000 (exact), V[j, :] = j - 64, Nq = Nk = 128: logit = 60000^2 * 8 = 2.88e10.
  // Without a mask O = -0.5; with the causal mask (both alignments agree when Nq = Nk) row i
  // averages V over keys 0..i: O[i, :] = i / 2 - 64.
  for (Mask m : {Mask::none, Mask::causal_bottom_right, Mask::causal_top_left}) {
    const Problem p = make(1, 2, 2, 128, 128, 64, DType::f16, m);
    auto value = [&](int t, std::int64_t c) {
      return t < 2 ? 60000.0f : static_cast<float>(seq_index(c, p.seqlen_k, p.head_dim) - 64);
    };
    const bool causal = m != Mask::none;
    check_exact(
        make_inputs(p, value), [&](std::int64_t i) { return causal ? i / 2.0 - 64.0 : -0.5; },
        [&](std::int64_t i) { return 2.88e10 + std::log(causal ? i + 1.0 : 128.0); });
  }
}

TEST(HugeLogits, EqualLogits2e9) {
  REQUIRE_DEVICE();
  // bf16, Q = K = 16384: logit = 16384^2 * 8 = 2147483648 (2^31), where the one-FFMA form
  // still held; kept as the boundary case.
  const Problem p = make(1, 1, 1, 3, 200, 64, DType::bf16, Mask::none);
  auto value = [&](int t, std::int64_t c) {
    return t < 2 ? 16384.0f : static_cast<float>(seq_index(c, p.seqlen_k, p.head_dim) % 8);
  };
  check_exact(make_inputs(p, value), [](std::int64_t) { return (200 / 8 * 28.0) / 200.0; },
              [](std::int64_t) { return 2147483648.0 + std::log(200.0); });
}

// Any magnitude, against the float64 reference: Q and K hold small integers, so every score
// S is an integer that float32 holds exactly in any summation order, and a scale of 1e8 puts
// the logits near 1e10. Only the keys that tie for the row maximum have weight; O is their
// mean of V (which is random), LSE = max S * scale + ln(ties).
TEST(HugeLogits, IntegerScoresHugeScale) {
  REQUIRE_DEVICE();
  for (DType t : {DType::f16, DType::bf16})
    for (Mask m : {Mask::none, Mask::causal_bottom_right, Mask::causal_top_left}) {
      Problem p = make(2, 4, 2, 100, 300, 64, t, m, Layout::bshd);
      p.softmax_scale = 1e8f;
      const std::uint64_t seed = seed_from_name(p.name());
      const HostInputs random = make_random_inputs(p, seed);
      const HostInputs in = make_inputs(p, [&](int tensor, std::int64_t c) {
        const std::vector<double>& r = tensor == 0 ? random.q : tensor == 1 ? random.k : random.v;
        const double x = r[static_cast<std::size_t>(c)];
        return static_cast<float>(tensor < 2 ? std::round(2.0 * x) : x);  // integers in [-7, 7]
      });
      const reference::Result ref = reference::run(in);
      DeviceCase device_case(in);
      std::optional<DeviceCase::Output> run;
      run_step(device_case, p, run);
      if (!run) continue;
      const DeviceCase::Output& out = *run;
      Problem o_only = p;
      o_only.with_lse = false;
      EXPECT_EQ(verify_output(o_only, ref.o, ref.lse, out.o, out.lse).failure, "") << p.name();
      int reported = 0;
      for (std::size_t i = 0; i < ref.lse.size(); ++i) {
        const bool ok = ref.lse[i] == out.lse[i] || std::fabs(out.lse[i] - ref.lse[i]) <= lse_limit(ref.lse[i], p.head_dim);
        if (!ok && reported++ < 5)
          ADD_FAILURE() << p.name() << ": LSE[" << i << "] = " << out.lse[i] << ", reference " << ref.lse[i];
      }
    }
}

// The benchmark draws the decode set's inputs on the device (DeviceCase(problem, seed)) and
// checks them against make_random_slice() on the host: the two draws must agree bit for bit,
// in every dtype and layout, or the benchmark's check would compare different problems.
TEST(Harness, DeviceDrawnInputsEqualTheHostDraw) {
  REQUIRE_DEVICE();
  using testing::make;
  for (const Problem& p : {make(2, 8, 2, 3, 37, 24, DType::bf16, Mask::none, Layout::bshd),
                           make(3, 4, 4, 5, 5, 40, DType::f16, Mask::causal_bottom_right, Layout::packed_qkv),
                           make(1, 6, 3, 17, 9, 8, DType::f32, Mask::none, Layout::bhsd),
                           make(2, 32, 8, 1, 4100, 128, DType::f16, Mask::none, Layout::bshd)}) {
    const std::uint64_t seed = seed_from_name(p.name());
    const HostInputs in = make_random_inputs(p, seed);
    const DeviceCase drawn(p, seed);
    for (int b = 0; b < 3; ++b)
      EXPECT_TRUE(drawn.input(b).download() == in.buffers[b]) << p.name() << ": input buffer " << b << " differs";
  }
}

// Zero-sized problems return without a launch and without touching the outputs.
TEST(EmptyProblems, ReturnWithoutLaunch) {
  AttentionArgs a;
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) {
    t->dtype = DType::bf16;
    t->shape[0] = 0, t->shape[1] = 2, t->shape[2] = 8, t->shape[3] = 64;
  }
  EXPECT_NO_THROW(step::attention_forward(a, nullptr));  // batch 0: no data needed at all
}

// Bad inputs are rejected before any launch, with a message naming the field. These need
// no device: validation happens first, so the fake pointers are never dereferenced.
class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    std::uintptr_t address = 0x1000000;  // distinct fake addresses, never dereferenced
    for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) {
      t->data = reinterpret_cast<void*>(address += 0x1000000);
      t->dtype = DType::f16;
      t->shape[0] = 2, t->shape[1] = 8, t->shape[2] = 16, t->shape[3] = 64;
      t->stride[0] = 8 * 16 * 64, t->stride[1] = 16 * 64, t->stride[2] = 64, t->stride[3] = 1;
    }
  }
  void expect_rejected(const std::string& field) {
    try {
      step::attention_forward(a, nullptr);
      ADD_FAILURE() << "accepted bad input; expected an error naming " << field;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
  AttentionArgs a;
};

TEST_F(BadInput, HeadsNotDivisible) {
  a.k.shape[1] = a.v.shape[1] = 3;
  expect_rejected("k.shape[1]");
}
TEST_F(BadInput, NegativeSeqlen) {
  a.k.shape[2] = a.v.shape[2] = -1;
  expect_rejected("k.shape[2]");
}
TEST_F(BadInput, NullPointer) {
  a.v.data = nullptr;
  expect_rejected("v.data");
}
TEST_F(BadInput, HeadDimNotContiguous) {
  a.q.stride[3] = 2;
  expect_rejected("q.stride[3]");
}
TEST_F(BadInput, MixedDtypes) {
  a.o.dtype = DType::f32;
  expect_rejected("o.dtype");
}
TEST_F(BadInput, OutputShapeDiffers) {
  a.o.shape[2] = 15;
  expect_rejected("o.shape[2]");
}
TEST_F(BadInput, ZeroHeadDim) {
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) t->shape[3] = 0;
  expect_rejected("head_dim");
}
TEST_F(BadInput, NonPositiveScale) {
  a.softmax_scale = -1.0f;
  expect_rejected("softmax_scale");
}
TEST_F(BadInput, ScaleOverflowsInBase2) {
  a.softmax_scale = 3e38f;  // finite, but 3e38 * log2(e) is not
  expect_rejected("softmax_scale");
}
TEST_F(BadInput, HeadDimBeyondTheStep) {
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) t->shape[3] = 1000, t->stride[2] = 1000;
  expect_rejected("head_dim");
}
TEST_F(BadInput, MisalignedStride) {
  if (step::info().alignment_elems == 1) GTEST_SKIP() << "this step takes any stride";
  // Rows 132 bytes apart (not a multiple of 16 bytes); heads and batches stay 16-byte aligned.
  a.k.stride[2] = 66, a.k.stride[1] = 16 * 66 + 8, a.k.stride[0] = 8 * (16 * 66 + 8);
  expect_rejected("k.stride[2]");
}
TEST_F(BadInput, Fp32OnTensorCores) {
  if (step::info().accepts_fp32) GTEST_SKIP() << "this step takes fp32";
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) t->dtype = DType::f32;
  expect_rejected("q.dtype");
}
TEST_F(BadInput, MissingWorkspace) {
  if (step::workspace_bytes(a) == 0) GTEST_SKIP() << "this step needs no workspace";
  expect_rejected("workspace");
}
// Step 01's workspace is its N x N matrix: a caller allocates workspace_bytes() before the
// call (the Python module does), so a call the step refuses must not ask for one, and a size
// past 64 bits must be refused, not wrapped around to a small one.
TEST_F(BadInput, NoWorkspaceForAHeadDimBeyondTheStep) {
  if (step::info().index != 1) GTEST_SKIP() << "only step 01 keeps an N x N matrix";
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) t->shape[3] = 1000, t->stride[2] = 1000;
  EXPECT_EQ(step::workspace_bytes(a), 0u);
  expect_rejected("head_dim");
}
TEST_F(BadInput, WorkspacePast64BitsIsRefused) {
  if (step::info().index != 1) GTEST_SKIP() << "only step 01 keeps an N x N matrix";
  // 2^20 query heads of 2^20 rows against 2^40 keys broadcast from one row (stride 0): every
  // tensor's own size fits 64 bits, B * Hq * Nq * Nk = 2^80 does not.
  constexpr std::int64_t kRows = std::int64_t{1} << 20, kKeys = std::int64_t{1} << 40;
  for (TensorView* t : {&a.q, &a.o}) {
    t->shape[1] = t->shape[2] = kRows, t->shape[0] = 1;
    t->stride[2] = 64, t->stride[1] = 64 * kRows, t->stride[0] = 64 * kRows * kRows;
  }
  a.q.data = reinterpret_cast<void*>(std::uintptr_t{1} << 50);  // q and o 2^47 bytes each, apart
  a.o.data = reinterpret_cast<void*>(std::uintptr_t{1} << 52);
  for (TensorView* t : {&a.k, &a.v}) {
    t->shape[0] = t->shape[1] = 1, t->shape[2] = kKeys;
    t->stride[0] = t->stride[1] = t->stride[2] = 0;
  }
  for (auto call : {+[](const AttentionArgs& x) { (void)step::workspace_bytes(x); },
                    +[](const AttentionArgs& x) { step::attention_forward(x, nullptr); }}) {
    try {
      call(a);
      ADD_FAILURE() << "accepted a workspace of 2^82 bytes";
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("B * Hq * Nq * Nk = 1 * 1048576 * 1048576 * 1099511627776"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace flashsteps
