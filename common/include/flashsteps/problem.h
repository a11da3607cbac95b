// SPDX-License-Identifier: Apache-2.0
/// @file problem.h
/// @brief One attention problem of the test matrix or the benchmark set, its memory layout,
/// and its random inputs on the host.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "flashsteps/attention.h"

namespace flashsteps {

/// How Q, K, V and O sit in memory. All three are expressed through TensorView strides.
enum class Layout {
  bhsd,        ///< each tensor contiguous `[B, H, N, D]`
  bshd,        ///< each tensor contiguous `[B, N, H, D]` (the FlashAttention / HF layout)
  packed_qkv,  ///< Q, K, V are views into one `[B, N, 3, H, D]` buffer; O is `[B, N, H, D]`.
               ///< Needs heads_q == heads_kv and seqlen_q == seqlen_k.
};

/// "bhsd", "bshd" or "packed_qkv".
const char* layout_name(Layout layout);

/// Sizes and options of one problem. Plain data; make_layout() checks it.
struct Problem {
  std::int64_t batch = 1;     ///< B
  std::int64_t heads_q = 1;   ///< Hq
  std::int64_t heads_kv = 1;  ///< Hkv (GQA when smaller than Hq)
  std::int64_t seqlen_q = 1;  ///< Nq
  std::int64_t seqlen_k = 1;  ///< Nk
  std::int64_t head_dim = 64; ///< D
  DType dtype = DType::bf16;    ///< element type of Q, K, V and O
  Mask mask = Mask::none;       ///< which keys each query row sees
  Layout layout = Layout::bhsd; ///< how the tensors sit in memory
  std::optional<float> softmax_scale;  ///< nullopt: 1/sqrt(D)
  bool with_lse = true;                ///< also request and check LSE

  /// A readable unique name, e.g. "b2_hq8_hkv2_nq17_nk33_d64_bf16_causal_bottom_right_bshd".
  std::string name() const;
};

/// Where one tensor lives: which buffer, the element offset of [0,0,0,0], and its strides.
struct Placement {
  int buffer = 0;            ///< index into ProblemLayout::buffer_elems
  std::int64_t offset = 0;   ///< elements from the buffer's start
  std::int64_t stride[4] = {0, 0, 0, 1};  ///< element strides (batch, head, seq, dim)
};

/// The buffers of a problem and how Q, K, V (inputs) and O (output) are placed in them.
/// Buffers 0..2 hold inputs (packed_qkv uses only buffer 0); O always has a buffer of its own.
struct ProblemLayout {
  Placement q;  ///< the queries
  Placement k;  ///< the keys
  Placement v;  ///< the values
  Placement o;  ///< the output
  std::int64_t buffer_elems[3] = {0, 0, 0};  ///< input buffers, in elements
  std::int64_t o_elems = 0;                  ///< the output buffer, in elements
};

/// Computes the layout of @p p. @throws InvalidArgument for a packed layout that does not
/// fit (heads or seqlen differ) or negative sizes.
ProblemLayout make_layout(const Problem& p);

/// A TensorView of @p p's tensor @p which ('q', 'k', 'v' or 'o') at @p base (element 0 of
/// its buffer). Used with host and device buffers alike.
TensorView make_view(const Problem& p, const ProblemLayout& layout, char which, void* base);

/// Inputs of one problem on the host: the element bytes in the problem's layout (what is
/// copied to the device) and float64 copies in canonical `[B, H, N, D]` order (what the
/// reference reads). Both hold the same values: the random draws rounded to the dtype.
struct HostInputs {
  Problem problem;       ///< what the inputs are for
  ProblemLayout layout;  ///< where the tensors sit in @ref buffers
  std::vector<unsigned char> buffers[3];  ///< bytes of the input buffers
  std::vector<double> q;  ///< canonical float64 copy of Q
  std::vector<double> k;  ///< canonical float64 copy of K
  std::vector<double> v;  ///< canonical float64 copy of V
};

/// The value of element @p c (canonical `[B, H, N, D]` index) of tensor @p tensor (0 = Q,
/// 1 = K, 2 = V), before rounding to the problem's dtype. Called concurrently.
using InputValue = std::function<float(int tensor, std::int64_t c)>;

/// Inputs of @p p whose elements are @p value's, rounded to the problem's dtype, in the
/// problem's layout (the tests use it for inputs with exactly known outputs).
HostInputs make_inputs(const Problem& p, const InputValue& value);

/// Draws Q, K ~ N(0, 1) and V ~ N(0.5, 1) (approximately) (the offset keeps O away from zero, so relative
/// errors mean something), rounded to the problem's dtype. N(0, 1) is approximated by the
/// centred, scaled sum of four uniforms (Irwin-Hall; tails end at +-3.46). Counter-based
/// (splitmix64 per element, random.h), so the result depends on @p seed alone, not on the
/// thread count; generated on every hardware thread (the standard set's problems hold 100 M
/// elements). DeviceCase(p, seed) (harness.h) draws the same values on the device.
HostInputs make_random_inputs(const Problem& p, std::uint64_t seed);

/// The part of make_random_inputs(@p p, @p seed) that one KV head of one batch entry sees: a
/// problem of batch 1, one KV head and the G = Hq / Hkv query heads that share it (query heads
/// @p head_kv * G ... @p head_kv * G + G - 1), the other sizes, dtype, mask and scale of @p p,
/// in the BHSD layout. Its elements are those of batch entry @p batch of the whole problem,
/// bit for bit (the generator is counter-based), drawn without the rest: what the float64
/// check of a problem too large for the host (the decode set's K/V caches) reads.
/// @throws InvalidArgument when Hkv does not divide Hq or (batch, head_kv) is outside @p p
HostInputs make_random_slice(const Problem& p, std::uint64_t seed, std::int64_t batch, std::int64_t head_kv);

/// The problem of one (batch entry, KV head) slice of @p p (make_random_slice()): batch 1, one
/// KV head, Hq / Hkv query heads, BHSD; everything else as in @p p.
/// @throws InvalidArgument when Hkv does not divide Hq
Problem slice_problem(const Problem& p);

/// The query rows a row subset means: @p rows itself, or every row 0..seqlen_q-1 when it is
/// empty (the convention of the reference, the harness download and verify_output).
std::vector<std::int64_t> query_rows(const std::vector<std::int64_t>& rows, std::int64_t seqlen_q);

/// A deterministic seed from a name, the same on every compiler and standard library, so a
/// problem's inputs are reproducible from its name alone. The hash is 64-bit FNV-1a's loop
/// (xor, multiply by 1099511628211) from the start value 1469598103934665603, which is not
/// FNV's standard offset basis (14695981039346656037): a slip kept on purpose, because every
/// published input was drawn with it (tools/sdpa_bench.py copies it too).
std::uint64_t seed_from_name(const std::string& name);

/// Reads element [b, h, n, d] of a tensor placed by @p pl in @p buffer as float.
float read_element(const void* buffer, const Placement& pl, DType dtype, std::int64_t b,
                   std::int64_t h, std::int64_t n, std::int64_t d);

/// The benchmark set of the FlashAttention papers: B * N = 16384 tokens, Hq * D = 2048,
/// N in {512, ..., 16384}, D in {64, 128}, causal off and on, for @p dtype.
std::vector<Problem> standard_problems(DType dtype);

/// The decode benchmark set (`bench_stepNN --set decode`), for @p dtype: one new token per
/// sequence against a K/V cache, Nq = 1, B in {1, 8, 32}, Nk in {1024, 4096, 16384, 65536},
/// Hq = 32 with Hkv = 8 (GQA) and Hkv = 32, D in {128, 64}, no mask; then chunked prefill,
/// Nq = 128 new tokens against Nk = 8192, causal bottom-right, B = 1, the same heads and head
/// dims. BSHD, with LSE. Its bytes (Q, K, V read, O written) over the time are the measure:
/// at Nq = 1 attention is a streaming read of K and V.
std::vector<Problem> decode_problems(DType dtype);

/// The benchmark name of a standard-set problem, e.g. "attention/bf16/hd128/n4096/causal";
/// its batch and heads follow from N and D (standard_problems()), so the name leaves them out.
/// The benchmarks seed a problem's inputs from its name (seed_from_name()).
std::string standard_name(const Problem& p);

/// The query rows the benchmarks and the timeline tool check against the float64 reference:
/// none listed (every row) when B * Hq * Nq * Nk <= 2^22, else rows 0, 1, Nq / 3,
/// 2 Nq / 3 + 1 and Nq - 1 (row 0 sees a single key under a causal mask, the last row every key).
std::vector<std::int64_t> spot_check_rows(const Problem& p);

/// The benchmark name of a decode-set problem, every size in it, e.g.
/// "decode/bf16/hd128/b8/hq32/hkv8/nq1/nk4096/full" (".../causal" for chunked prefill).
std::string decode_name(const Problem& p);

}  // namespace flashsteps
