// SPDX-License-Identifier: Apache-2.0
// The contract without a GPU: validation messages, masks, FLOP counts, layouts, the problem
// set, comparisons and host dtype conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "flashsteps/attention.h"
#include "flashsteps/compare.h"
#include "flashsteps/dispatch.h"
#include "flashsteps/host_dtype.h"
#include "flashsteps/problem.h"

namespace flashsteps {
namespace {

AttentionArgs valid_args() {
  AttentionArgs a;
  std::uintptr_t address = 0x1000000;  // distinct, far-apart fake device addresses: never dereferenced
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) {
    t->data = reinterpret_cast<void*>(address += 0x1000000);
    t->dtype = DType::bf16;
    t->shape[0] = 2, t->shape[1] = 8, t->shape[2] = 16, t->shape[3] = 64;
    t->stride[0] = 8 * 16 * 64, t->stride[1] = 16 * 64, t->stride[2] = 64, t->stride[3] = 1;
  }
  return a;
}

std::string error_of(const AttentionArgs& a) {
  try {
    validate(a);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(Validate, AcceptsAValidCall) { EXPECT_EQ(error_of(valid_args()), ""); }

TEST(Validate, NamesTheOffendingField) {
  struct Case {
    const char* field;
    void (*mutate)(AttentionArgs&);
  } cases[] = {
      {"k.shape[1] (heads_kv = 3)", [](AttentionArgs& a) { a.k.shape[1] = a.v.shape[1] = 3; }},
      {"k.shape[1] (heads_kv) is 0", [](AttentionArgs& a) { a.k.shape[1] = a.v.shape[1] = 0; }},
      {"q.shape[2] (seqlen) = -4 is negative", [](AttentionArgs& a) { a.q.shape[2] = -4; }},
      {"v.stride[0] = -1 is negative", [](AttentionArgs& a) { a.v.stride[0] = -1; }},
      {"k.stride[3] (head_dim stride) = 3 must be 1", [](AttentionArgs& a) { a.k.stride[3] = 3; }},
      {"q.data is null", [](AttentionArgs& a) { a.q.data = nullptr; }},
      {"v.dtype = fp16 must equal q.dtype = bf16", [](AttentionArgs& a) { a.v.dtype = DType::f16; }},
      {"k.shape[0] (batch) = 3", [](AttentionArgs& a) { a.k.shape[0] = a.v.shape[0] = 3; }},
      {"k.shape[3] (head_dim) = 32", [](AttentionArgs& a) { a.k.shape[3] = a.v.shape[3] = 32; }},
      {"v.shape[2] = 9 must equal k.shape[2] = 16", [](AttentionArgs& a) { a.v.shape[2] = 9; }},
      {"o.shape[1] = 4 must equal q.shape[1] = 8", [](AttentionArgs& a) { a.o.shape[1] = 4; }},
      {"q.shape[3] (head_dim) must be positive", [](AttentionArgs& a) {
         for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) t->shape[3] = 0;
       }},
      {"softmax_scale = nan", [](AttentionArgs& a) { a.softmax_scale = std::numeric_limits<float>::quiet_NaN(); }},
      {"softmax_scale = 0", [](AttentionArgs& a) { a.softmax_scale = 0.0f; }},
      {"softmax_scale = 3e+38 is too large", [](AttentionArgs& a) { a.softmax_scale = 3e38f; }},
      {"softmax_scale = 2.3586576e+38 is too large: scale * log2(e) must be finite in float32 "
       "(scale <= 2.3586574e+38)",
       [](AttentionArgs& a) { a.softmax_scale = 2.3586576e38f; }},
      {"mask = 9 is not a Mask", [](AttentionArgs& a) { a.mask = static_cast<Mask>(9); }},
      {"k.dtype = 7 is not a DType", [](AttentionArgs& a) { a.k.dtype = static_cast<DType>(7); }},
      {"o.stride[1] = 0 with o.shape[1] = 8", [](AttentionArgs& a) { a.o.stride[1] = 0; }},
      {"o overlaps k", [](AttentionArgs& a) { a.o.data = static_cast<char*>(a.k.data) + 64; }},
      {"v.data is not aligned to its element size (2 bytes)",
       [](AttentionArgs& a) { a.v.data = static_cast<char*>(a.v.data) + 1; }},
      {"q.shape/.stride: the tensor's size or largest offset exceeds 64-bit indexing",
       [](AttentionArgs& a) { a.q.shape[2] = a.o.shape[2] = std::int64_t(1) << 62; }},
  };
  for (const Case& c : cases) {
    AttentionArgs a = valid_args();
    c.mutate(a);
    const std::string error = error_of(a);
    EXPECT_NE(error.find(c.field), std::string::npos) << "expected '" << c.field << "' in '" << error << "'";
  }
}

TEST(Validate, EmptyTensorsMayHaveNullData) {
  AttentionArgs a = valid_args();
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) t->shape[0] = 0, t->data = nullptr;
  EXPECT_EQ(error_of(a), "");
  EXPECT_TRUE(is_empty(a));
  AttentionArgs no_keys = valid_args();
  no_keys.k.shape[2] = no_keys.v.shape[2] = 0;
  EXPECT_FALSE(is_empty(no_keys));  // rows exist: they must be written as fully masked
}

// An empty K/V cache as NumPy and PyTorch export it: every stride 0 (NumPy 2) and an address
// that need not be aligned. Nothing of it is read, so neither the contract nor the
// tensor-core steps' copy rules apply to it.
TEST(Validate, EmptyTensorsHaveNoStrideOrAlignmentRule) {
  AttentionArgs a = valid_args();
  for (TensorView* t : {&a.k, &a.v}) {
    t->shape[2] = 0;
    t->stride[0] = t->stride[1] = t->stride[2] = t->stride[3] = 0;
    t->data = static_cast<char*>(t->data) + 2;  // 2-byte aligned only
  }
  EXPECT_EQ(error_of(a), "");
  EXPECT_NO_THROW(check_tensor_core_args(a, "step 04"));
  a.k.shape[2] = a.v.shape[2] = 16;  // the same views with keys: now they are read
  EXPECT_NE(error_of(a).find("k.stride[3] (head_dim stride) = 0 must be 1"), std::string::npos) << error_of(a);
}

TEST(CheckedProduct, ExactUpToTheLimitAndNothingPastIt) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(checked_product({2, 8, 16, 64}, kMax), 16384);
  EXPECT_EQ(checked_product({}, kMax), 1);
  EXPECT_EQ(checked_product({3, 0, kMax}, 10), 0);  // a zero anywhere: nothing, whatever follows
  EXPECT_EQ(checked_product({4, 5}, 20), 20);       // the limit itself is accepted
  EXPECT_EQ(checked_product({4, 5}, 19), std::nullopt);
  constexpr std::int64_t k2to40 = std::int64_t{1} << 40;
  EXPECT_EQ(checked_product({k2to40, std::int64_t{1} << 22}, kMax), std::int64_t{1} << 62);
  EXPECT_EQ(checked_product({k2to40, std::int64_t{1} << 23}, kMax), std::nullopt);  // 2^63
  EXPECT_EQ(checked_product({k2to40, k2to40}, kMax), std::nullopt);                 // 2^80 would wrap to 0
}

TEST(Masks, BothCausalAlignmentsOnARectangle) {
  // Nq = 3, Nk = 5. Bottom-right: row i sees keys 0..i+2; top-left: keys 0..i.
  for (std::int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(last_visible_key(Mask::causal_bottom_right, i, 3, 5), i + 2);
    EXPECT_EQ(last_visible_key(Mask::causal_top_left, i, 3, 5), i);
    EXPECT_EQ(last_visible_key(Mask::none, i, 3, 5), 4);
  }
  // Nq = 5, Nk = 3 bottom-right: rows 0 and 1 see nothing.
  EXPECT_EQ(last_visible_key(Mask::causal_bottom_right, 0, 5, 3), -1);
  EXPECT_EQ(last_visible_key(Mask::causal_bottom_right, 1, 5, 3), -1);
  EXPECT_EQ(last_visible_key(Mask::causal_bottom_right, 2, 5, 3), 0);
  EXPECT_EQ(last_visible_key(Mask::causal_top_left, 4, 5, 3), 2);
}

TEST(Flops, VisiblePairsAndThePapersFormula) {
  EXPECT_EQ(visible_pairs(Mask::none, 7, 9), 63);
  EXPECT_EQ(visible_pairs(Mask::causal_top_left, 4, 4), 10);
  EXPECT_EQ(visible_pairs(Mask::causal_bottom_right, 5, 3), 0 + 0 + 1 + 2 + 3);
  EXPECT_EQ(visible_pairs(Mask::causal_top_left, 5, 3), 1 + 2 + 3 + 3 + 3);
  Problem p = standard_problems(DType::bf16)[0];
  AttentionArgs a;
  a.q.shape[0] = p.batch, a.q.shape[1] = p.heads_q, a.q.shape[2] = p.seqlen_q, a.q.shape[3] = p.head_dim;
  a.k.shape[2] = p.seqlen_k;
  const double n = double(p.seqlen_q);
  EXPECT_DOUBLE_EQ(attention_flops(a), 4.0 * p.batch * p.heads_q * n * n * p.head_dim);
  a.mask = Mask::causal_bottom_right;
  // The papers' causal count N^2/2 plus the diagonal: a factor 1 + 1/N.
  EXPECT_DOUBLE_EQ(attention_flops(a), 4.0 * p.batch * p.heads_q * n * n * p.head_dim / 2 * (1 + 1 / n));
}

TEST(Problems, StandardSetFollowsThePapers) {
  const auto set = standard_problems(DType::f16);
  EXPECT_EQ(set.size(), 24u);
  for (const Problem& p : set) {
    EXPECT_EQ(p.batch * p.seqlen_q, 16384);
    EXPECT_EQ(p.heads_q * p.head_dim, 2048);
    EXPECT_EQ(p.seqlen_q, p.seqlen_k);
    EXPECT_EQ(p.dtype, DType::f16);
  }
}

TEST(Problems, BenchmarkNamesAndCheckedRows) {
  Problem p = standard_problems(DType::bf16)[0];  // N = 512, D = 64, no mask
  EXPECT_EQ(standard_name(p), "attention/bf16/hd64/n512/full");
  p.seqlen_q = p.seqlen_k = 4096, p.batch = 4, p.mask = Mask::causal_bottom_right;
  EXPECT_EQ(standard_name(p), "attention/bf16/hd64/n4096/causal");
  EXPECT_EQ(spot_check_rows(p), (std::vector<std::int64_t>{0, 1, 1365, 2731, 4095}));
  p.batch = p.heads_q = 1, p.seqlen_q = p.seqlen_k = 2048;  // 2^22 score pairs: every row
  EXPECT_TRUE(spot_check_rows(p).empty());
  p.heads_q = 2, p.seqlen_q = 2, p.seqlen_k = 1 << 22;  // two query rows: 0 and 1, each once
  EXPECT_EQ(spot_check_rows(p), (std::vector<std::int64_t>{0, 1}));
}

TEST(Layouts, StridesOfEachLayout) {
  Problem p;
  p.batch = 2, p.heads_q = 4, p.heads_kv = 2, p.seqlen_q = 5, p.seqlen_k = 7, p.head_dim = 8;
  p.layout = Layout::bshd;
  ProblemLayout l = make_layout(p);
  EXPECT_EQ(l.k.stride[0], 7 * 2 * 8);
  EXPECT_EQ(l.k.stride[1], 8);
  EXPECT_EQ(l.k.stride[2], 2 * 8);
  EXPECT_EQ(l.o.stride[2], 4 * 8);
  EXPECT_THROW({ p.layout = Layout::packed_qkv; make_layout(p); }, InvalidArgument);
  p.heads_kv = 4, p.seqlen_k = 5;
  l = make_layout(p);
  EXPECT_EQ(l.v.offset, 2 * 4 * 8);
  EXPECT_EQ(l.q.stride[2], 3 * 4 * 8);
  EXPECT_EQ(l.buffer_elems[0], 2 * 5 * 3 * 4 * 8);
}

TEST(Problems, RandomInputsAreRoundedToTheDtypeAndPlacedByTheLayout) {
  Problem p;
  p.batch = 1, p.heads_q = p.heads_kv = 2, p.seqlen_q = p.seqlen_k = 3, p.head_dim = 4;
  p.dtype = DType::bf16, p.layout = Layout::packed_qkv;
  const HostInputs in = make_random_inputs(p, 42);
  double mean_v = 0;
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t n = 0; n < 3; ++n)
      for (std::int64_t d = 0; d < 4; ++d) {
        const std::size_t c = static_cast<std::size_t>((h * 3 + n) * 4 + d);
        EXPECT_EQ(read_element(in.buffers[0].data(), in.layout.k, p.dtype, 0, h, n, d), in.k[c]);
        EXPECT_EQ(round_to(static_cast<float>(in.q[c]), DType::bf16), in.q[c]);
        mean_v += in.v[c] / 24.0;
      }
  EXPECT_GT(mean_v, 0.0);  // V carries a +0.5 offset
}

// Every published result was measured on inputs drawn by this generator: the bytes of one
// problem's inputs are pinned (FNV-1a of its three buffers, as the generator drew them when
// the first results were published), so a change of the generator cannot pass unnoticed.
TEST(Problems, RandomInputsArePinned) {
  Problem p;
  p.batch = 2, p.heads_q = 4, p.heads_kv = 2, p.seqlen_q = 3, p.seqlen_k = 37, p.head_dim = 24;
  p.layout = Layout::bshd;
  const std::pair<DType, std::uint64_t> pinned[] = {{DType::f16, 11408353571764474731ull},
                                                    {DType::bf16, 6636184021432964662ull},
                                                    {DType::f32, 17906398230808391407ull}};
  for (const auto& [dtype, want] : pinned) {
    p.dtype = dtype;
    const HostInputs in = make_random_inputs(p, seed_from_name("pinned"));
    std::uint64_t h = 1469598103934665603ull;
    for (const auto& buffer : in.buffers)
      for (unsigned char c : buffer) h = (h ^ c) * 1099511628211ull;
    EXPECT_EQ(h, want) << dtype_name(dtype);
  }
}

// A (batch, KV head) slice is the same draw as the whole problem's, bit for bit.
TEST(Problems, RandomSliceIsPartOfTheWholeDraw) {
  Problem p;
  p.batch = 3, p.heads_q = 8, p.heads_kv = 2, p.seqlen_q = 5, p.seqlen_k = 7, p.head_dim = 16;
  p.dtype = DType::f16, p.layout = Layout::bshd, p.mask = Mask::causal_bottom_right;
  const HostInputs whole = make_random_inputs(p, 99);
  const std::int64_t G = 4, Nq = 5, Nk = 7, D = 16;
  for (std::int64_t b : {0, 2})
    for (std::int64_t hk : {0, 1}) {
      const HostInputs slice = make_random_slice(p, 99, b, hk);
      const Problem& s = slice.problem;
      EXPECT_EQ(s.batch, 1);
      EXPECT_EQ(s.heads_q, G);
      EXPECT_EQ(s.heads_kv, 1);
      EXPECT_EQ(s.mask, p.mask);
      ASSERT_EQ(slice.q.size(), static_cast<std::size_t>(G * Nq * D));
      ASSERT_EQ(slice.k.size(), static_cast<std::size_t>(Nk * D));
      for (std::int64_t e = 0; e < G * Nq * D; ++e)
        ASSERT_EQ(slice.q[e], whole.q[(b * 8 + hk * G) * Nq * D + e]) << "Q, batch " << b << ", KV head " << hk;
      for (std::int64_t e = 0; e < Nk * D; ++e) {
        ASSERT_EQ(slice.k[e], whole.k[(b * 2 + hk) * Nk * D + e]) << "K, batch " << b << ", KV head " << hk;
        ASSERT_EQ(slice.v[e], whole.v[(b * 2 + hk) * Nk * D + e]) << "V, batch " << b << ", KV head " << hk;
      }
    }
  EXPECT_THROW(make_random_slice(p, 99, 3, 0), InvalidArgument);
  EXPECT_THROW(make_random_slice(p, 99, 0, 2), InvalidArgument);
  p.heads_kv = 3;
  EXPECT_THROW(make_random_slice(p, 99, 0, 0), InvalidArgument);
}

TEST(Compare, NonFiniteMismatchesAndTolerances) {
  const double inf = std::numeric_limits<double>::infinity();
  ErrorStats e = compare({1.0, -inf, 2.0}, {1.0, -inf, 2.0});
  EXPECT_EQ(e.nonfinite_mismatch, 0);
  EXPECT_EQ(e.max_abs, 0.0);
  e = compare({1.0, 2.0}, {std::nan(""), 2.0});
  EXPECT_EQ(e.nonfinite_mismatch, 1);
  EXPECT_NE(check_tolerance(e, DType::f32, "O"), "");
  e = compare({1.0, 2.0}, {1.0 + 5e-3, 2.0});  // max abs 5e-3, relative Frobenius 2.2e-3
  EXPECT_EQ(check_tolerance(e, DType::bf16, "O"), "");  // limits 3.2e-2 and 8e-3
  EXPECT_NE(check_tolerance(e, DType::f16, "O"), "");   // limits 4e-3 and 1e-3
}

TEST(Compare, BaselineRule) {
  ErrorStats base, step;
  base.max_abs = 1e-3, base.max_abs_ref = 1.0;
  step.max_abs = 2e-3;
  EXPECT_EQ(check_against_baseline(step, base, DType::bf16), "");
  step.max_abs = 2e-3 + 2.0 * std::ldexp(1.0, -8) + 1e-9;
  EXPECT_NE(check_against_baseline(step, base, DType::bf16), "");
}

TEST(HostDtype, Fp16RoundTripsEveryFiniteValue) {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float x = bits_to_float(bits, DType::f16);
    if (std::isnan(x)) continue;
    EXPECT_EQ(float_to_bits(x, DType::f16), bits);
  }
}

TEST(HostDtype, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bits(1.0f, DType::bf16), 0x3f80u);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(float_to_bits(1.0f + std::ldexp(1.0f, -8), DType::bf16), 0x3f80u);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(float_to_bits(1.0f + 3 * std::ldexp(1.0f, -8), DType::bf16), 0x3f82u);
  EXPECT_EQ(bits_to_float(0xc040u, DType::bf16), -3.0f);
  EXPECT_TRUE(std::isnan(bits_to_float(float_to_bits(std::nanf(""), DType::bf16), DType::bf16)));
}

}  // namespace
}  // namespace flashsteps
