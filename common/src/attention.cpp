// SPDX-License-Identifier: Apache-2.0
// The contract's checks, written once; every step calls validate() before any launch.
#include "flashsteps/attention.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

namespace flashsteps {

std::size_t dtype_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

const char* mask_name(Mask mask) {
  switch (mask) {
    case Mask::none: return "none";
    case Mask::causal_bottom_right: return "causal_bottom_right";
    case Mask::causal_top_left: return "causal_top_left";
  }
  return "?";
}

float AttentionArgs::scale() const {
  return softmax_scale ? *softmax_scale : 1.0f / std::sqrt(static_cast<float>(head_dim()));
}

namespace {

[[noreturn]] void fail(const std::string& message) { throw InvalidArgument(message); }

// The shortest text that reads back as @p value (1e-50, 3e+38; not 6 rounded digits).
template <typename Float>
std::string shortest_text(Float value) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

// What is wrong with a softmax scale, or "": it must be finite and positive, and
// scale * log2(e) finite in float32 (the kernels work in base 2).
std::string scale_problem(float scale) {
  if (!(std::isfinite(scale) && scale > 0.0f)) return " must be finite and positive";
  if (!std::isfinite(scale * kLog2e))
    return " is too large: scale * log2(e) must be finite in float32 (scale <= " +
           shortest_text(std::numeric_limits<float>::max() / kLog2e) + ")";
  return "";
}

template <typename A, typename B>
void require_equal(const char* field, A got, const char* other, B want) {
  if (got != want) {
    std::ostringstream s;
    s << field << " = " << got << " must equal " << other << " = " << want;
    fail(s.str());
  }
}

void check_view(const char* name, const TensorView& t) {
  static const char* dims[4] = {"batch", "heads", "seqlen", "head_dim"};
  if (t.dtype != DType::f32 && t.dtype != DType::f16 && t.dtype != DType::bf16)
    fail(std::string(name) + ".dtype = " + std::to_string(static_cast<int>(t.dtype)) + " is not a DType");
  for (int d = 0; d < 4; ++d) {
    if (t.shape[d] < 0) {
      std::ostringstream s;
      s << name << ".shape[" << d << "] (" << dims[d] << ") = " << t.shape[d] << " is negative";
      fail(s.str());
    }
    if (t.stride[d] < 0) {
      std::ostringstream s;
      s << name << ".stride[" << d << "] = " << t.stride[d] << " is negative";
      fail(s.str());
    }
  }
  if (t.empty()) return;
  if (t.shape[3] > 1 && t.stride[3] != 1) {
    std::ostringstream s;
    s << name << ".stride[3] (head_dim stride) = " << t.stride[3] << " must be 1";
    fail(s.str());
  }
  // Sizes and the largest offset must fit in 64 bits (every kernel indexes with int64).
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  bool fits = checked_product({t.shape[0], t.shape[1], t.shape[2], t.shape[3]}, kMax).has_value();
  std::int64_t last = 0;
  for (int d = 0; d < 4 && fits; ++d) {
    fits = t.shape[d] == 1 || t.stride[d] <= (kMax - last) / (t.shape[d] - 1);
    if (fits) last += (t.shape[d] - 1) * t.stride[d];
  }
  if (!fits) fail(std::string(name) + ".shape/.stride: the tensor's size or largest offset exceeds 64-bit indexing");
  if (t.data == nullptr) fail(std::string(name) + ".data is null");
  if (reinterpret_cast<std::uintptr_t>(t.data) % dtype_size(t.dtype) != 0) {
    std::ostringstream s;
    s << name << ".data is not aligned to its element size (" << dtype_size(t.dtype) << " bytes)";
    fail(s.str());
  }
}

// First and one-past-last byte a non-empty view can touch.
std::pair<std::uintptr_t, std::uintptr_t> byte_span(const TensorView& t) {
  std::int64_t last = 0;
  for (int d = 0; d < 4; ++d) last += (t.shape[d] - 1) * t.stride[d];
  const auto begin = reinterpret_cast<std::uintptr_t>(t.data);
  return {begin, begin + static_cast<std::uintptr_t>(last + 1) * dtype_size(t.dtype)};
}

// The output must be writable without races and without clobbering an input.
void check_output(const AttentionArgs& a) {
  if (a.o.empty()) return;
  for (int d = 0; d < 3; ++d)
    if (a.o.shape[d] > 1 && a.o.stride[d] == 0) {
      std::ostringstream s;
      s << "o.stride[" << d << "] = 0 with o.shape[" << d << "] = " << a.o.shape[d]
        << ": distinct outputs would be written to the same address";
      fail(s.str());
    }
  const auto [o_begin, o_end] = byte_span(a.o);
  for (auto [name, t] : {std::pair<const char*, const TensorView*>{"q", &a.q}, {"k", &a.k}, {"v", &a.v}}) {
    if (t->empty()) continue;
    const auto [begin, end] = byte_span(*t);
    if (o_begin < end && begin < o_end) fail(std::string("o overlaps ") + name + ": the output must not alias an input");
  }
}

}  // namespace

void validate(const AttentionArgs& a) {
  if (a.mask != Mask::none && a.mask != Mask::causal_bottom_right && a.mask != Mask::causal_top_left)
    fail("mask = " + std::to_string(static_cast<int>(a.mask)) + " is not a Mask");
  check_view("q", a.q);
  check_view("k", a.k);
  check_view("v", a.v);
  check_view("o", a.o);
  for (auto [name, t] : {std::pair<const char*, const TensorView*>{"k.dtype", &a.k}, {"v.dtype", &a.v}, {"o.dtype", &a.o}})
    if (t->dtype != a.q.dtype) require_equal(name, dtype_name(t->dtype), "q.dtype", std::string(dtype_name(a.q.dtype)));
  require_equal("k.shape[0] (batch)", a.k.shape[0], "q.shape[0] (batch)", a.q.shape[0]);
  require_equal("k.shape[3] (head_dim)", a.k.shape[3], "q.shape[3] (head_dim)", a.q.shape[3]);
  for (int d = 0; d < 4; ++d) {
    static const char* v_fields[4] = {"v.shape[0]", "v.shape[1]", "v.shape[2]", "v.shape[3]"};
    static const char* k_fields[4] = {"k.shape[0]", "k.shape[1]", "k.shape[2]", "k.shape[3]"};
    static const char* o_fields[4] = {"o.shape[0]", "o.shape[1]", "o.shape[2]", "o.shape[3]"};
    static const char* q_fields[4] = {"q.shape[0]", "q.shape[1]", "q.shape[2]", "q.shape[3]"};
    require_equal(v_fields[d], a.v.shape[d], k_fields[d], a.k.shape[d]);
    require_equal(o_fields[d], a.o.shape[d], q_fields[d], a.q.shape[d]);
  }
  if (a.head_dim() == 0) fail("q.shape[3] (head_dim) must be positive");
  if (a.heads_q() > 0) {
    if (a.heads_kv() == 0) fail("k.shape[1] (heads_kv) is 0 while q.shape[1] (heads_q) > 0");
    if (a.heads_q() % a.heads_kv() != 0) {
      std::ostringstream s;
      s << "k.shape[1] (heads_kv = " << a.heads_kv() << ") must divide q.shape[1] (heads_q = "
        << a.heads_q() << ") for GQA/MQA";
      fail(s.str());
    }
  }
  check_output(a);
  if (a.softmax_scale) {
    const std::string problem = scale_problem(*a.softmax_scale);
    if (!problem.empty()) fail("softmax_scale = " + shortest_text(*a.softmax_scale) + problem);
  }
}

float softmax_scale_from_double(double value, const std::string& field) {
  std::string problem;
  if (!(std::isfinite(value) && value > 0.0))
    problem = " must be finite and positive";
  else if (value > std::numeric_limits<float>::max())  // checked before the cast: out of range is UB
    problem = " overflows float32, the type the steps compute in (it would become inf)";
  else if (static_cast<float>(value) == 0.0f)
    problem = " underflows float32, the type the steps compute in (it would become 0)";
  else
    problem = scale_problem(static_cast<float>(value));
  if (!problem.empty()) fail(field + " = " + shortest_text(value) + problem);
  return static_cast<float>(value);
}

std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> sizes, std::int64_t limit) {
  for (const std::int64_t n : sizes)
    if (n == 0) return 0;  // before any division by it
  std::int64_t product = 1;
  for (const std::int64_t n : sizes) {
    if (product > limit / n) return std::nullopt;
    product *= n;
  }
  return product;
}

bool is_empty(const AttentionArgs& a) {
  return a.batch() == 0 || a.heads_q() == 0 || a.seqlen_q() == 0;
}

std::int64_t visible_pairs(Mask mask, std::int64_t seqlen_q, std::int64_t seqlen_k) {
  std::int64_t pairs = 0;
  for (std::int64_t i = 0; i < seqlen_q; ++i) pairs += last_visible_key(mask, i, seqlen_q, seqlen_k) + 1;
  return pairs;
}

double attention_flops(const AttentionArgs& a) {
  return 4.0 * static_cast<double>(a.batch() * a.heads_q() * a.head_dim()) *
         static_cast<double>(visible_pairs(a.mask, a.seqlen_q(), a.seqlen_k()));
}

double attention_min_bytes(const AttentionArgs& a) {
  const double elem = static_cast<double>(dtype_size(a.q.dtype));
  double bytes = elem * static_cast<double>(2 * a.q.numel() + a.k.numel() + a.v.numel());
  if (a.lse != nullptr) bytes += 4.0 * static_cast<double>(a.batch() * a.heads_q() * a.seqlen_q());
  return bytes;
}

}  // namespace flashsteps
