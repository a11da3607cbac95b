// SPDX-License-Identifier: Apache-2.0
// The float64 reference against an independent plain loop and against properties that any
// correct attention has.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "flashsteps/reference.h"
#include "flashsteps/verify.h"
#include "test_util.h"

namespace flashsteps {
namespace {

Problem make(std::int64_t B, std::int64_t Hq, std::int64_t Hkv, std::int64_t Nq, std::int64_t Nk, std::int64_t D,
             Mask mask) {
  Problem p;
  p.batch = B, p.heads_q = Hq, p.heads_kv = Hkv, p.seqlen_q = Nq, p.seqlen_k = Nk, p.head_dim = D;
  p.dtype = DType::f32, p.mask = mask;
  return p;
}

// An independent implementation: the whole S row, the mask written out from its definition
// (not last_visible_key), a softmax by division after one exp per entry.
reference::Result plain_loop(const HostInputs& in) {
  const Problem& p = in.problem;
  const double scale = p.softmax_scale ? *p.softmax_scale : 1.0 / std::sqrt(double(p.head_dim));
  reference::Result r;
  r.o.assign(in.q.size(), 0.0);
  r.lse.assign(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q), 0.0);
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      const std::int64_t hk = h * p.heads_kv / p.heads_q;
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        std::vector<double> s;
        std::vector<std::int64_t> keys;
        for (std::int64_t j = 0; j < p.seqlen_k; ++j) {
          bool visible = true;
          if (p.mask == Mask::causal_top_left) visible = j <= i;
          if (p.mask == Mask::causal_bottom_right) visible = j - (p.seqlen_k - p.seqlen_q) <= i;
          if (!visible) continue;
          double dot = 0.0;
          for (std::int64_t d = 0; d < p.head_dim; ++d)
            dot += in.q[((b * p.heads_q + h) * p.seqlen_q + i) * p.head_dim + d] *
                   in.k[((b * p.heads_kv + hk) * p.seqlen_k + j) * p.head_dim + d];
          s.push_back(dot * scale);
          keys.push_back(j);
        }
        const std::size_t row = static_cast<std::size_t>((b * p.heads_q + h) * p.seqlen_q + i);
        if (s.empty()) {
          r.lse[row] = -std::numeric_limits<double>::infinity();
          continue;
        }
        double sum = 0.0;
        for (double x : s) sum += std::exp(x);
        r.lse[row] = std::log(sum);
        for (std::size_t n = 0; n < s.size(); ++n)
          for (std::int64_t d = 0; d < p.head_dim; ++d)
            r.o[row * p.head_dim + d] += std::exp(s[n]) / sum * in.v[((b * p.heads_kv + hk) * p.seqlen_k + keys[n]) * p.head_dim + d];
      }
    }
  return r;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) && a[i] == b[i]) continue;
    m = std::max(m, std::fabs(a[i] - b[i]));
    if (std::isnan(a[i]) != std::isnan(b[i])) m = std::numeric_limits<double>::infinity();
  }
  return m;
}

class ReferenceVsPlainLoop : public ::testing::TestWithParam<Problem> {};

TEST_P(ReferenceVsPlainLoop, Agree) {
  const Problem& p = GetParam();
  const HostInputs in = make_random_inputs(p, seed_from_name(p.name()));
  const reference::Result got = reference::run(in), want = plain_loop(in);
  EXPECT_LT(max_diff(got.o, want.o), 1e-12);
  EXPECT_LT(max_diff(got.lse, want.lse), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferenceVsPlainLoop,
    ::testing::Values(make(1, 2, 2, 9, 9, 16, Mask::none), make(2, 4, 2, 7, 13, 8, Mask::causal_bottom_right),
                      make(2, 4, 2, 13, 7, 8, Mask::causal_bottom_right), make(1, 6, 3, 13, 7, 8, Mask::causal_top_left),
                      make(1, 8, 1, 5, 11, 8, Mask::causal_top_left), make(1, 1, 1, 4, 0, 8, Mask::none)),
    [](const ::testing::TestParamInfo<Problem>& info) { return testing::test_name(info.param.name()); });

TEST(ReferenceProperties, OutputIsConvexCombinationOfVisibleValues) {
  const Problem p = make(1, 2, 2, 20, 20, 8, Mask::causal_bottom_right);
  const HostInputs in = make_random_inputs(p, 7);
  const reference::Result r = reference::run(in);
  for (std::int64_t h = 0; h < p.heads_q; ++h)
    for (std::int64_t i = 0; i < p.seqlen_q; ++i)
      for (std::int64_t d = 0; d < p.head_dim; ++d) {
        double lo = INFINITY, hi = -INFINITY;
        for (std::int64_t j = 0; j <= i; ++j) {
          const double v = in.v[((h * p.seqlen_k) + j) * p.head_dim + d];
          lo = std::min(lo, v), hi = std::max(hi, v);
        }
        const double o = r.o[((h * p.seqlen_q) + i) * p.head_dim + d];
        EXPECT_GE(o, lo - 1e-12);
        EXPECT_LE(o, hi + 1e-12);
      }
}

TEST(ReferenceProperties, ZeroQueryGivesMeanOfVisibleValues) {
  const Problem p = make(1, 1, 1, 6, 10, 4, Mask::causal_bottom_right);
  HostInputs in = make_random_inputs(p, 11);
  std::fill(in.q.begin(), in.q.end(), 0.0);
  const reference::Result r = reference::run(in);
  for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
    const std::int64_t last = i + p.seqlen_k - p.seqlen_q;
    for (std::int64_t d = 0; d < p.head_dim; ++d) {
      double mean = 0.0;
      for (std::int64_t j = 0; j <= last; ++j) mean += in.v[j * p.head_dim + d];
      mean /= double(last + 1);
      EXPECT_NEAR(r.o[i * p.head_dim + d], mean, 1e-12);
    }
    EXPECT_NEAR(r.lse[i], std::log(double(last + 1)), 1e-12);  // all scores are 0
  }
}

TEST(ReferenceProperties, FullyMaskedRowsAreZeroWithMinusInfLse) {
  // Bottom-right with Nq > Nk: the first Nq - Nk rows see no key.
  const Problem p = make(1, 1, 1, 8, 3, 4, Mask::causal_bottom_right);
  const reference::Result r = reference::run(make_random_inputs(p, 3));
  for (std::int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(r.lse[i], -std::numeric_limits<double>::infinity());
    for (std::int64_t d = 0; d < p.head_dim; ++d) EXPECT_EQ(r.o[i * p.head_dim + d], 0.0);
  }
  EXPECT_TRUE(std::isfinite(r.lse[5]));
}

TEST(ReferenceProperties, GqaEqualsRepeatedKvHeads) {
  const Problem gqa = make(2, 6, 2, 9, 9, 8, Mask::none);
  const HostInputs in = make_random_inputs(gqa, 5);
  Problem mha = gqa;
  mha.heads_kv = 6;
  HostInputs rep = make_random_inputs(mha, 5);
  rep.q = in.q;
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 6; ++h)
      for (std::int64_t e = 0; e < 9 * 8; ++e) {
        rep.k[(b * 6 + h) * 72 + e] = in.k[(b * 2 + h / 3) * 72 + e];
        rep.v[(b * 6 + h) * 72 + e] = in.v[(b * 2 + h / 3) * 72 + e];
      }
  EXPECT_EQ(max_diff(reference::run(in).o, reference::run(rep).o), 0.0);
}

TEST(ReferenceProperties, RowSubsetMatchesFullRun) {
  const Problem p = make(2, 2, 1, 30, 30, 8, Mask::causal_top_left);
  const HostInputs in = make_random_inputs(p, 9);
  const reference::Result full = reference::run(in), part = reference::run(in, {0, 17, 29});
  for (std::int64_t bh = 0; bh < 4; ++bh)
    for (std::int64_t i = 0; i < 30; ++i) {
      const bool chosen = i == 0 || i == 17 || i == 29;
      const std::size_t row = static_cast<std::size_t>(bh * 30 + i);
      if (chosen)
        EXPECT_EQ(part.lse[row], full.lse[row]);
      else
        EXPECT_TRUE(std::isnan(part.lse[row]));
    }
  EXPECT_THROW(reference::run(in, {30}), InvalidArgument);
}

// The benchmark's check of the decode set: the reference of a (batch, KV head) slice is the
// whole problem's reference on those rows, and verify_slice() finds them where they are.
TEST(ReferenceProperties, SliceMatchesTheWholeProblem) {
  Problem p = make(3, 6, 2, 4, 50, 8, Mask::causal_bottom_right);
  p.layout = Layout::bshd;
  const reference::Result whole = reference::run(make_random_inputs(p, 21));
  for (std::int64_t b : {0, 2})
    for (std::int64_t hk : {0, 1}) {
      const reference::Result part = reference::run(make_random_slice(p, 21, b, hk), {0, 3});
      const Verdict v = verify_slice(p, b, hk, part.o, part.lse, whole.o, whole.lse, {0, 3});
      EXPECT_EQ(v.failure, "");
      EXPECT_EQ(v.o.max_abs, 0.0) << "batch " << b << ", KV head " << hk;
      EXPECT_EQ(v.lse.max_abs, 0.0);
      EXPECT_EQ(v.o.count, 3 * 2 * 8);  // G heads x 2 rows x D
      // Another slice's rows differ: the offsets matter.
      const Verdict other = verify_slice(p, b, 1 - hk, part.o, part.lse, whole.o, whole.lse, {0, 3});
      EXPECT_GT(other.o.max_abs, 0.0);
    }
  EXPECT_THROW(verify_slice(p, 3, 0, whole.o, whole.lse, whole.o, whole.lse), InvalidArgument);
  const Verdict a = verify_slice(p, 0, 0, whole.o, whole.lse, whole.o, whole.lse, {0});
  Verdict bad = a;
  bad.o.max_abs = 1.0, bad.failure = "O: too far; ";
  const Verdict w = worse_of(a, bad);
  EXPECT_EQ(w.o.max_abs, 1.0);
  EXPECT_EQ(w.o.count, 2 * a.o.count);
  EXPECT_EQ(w.failure, "O: too far; ");
}

}  // namespace
}  // namespace flashsteps
