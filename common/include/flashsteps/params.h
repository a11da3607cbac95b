// SPDX-License-Identifier: Apache-2.0
/// @file params.h
/// @brief The launcher plumbing of the fused kernels (steps 02 on): the kernel's parameters,
/// filled from AttentionArgs, and the size of its flat grid.
///
/// Every fused kernel takes one Params<T> by value and runs one block per (batch, head,
/// query tile), flattened into blockIdx.x (so no 65535 limit on a grid dimension). Step 01
/// keeps its own parameter struct: it is part of that lesson.
#pragma once

#include <cstdint>

#include "flashsteps/attention.h"
#include "flashsteps/dispatch.h"
#include "flashsteps/vendor.h"

namespace flashsteps {

/// The arguments of a fused attention kernel, for elements of type T (float, vendor::half_t
/// or vendor::bf16_t). Strides are in elements; the head_dim stride is 1 (validate()).
template <typename T>
struct Params {
  const T* q;  ///< [B, Hq, Nq, D] strided
  const T* k;  ///< [B, Hkv, Nk, D] strided
  const T* v;  ///< [B, Hkv, Nk, D] strided
  T* o;        ///< [B, Hq, Nq, D] strided
  float* lse;  ///< [B, Hq, Nq] contiguous, or nullptr
  ///@{
  /// Strides of Q, K, V and O in elements: batch, head, seq.
  std::int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
  ///@}
  ///@{
  /// Sizes: batch, heads of Q, heads of K and V, seqlen of Q, seqlen of K and V.
  std::int64_t B, Hq, Hkv, Nq, Nk;
  ///@}
  int D;             ///< the call's head_dim (the kernel's HEAD_DIM may be larger: zero-padded)
  int m_tiles;       ///< query tiles per (batch, head): ceil(Nq / BLOCK_M)
  float scale_log2;  ///< softmax scale * log2(e): scores are kept in base-2 units
  Mask mask;         ///< which keys each query row sees (last_visible_key())
};

/// The Params of @p args (validated) for a kernel whose blocks own @p block_m query rows.
template <typename T>
Params<T> make_params(const AttentionArgs& args, int block_m) {
  Params<T> p;
  p.q = static_cast<const T*>(args.q.data);
  p.k = static_cast<const T*>(args.k.data);
  p.v = static_cast<const T*>(args.v.data);
  p.o = static_cast<T*>(args.o.data);
  p.lse = args.lse;
  for (int d = 0; d < 3; ++d) {
    p.q_stride[d] = args.q.stride[d], p.k_stride[d] = args.k.stride[d];
    p.v_stride[d] = args.v.stride[d], p.o_stride[d] = args.o.stride[d];
  }
  p.B = args.batch(), p.Hq = args.heads_q(), p.Hkv = args.heads_kv();
  p.Nq = args.seqlen_q(), p.Nk = args.seqlen_k(), p.D = static_cast<int>(args.head_dim());
  p.m_tiles = static_cast<int>((p.Nq + block_m - 1) / block_m);
  p.scale_log2 = args.scale() * kLog2e;
  p.mask = args.mask;
  return p;
}

/// The number of blocks of the flat grid, one per (batch, head, query tile): B Hq m_tiles.
/// @throws Unsupported (exceeds_limit(), naming @p step_name) when that exceeds the
///         runtime's limit for blocks of @p threads threads (vendor::max_grid_blocks()).
template <typename T>
unsigned grid_blocks(const Params<T>& p, int threads, const char* step_name) {
  const std::int64_t blocks = p.B * p.Hq * p.m_tiles;
  if (blocks > vendor::max_grid_blocks(threads))
    throw exceeds_limit(step_name, "grid blocks (batch * heads_q * query tiles)", blocks, "the runtime's grid limit",
                        vendor::max_grid_blocks(threads));
  return static_cast<unsigned>(blocks);
}

}  // namespace flashsteps
