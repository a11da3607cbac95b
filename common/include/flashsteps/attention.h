// SPDX-License-Identifier: Apache-2.0
/// @file attention.h
/// @brief The attention contract shared by every step: tensor views, masks, validation.
///
/// Every step computes, for each batch b, query head h and query row i,
///
///     S_ij = scale * Q_i . K_j                 (visible keys j only)
///     P_ij = exp(S_ij - m_i) / l_i,  m_i = max_j S_ij,  l_i = sum_j exp(S_ij - m_i)
///     O_i  = sum_j P_ij V_j
///     LSE_i = m_i + log(l_i)                   (natural log)
///
/// (Vaswani et al. 2017, "Attention Is All You Need", eq. 1; the LSE output follows
/// Dao 2023, "FlashAttention-2", Algorithm 1, line 12). The contract below is written
/// once here and enforced by validate() before any step launches anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "flashsteps/types.h"  // DType, InvalidArgument, Unsupported, DeviceError

namespace flashsteps {

/// Which keys a query row may see.
///
/// With seqlen_q = Nq and seqlen_k = Nk, key j is visible to query i when
/// - `none`:                  always;
/// - `causal_bottom_right`:   j <= i + Nk - Nq (FlashAttention's convention: the last query
///                            row sees every key; this is what plain "causal" means here);
/// - `causal_top_left`:       j <= i (PyTorch `is_causal=True`).
/// The two causal alignments agree when Nq == Nk. A row with no visible key outputs
/// O_i = 0 and LSE_i = -inf.
enum class Mask { none, causal_bottom_right, causal_top_left };

/// "none", "causal_bottom_right" or "causal_top_left".
const char* mask_name(Mask mask);

/// Index of the last visible key of query row @p i, or -1 when none is visible.
/// Every step and the reference use this one definition of the masks.
constexpr std::int64_t last_visible_key(Mask mask, std::int64_t i, std::int64_t seqlen_q,
                                        std::int64_t seqlen_k) {
  std::int64_t last = seqlen_k - 1;
  if (mask == Mask::causal_bottom_right) last = i + seqlen_k - seqlen_q;
  if (mask == Mask::causal_top_left) last = i;
  if (last > seqlen_k - 1) last = seqlen_k - 1;
  return last < -1 ? -1 : last;
}

/// A rank-4 strided view of device memory, `[batch, heads, seqlen, head_dim]`.
///
/// Strides are in elements (not bytes) and 64-bit, so BHSD (`[B, H, N, D]` contiguous),
/// BSHD (`[B, N, H, D]` contiguous) and views into a packed QKV buffer are all expressed
/// by strides alone. The head_dim stride must be 1 (every production kernel requires it;
/// it lets later steps use vector loads); other strides are free but non-negative.
struct TensorView {
  void* data = nullptr;                ///< device pointer to element [0, 0, 0, 0]
  DType dtype = DType::f32;            ///< element type
  std::int64_t shape[4] = {0, 0, 0, 0};   ///< {batch, heads, seqlen, head_dim}
  std::int64_t stride[4] = {0, 0, 0, 1};  ///< element strides of the four dimensions

  /// Number of elements of the view (product of the shape).
  std::int64_t numel() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
  /// True when some dimension is 0: nothing is read or written, so no stride, size or
  /// address rule applies (tested without the product, which need not fit 64 bits then).
  bool empty() const { return shape[0] == 0 || shape[1] == 0 || shape[2] == 0 || shape[3] == 0; }
};

/// Everything a step needs for one forward call.
///
/// Shapes: Q `[B, Hq, Nq, D]`, K and V `[B, Hkv, Nk, D]`, O `[B, Hq, Nq, D]`; the optional
/// LSE is float32 `[B, Hq, Nq]`, contiguous, natural log. Q, K, V and O share one dtype.
/// GQA/MQA: Hq must be a multiple of Hkv, and query head h reads KV head h / (Hq / Hkv).
struct AttentionArgs {
  TensorView q;  ///< queries `[B, Hq, Nq, D]`
  TensorView k;  ///< keys `[B, Hkv, Nk, D]`
  TensorView v;  ///< values `[B, Hkv, Nk, D]`
  TensorView o;  ///< output `[B, Hq, Nq, D]`, written by the step
  float* lse = nullptr;  ///< optional log-sum-exp `[B, Hq, Nq]` float32 contiguous, or nullptr
  /// Softmax scale applied to Q.K; nullopt means 1/sqrt(head_dim). An explicit value is used
  /// exactly as given (it is not re-rounded or clamped).
  std::optional<float> softmax_scale;
  Mask mask = Mask::none;  ///< which keys each query row sees
  /// Device scratch memory for steps that need it (step 01's S/P matrix, step 09's tile
  /// counter, step 10's split partials); its size must be at least the step's
  /// workspace_bytes(args).
  void* workspace = nullptr;
  std::size_t workspace_size = 0;  ///< bytes available at @ref workspace

  std::int64_t batch() const { return q.shape[0]; }     ///< B
  std::int64_t heads_q() const { return q.shape[1]; }   ///< Hq
  std::int64_t heads_kv() const { return k.shape[1]; }  ///< Hkv
  std::int64_t seqlen_q() const { return q.shape[2]; }  ///< Nq
  std::int64_t seqlen_k() const { return k.shape[2]; }  ///< Nk
  std::int64_t head_dim() const { return q.shape[3]; }  ///< D
  /// The scale actually used: the explicit one, or 1/sqrt(head_dim) in float32.
  float scale() const;
};

/// log2(e): e^x = 2^(x log2(e)). The kernels fold it into the softmax scale and use exp2, so
/// validate() requires scale * kLog2e to be finite in float32.
inline constexpr float kLog2e = 1.4426950408889634f;

/// Checks @p args against the contract above, without touching the device.
///
/// Checks: mask and dtypes are valid enumerators; shapes non-negative and consistent (K/V
/// batch, heads and seqlen agree; O matches Q; D agrees), head_dim > 0, Hkv > 0 when Hq > 0
/// and Hq % Hkv == 0, one dtype for Q/K/V/O; head_dim stride 1 and other strides
/// non-negative; sizes and largest offsets within 64-bit indexing; non-null data aligned to
/// the element size for non-empty tensors; O without zero strides over dimensions longer
/// than 1 and not overlapping Q, K or V; a finite positive explicit scale with
/// scale * log2(e) finite in float32 (scale <= 2.35e38; the kernels work in base 2).
/// @throws InvalidArgument naming the offending field.
void validate(const AttentionArgs& args);

/// A softmax scale given as a double (by Python, or a fixture's JSON header) as the float32
/// the steps compute with, held to validate()'s rule and to what the conversion loses.
/// @param value the scale as given (a multiplier of Q K^T, dimensionless).
/// @param field how the error names it (e.g. "scale").
/// @return the scale in float32, as AttentionArgs::softmax_scale takes it.
/// @throws InvalidArgument naming @p field and the value as given (its shortest round-trip
///         text) when it is not finite and positive, becomes 0 or inf in float32, or makes
///         scale * log2(e) overflow float32.
float softmax_scale_from_double(double value, const std::string& field);

/// The product of element counts, checked before it can wrap around 64 bits: a size or a byte
/// count (validate()'s tensor sizes, step 01's S/P workspace, a fixture's Q/K/V).
/// @param sizes element counts, each >= 0 (a 0 makes the product 0).
/// @param limit the largest product accepted, e.g. INT64_MAX / bytes per element.
/// @return the product, or std::nullopt when it exceeds @p limit.
std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> sizes, std::int64_t limit);

/// True when the call has nothing to compute or write (B, Hq or Nq is zero). Steps return
/// before any launch in that case. Nk == 0 is not empty: every row is then fully masked and
/// O must be written with zeros (LSE with -inf).
bool is_empty(const AttentionArgs& args);

/// Number of (query row, key) pairs visible under the mask, summed over one head (exact).
std::int64_t visible_pairs(Mask mask, std::int64_t seqlen_q, std::int64_t seqlen_k);

/// Floating-point operations of one forward call: 4 * B * Hq * D * visible_pairs
/// (two GEMMs of 2 FLOPs per multiply-add; softmax is not counted). For Nq == Nk causal the
/// visible pairs are N(N+1)/2, so this is the 4 * B * H * N^2 * D / 2 of the FlashAttention-2/3
/// papers' figures times (1 + 1/N): the diagonal is counted, as the kernels compute it.
double attention_flops(const AttentionArgs& args);

/// Fewest bytes a forward call must move through device memory: Q, K, V read once,
/// O written once (and LSE if requested). The roofline's denominator.
double attention_min_bytes(const AttentionArgs& args);

}  // namespace flashsteps
