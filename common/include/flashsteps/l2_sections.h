// SPDX-License-Identifier: Apache-2.0
/// @file l2_sections.h
/// @brief L2-sized sections of a causal tile order (steps 06 and 09), host side.
///
/// Heaviest first over every (batch, head) pair at once (step 05's order), the blocks running
/// together each read a different head's K and V: they span every head, whose K and V can be
/// twice the L2 or more (128 MiB at every point of the standard set), and a head's next query
/// tile comes B * Hq tiles later, when its K/V tiles have left L2. Ordering the tiles heaviest
/// first within sections of pairs whose K and V fit in L2 together, section after section,
/// keeps the K/V reads of the blocks running at once in L2 (FlashAttention-3's scheduler
/// groups heads the same way; book chapters 06 and 09 measure it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "flashsteps/attention.h"  // InvalidArgument

namespace flashsteps {

/// The K/V bytes of one section: 32 MiB, about half the H200's 60 MiB L2, which leaves room for
/// Q, O and the tiles of the next section in flight (measured on the H200 only; on AMD GPUs,
/// whose L2 and Infinity Cache differ, it is not measured); or the whole number of MiB in the
/// environment variable @p env_name, for measurements: 0, or more MiB than an int64 holds
/// bytes, is one section of every pair; unset or empty is the default.
/// @throws InvalidArgument naming @p env_name and its value when it is set to anything else
///         (a negative number, a fraction, trailing characters).
inline std::int64_t l2_section_bytes(const char* env_name) {
  constexpr std::int64_t kMiB = 1 << 20;
  if (const char* env = std::getenv(env_name); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long long mib = std::strtoll(env, &end, 10);
    if (*end != '\0' || mib < 0)
      throw InvalidArgument(std::string(env_name) + " (" + env + ") is not a whole number of MiB");
    constexpr long long kMaxMiB = std::numeric_limits<std::int64_t>::max() / kMiB;  // more is one section too
    return mib == 0 || mib > kMaxMiB ? std::numeric_limits<std::int64_t>::max() : mib * kMiB;
  }
  return 32 * kMiB;
}

/// (batch, head) pairs per section: as many K/V heads as have their K and V (2 @p seqlen_k
/// @p head_dim @p elem_bytes bytes each) fit in @p section_bytes together, at least one and at
/// most all @p batch @p heads_kv of them, times the @p heads_q / @p heads_kv query heads that
/// share each (GQA); at most @p batch @p heads_q. @p head_dim is the compiled (padded) one.
inline std::int64_t l2_section_pairs(std::int64_t batch, std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seqlen_k,
                                     int head_dim, int elem_bytes, std::int64_t section_bytes) {
  const std::int64_t kv_head_bytes = 2 * seqlen_k * head_dim * elem_bytes;
  // (Clamped to every K/V head before the product, so that it cannot overflow.)
  const std::int64_t kv_heads =
      kv_head_bytes > 0 ? std::clamp<std::int64_t>(section_bytes / kv_head_bytes, 1, batch * heads_kv) : batch * heads_kv;
  return std::min<std::int64_t>(batch * heads_q, kv_heads * (heads_q / heads_kv));
}

}  // namespace flashsteps
