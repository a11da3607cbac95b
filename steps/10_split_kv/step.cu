// SPDX-License-Identifier: Apache-2.0
// FlashSteps step 10 of the series — split-KV.   previous: 06_autotuned (07-09 are the Hopper steps) · next: (none yet)
//
// What changes against step 06:
//   - packed GQA: the G = Hq / Hkv query heads that share a KV head become rows of one tile
//     (packed row r is query row r / G of head hk G + r % G), so each K/V tile is read once
//     per group instead of once per query head
//   - split-KV (flash-decoding): the key tiles a row tile sees are cut into num_splits
//     contiguous ranges, one block each; a block writes its unnormalised O, row max m and row
//     sum l to a workspace, and combine_kernel merges the splits exactly (weights
//     exp2((m_s - m) scale log2 e), subtract first); every kernel is a dependent launch
//     (vendor::launch_dependent), so each starts while the one ahead of it finishes
//   - the decode tile's Q, K and V in the swizzled layout (tile::Swizzled): step 06's padded
//     rows straddle 128-byte lines, and the copies then reach L2 as partial-line requests
//   - split inside the block too: the decode tile's four warps share each K/V tile's keys
//     (WARPS_N), each with its own m, l and O, and the block combines them by the same rule
//   - no tuned space: one 16-row tile for decode (G Nq <= 16) and step 05's 64-row tile
//     otherwise; the split count comes from the grid and the SM count (splits.h)
// Why it is faster: at Nq = 1 attention is a streaming read of the K/V cache (2 B Hkv Nk D
// elements for 4 B Hq D FLOPs per key), so what counts is bytes read and SMs busy. Step 06
// runs B Hq blocks of 64+ rows, mostly padding, and reads each KV head Hq / Hkv times; at
// B = 1 its 32 blocks leave 100 of 132 SMs idle. Step 10 reads each KV head once and cuts the
// keys until every SM holds a block.
// On the H200 (bf16, D = 128, Hq = 32, Hkv = 8) a call at B = 1, Nk = 4096 takes 10.8 us, 12x
// faster than step 06 and 1.20x SDPA cuDNN's speed; at B = 8, Nk = 65536 it reads 4.44 TB/s.
// Every decode-set time and TB/s, beside PyTorch SDPA's, is in the chapter and the README's
// results table (results/nvidia-h200/step10-decode.json, commit 1a6db45).
// Limits: as step 06 (fp16/bf16, head_dim a multiple of 8 up to 256, 16-byte alignment); a
// split call needs workspace_bytes(args) of device scratch; at most kMaxSplits (256) splits.
// Chapter: book/steps/10_split_kv.md
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "flashsteps/dispatch.h"
#include "flashsteps/params.h"
#include "flashsteps/step.h"
#include "flashsteps/tile.h"
#include "packing.h"  // unpack_row(), split_begin(): the two index maps, shared with the book's figures
#include "splits.h"   // TileShape, SplitPlan: which tile and how many splits run a call

namespace flashsteps::step10 {

namespace {

// A block of WARPS_M x WARPS_N warps computes BLOCK_M packed rows against its split of the
// keys, BLOCK_N at a time, through STAGES shared-memory buffers of K and V (step 06's
// TileConfig, no OVERLAP). New: WARPS_N warps share each tile's keys (splits.h, TileShape).
template <int BLOCK_M_, int BLOCK_N_, int WARPS_M_, int WARPS_N_, int STAGES_, bool SWIZZLED_>
struct TileConfig {
  static constexpr int BLOCK_M = BLOCK_M_, BLOCK_N = BLOCK_N_, STAGES = STAGES_;
  static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr bool SWIZZLED = SWIZZLED_;
  static constexpr TileShape kShape{BLOCK_M, BLOCK_N, WARPS_M, WARPS_N, STAGES, SWIZZLED};
  static constexpr int kThreads = WARPS_M * WARPS_N * vendor::kWarpSize;
  static constexpr int WARP_M = BLOCK_M / WARPS_M, WARP_N = BLOCK_N / WARPS_N;  // one warp's rows and keys
  static_assert(BLOCK_M % (WARPS_M * tile::kAtomM) == 0, "BLOCK_M must give every warp a multiple of 16 rows");
  static_assert(BLOCK_N % (WARPS_N * 16) == 0, "BLOCK_N must give every warp a multiple of 16 keys (the k-step of P V)");
  static_assert(STAGES >= 2, "STAGES must be at least 2 (one K/V buffer loading, one in use)");
};
// The two shapes of splits.h as configurations.
template <int D>
using DecodeConfig = TileConfig<decode_tile(D).block_m, decode_tile(D).block_n, decode_tile(D).warps_m,
                                decode_tile(D).warps_n, decode_tile(D).stages, decode_tile(D).swizzled>;
template <int D>
using PrefillConfig = TileConfig<prefill_tile(D).block_m, prefill_tile(D).block_n, prefill_tile(D).warps_m,
                                 prefill_tile(D).warps_n, prefill_tile(D).stages, prefill_tile(D).swizzled>;

// [start:params]
// Step 06's Params plus the packing and the workspace. Rows of the workspace are packed rows:
// row (b Hkv + hk) G Nq + r holds packed row r of (b, hk), so [B Hq Nq] rows in all.
template <typename T>
struct SplitParams : Params<T> {
  std::int64_t group;        // G = Hq / Hkv: query heads per KV head
  std::int64_t packed_rows;  // G Nq: rows of one (batch, KV head); m_tiles = ceil(G Nq / BLOCK_M)
  int num_splits;            // key ranges per row tile; 1: O and LSE written directly
  float* o_part;             // [num_splits][B Hq Nq][HEAD_DIM] fp32: unnormalised sum_j P_ij V_j
  float* m_part;             // [num_splits][B Hq Nq] fp32: row max of the raw scores (-inf: none seen)
  float* l_part;             // [num_splits][B Hq Nq] fp32: row sum of exp2((S - m) scale log2 e)
};
// [end:params]

// Element offset of row @p i, column 0 of query head @p h, batch @p b of Q or O.
__device__ __forceinline__ std::int64_t row_offset(const std::int64_t (&stride)[3], std::int64_t b, std::int64_t h,
                                                   std::int64_t i) {
  return b * stride[0] + h * stride[1] + i * stride[2];
}

// a / b for a >= 0, b > 0: in 32 bits when a fits (always, in practice), else in 64.
__device__ __forceinline__ std::int64_t div_nonneg(std::int64_t a, int b) {
  return a <= 0xffffffffLL ? static_cast<std::int64_t>(static_cast<std::uint32_t>(a) / static_cast<std::uint32_t>(b))
                           : a / b;
}

// [start:kernel]
template <typename T, int HEAD_DIM, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1) split_kv_kernel(SplitParams<T> p) {
  constexpr int BLOCK_M = Cfg::BLOCK_M, BLOCK_N = Cfg::BLOCK_N, STAGES = Cfg::STAGES;
  constexpr int WARP_M = Cfg::WARP_M, WARP_N = Cfg::WARP_N, WARPS_N = Cfg::WARPS_N;
  // New: the decode tile keeps Q, K and V in the swizzled layout (tile.h: step 06's padded
  // rows split each warp's copies into partial-line requests to L2); the prefill tile does not.
  using Smem = std::conditional_t<Cfg::SWIZZLED, tile::Swizzled, tile::Padded>;
#if FLASHSTEPS_VENDOR_HIP
  static_assert(!Cfg::SWIZZLED, "AMD: tile_hip.h has no swizzled products (decode_tile() never asks)");
#endif
  constexpr int ROW = Smem::template row_elems<HEAD_DIM>();  // elements from one row to the next
  constexpr int kChunksPerRow = HEAD_DIM / tile::kChunk;  // 16-byte chunks of a row
  using SAcc = tile::Acc<WARP_M, WARP_N>;   // this warp's scores S (then P)
  using OAcc = tile::Acc<WARP_M, HEAD_DIM>; // this warp's unnormalised output O
  constexpr int kSlots = SAcc::kSlots;      // packed rows per lane
  extern __shared__ __align__(128) uint4 smem_u4[];  // 128-byte lines for the swizzled rows
  T* Q_smem = reinterpret_cast<T*>(smem_u4);        // [BLOCK_M][ROW] packed rows
  T* K_smem = Q_smem + BLOCK_M * ROW;               // [STAGES][BLOCK_N][ROW]
  T* V_smem = K_smem + STAGES * BLOCK_N * ROW;      // [STAGES][BLOCK_N][ROW]
  // Launched by launch_dependent(): this grid may start while the kernel ahead (the previous
  // call's combine, say) finishes, and waits for it here, before its first global read or write.
  vendor::wait_for_prior_grid();
  vendor::allow_dependent_launch();  // the combine may launch now; it waits for this grid's end
  const int warp = threadIdx.x / vendor::kWarpSize;
  const int warp_m = warp % Cfg::WARPS_M, warp_n = warp / Cfg::WARPS_M;  // this warp's rows, its keys of a tile

  // [start:schedule]
  // One block per (batch, KV head, row tile, split), flattened into blockIdx.x with the split
  // fastest; the rest is step 06's order (causal: heaviest row tiles first).
  // The grid has fewer than 2^31 blocks, so these indices divide in 32 bits (a 64-bit
  // division is a subroutine call, and the registers live across it spill).
  const unsigned split = blockIdx.x % static_cast<unsigned>(p.num_splits);
  const unsigned tile_id = blockIdx.x / static_cast<unsigned>(p.num_splits);
  const unsigned BH = static_cast<unsigned>(p.B * p.Hkv), m_tiles = static_cast<unsigned>(p.m_tiles);
  unsigned bh, m_tile;
  if (p.mask != Mask::none) {
    bh = tile_id % BH;
    m_tile = m_tiles - 1 - tile_id / BH;
  } else {
    bh = tile_id / m_tiles;
    m_tile = tile_id % m_tiles;
  }
  const unsigned b = bh / static_cast<unsigned>(p.Hkv), hk = bh % static_cast<unsigned>(p.Hkv);
  const std::int64_t r0 = static_cast<std::int64_t>(m_tile) * BLOCK_M;  // first packed row of the block
  // Packed row r0 + r (0 <= r < BLOCK_M) is query row i0 + (g0 + r) / G of head hk G + (g0 + r) % G.
  const int G = static_cast<int>(p.group);
  const std::int64_t i0 = div_nonneg(r0, G);
  const int g0 = static_cast<int>(r0 - i0 * G);
  // [end:schedule]
  const T* k = p.k + b * p.k_stride[0] + hk * p.k_stride[1];
  const T* v = p.v + b * p.v_stride[0] + hk * p.v_stride[1];
  // [start:split_range]
  // Step 06's early exit, on query rows r / G: tiles past the last row's last visible key are
  // skipped, tiles up to the first row's are unmasked. Of the n_tiles left, this split takes
  // the contiguous range [tile_begin, tile_end); it may be empty (more splits than tiles).
  const std::int64_t last_r = (r0 + BLOCK_M < p.packed_rows ? r0 + BLOCK_M : p.packed_rows) - 1;
  const std::int64_t last_i = unpack_row(i0, g0, static_cast<int>(last_r - r0), G).query_row;
  const std::int64_t n_tiles = (last_visible_key(p.mask, last_i, p.Nq, p.Nk) + BLOCK_N) / BLOCK_N;
  const std::int64_t n_full_tiles = (last_visible_key(p.mask, i0, p.Nq, p.Nk) + 1) / BLOCK_N;
  const std::int64_t tile_begin = split_begin(n_tiles, split, p.num_splits);
  const std::int64_t tile_end = split_begin(n_tiles, split + 1, p.num_splits);
  // [end:split_range]

  // [start:packed_q]
  // Q: packed row r0 + r is query row (r0 + r) / G of head hk G + (r0 + r) % G (unpack_row()).
  // No constant row stride, so each 16-byte copy finds its own row (once per block).
#pragma unroll
  for (int e = threadIdx.x; e < BLOCK_M * kChunksPerRow; e += Cfg::kThreads) {
    const int r = e / kChunksPerRow, c = (e % kChunksPerRow) * tile::kChunk;
    const bool in_bounds = r0 + r < p.packed_rows && c < p.D;
    const PackedRow q_row = unpack_row(i0, g0, r, G);
    const T* src = in_bounds ? p.q + row_offset(p.q_stride, b, hk * G + q_row.head, q_row.query_row) + c : p.q;
    tile::copy_16B_async(Q_smem + Smem::template offset<HEAD_DIM>(r, c), src, in_bounds);
  }
  // [end:packed_q]

  // Tile j's K and V go to buffer (j - tile_begin) % STAGES; Q rides with the first group.
  auto stage_of = [&](std::int64_t j) { return static_cast<int>((j - tile_begin) % STAGES); };
  auto load_kv = [&](std::int64_t j) {
    const int stage = stage_of(j);
    const std::int64_t n0 = j * BLOCK_N;
    // L2_LINE: the K and V rows are read whole, so L2 fetches whole 128-byte lines from DRAM
    // (on the H200, 2-4 % faster at the large decode shapes, where the call is a stream).
    tile::load_tile_async<BLOCK_N, HEAD_DIM, Cfg::kThreads, true>(K_smem + stage * BLOCK_N * ROW, k + n0 * p.k_stride[2],
                                                                  p.k_stride[2], p.Nk - n0, p.D, Smem{});
    tile::load_tile_async<BLOCK_N, HEAD_DIM, Cfg::kThreads, true>(V_smem + stage * BLOCK_N * ROW, v + n0 * p.v_stride[2],
                                                                  p.v_stride[2], p.Nk - n0, p.D, Smem{});
  };
#pragma unroll
  for (int j = 0; j < STAGES - 1; ++j) {
    if (tile_begin + j < tile_end) load_kv(tile_begin + j);
    tile::commit();
  }

  OAcc o_acc;
  o_acc.zero();
  float m_i[kSlots], l_i[kSlots];  // running max of the unscaled scores; this lane's part of the sum
#pragma unroll
  for (int s = 0; s < kSlots; ++s) m_i[s] = -INFINITY, l_i[s] = 0.0f;
  const T* Q_warp = Q_smem + warp_m * WARP_M * ROW;    // this warp's rows of Q...
  const int key0 = warp_n * WARP_N;                     // ...and its first key of every tile

  // The online softmax of one tile, as in step 06; the mask reads the query row r / G.
  auto softmax_pv = [&](std::int64_t j, SAcc& s_acc, auto masked_tag) {
    constexpr bool MASKED = decltype(masked_tag)::value;
    const std::int64_t n0 = j * BLOCK_N + key0;  // the key of this warp's column 0
    if constexpr (MASKED) {  // some key of the tile is hidden from some row
      int last_col[kSlots];
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const std::int64_t i = unpack_row(i0, g0, warp_m * WARP_M + SAcc::slot_row(s), G).query_row;
        const std::int64_t last = last_visible_key(p.mask, i, p.Nq, p.Nk) - n0;
        last_col[s] = static_cast<int>(last < -1 ? -1 : last > WARP_N ? WARP_N : last);
      }
      s_acc.for_each([&](int s, int, int col, float& x) {
        if (col > last_col[s]) x = -INFINITY;
      });
    }
    float m_new[kSlots], m_use[kSlots], alpha[kSlots];
#pragma unroll
    for (int s = 0; s < kSlots; ++s) m_new[s] = m_i[s];
    tile::row_max(s_acc, m_new);
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      m_use[s] = m_new[s] == -INFINITY ? 0.0f : m_new[s];  // no visible key yet: P = 0, no NaN
      alpha[s] = m_new[s] == -INFINITY ? 1.0f : tile::exp2_approx((m_i[s] - m_new[s]) * p.scale_log2);
      m_i[s] = m_new[s];
      l_i[s] *= alpha[s];
    }
    tile::exp2_rows(s_acc, m_use, p.scale_log2);  // s_acc now holds P (unnormalised)
    tile::row_sum(s_acc, l_i);
    bool grew = false;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) grew = grew || alpha[s] != 1.0f;
    if (tile::warp_any(grew)) tile::mul_row(o_acc, alpha);
    tile::mma_AB<HEAD_DIM, T>(o_acc, s_acc, V_smem + (stage_of(j) * BLOCK_N + key0) * ROW, Smem{});
  };
  auto kv_tile = [&](std::int64_t j, auto masked_tag) {
    tile::wait_pending<STAGES - 2>();
    __syncthreads();  // tile j is visible to all; every warp is done with tile j - 1's buffer
    if (j + STAGES - 1 < tile_end) load_kv(j + STAGES - 1);
    tile::commit();
    SAcc s_acc;
    tile::mma_ABt<HEAD_DIM>(s_acc, Q_warp, K_smem + (stage_of(j) * BLOCK_N + key0) * ROW, Smem{});
    softmax_pv(j, s_acc, masked_tag);
  };
  const std::int64_t full_end = tile_end < n_full_tiles ? tile_end : n_full_tiles;
  std::int64_t j = tile_begin;
  for (; j < full_end; ++j) kv_tile(j, std::false_type{});  // no mask arithmetic at all
  for (; j < tile_end; ++j) kv_tile(j, std::true_type{});   // the diagonal / ragged end
  tile::wait_pending<0>();  // nothing may still be landing when the block exits...
  __syncthreads();          // ...nor in the K/V buffers, which the epilogue reuses

  // [start:block_combine]
  // Every warp leaves its running max m, its row sum l and its unnormalised O in shared memory
  // (fp32, over the Q and K/V tiles, done with), and the block combines its WARPS_N warps of
  // each row like the combine kernel combines splits: m = max_w m_w, weight
  // 2^((m_w - m) scale log2 e), subtract first (0 for a warp that saw no key). With WARPS_N = 1
  // the weight is 2^0 = 1, exactly.
  float* m_w = reinterpret_cast<float*>(Q_smem);  // [WARPS_N][BLOCK_M]
  float* l_w = m_w + WARPS_N * BLOCK_M;           // [WARPS_N][BLOCK_M]
  float* o_w = l_w + WARPS_N * BLOCK_M;           // [WARPS_N][BLOCK_M][O_PITCH]
  constexpr int O_PITCH = HEAD_DIM + 4;           // rows 4 banks apart: fewer bank conflicts than HEAD_DIM
  static_assert((2 + O_PITCH) * WARPS_N * BLOCK_M * sizeof(float) <= tile_smem_bytes(Cfg::kShape, HEAD_DIM),
                "the warps' partial results must fit in the block's shared memory");
  {
    float l_row[kSlots];  // the row sums, whole (over the lanes of a row)
#pragma unroll
    for (int s = 0; s < kSlots; ++s) l_row[s] = tile::row_allreduce_sum(l_i[s]);
    const int w_row0 = warp_n * BLOCK_M + warp_m * WARP_M;  // this warp's first row in m_w, l_w, o_w
    o_acc.for_each([&](int s, int row, int col, float x) {
      o_w[(w_row0 + row) * O_PITCH + col] = x;
      if (col == 0) m_w[w_row0 + row] = m_i[s], l_w[w_row0 + row] = l_row[s];
    });
  }
  __syncthreads();
  // One thread per 8 columns of a row: combine the warps, then write the row's 8 columns.
  // Several splits: the combined O, unnormalised, with its m and l, to the workspace (a split
  // that saw no visible key writes m = -inf, l = 0, O = 0). One split: O / l and the LSE.
  for (int e = threadIdx.x; e < BLOCK_M * kChunksPerRow; e += Cfg::kThreads) {
    const int r = e / kChunksPerRow, c = (e % kChunksPerRow) * tile::kChunk;
    if (r0 + r >= p.packed_rows) continue;  // padding rows of the last row tile
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < WARPS_N; ++w) m = fmaxf(m, m_w[w * BLOCK_M + r]);
    float l = 0.0f, o[tile::kChunk] = {};
#pragma unroll
    for (int w = 0; w < WARPS_N; ++w) {
      const float m_warp = m_w[w * BLOCK_M + r];
      const float weight = m_warp == -INFINITY ? 0.0f : tile::exp2_approx((m_warp - m) * p.scale_log2);
      l += weight * l_w[w * BLOCK_M + r];
#pragma unroll
      for (int k = 0; k < tile::kChunk; ++k) o[k] += weight * o_w[(w * BLOCK_M + r) * O_PITCH + c + k];
    }
    if (p.num_splits > 1) {
      const std::int64_t ws_row = split * (p.B * p.Hq * p.Nq) + bh * p.packed_rows + r0 + r;  // workspace row
      float4* dst = reinterpret_cast<float4*>(p.o_part + ws_row * HEAD_DIM + c);
      dst[0] = make_float4(o[0], o[1], o[2], o[3]);
      dst[1] = make_float4(o[4], o[5], o[6], o[7]);
      if (c == 0) p.m_part[ws_row] = m, p.l_part[ws_row] = l;
      continue;
    }
    const PackedRow out = unpack_row(i0, g0, r, G);
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;
    if (c < p.D) {
      alignas(16) T packed[tile::kChunk];
#pragma unroll
      for (int k = 0; k < tile::kChunk; ++k) packed[k] = vendor::from_float<T>(o[k] * inv_l);
      *reinterpret_cast<uint4*>(p.o + row_offset(p.o_stride, b, hk * G + out.head, out.query_row) + c) =
          *reinterpret_cast<const uint4*>(packed);
    }
    if (c == 0 && p.lse != nullptr)
      p.lse[((b * p.Hkv + hk) * G + out.head) * p.Nq + out.query_row] =
          l > 0.0f ? (m * p.scale_log2 + log2f(l)) * 0.69314718f : -INFINITY;
  }
  // [end:block_combine]
}
// [end:kernel]

// [start:combine]
// The combine: one block per row. With m = max_s m_s and w_s = 2^((m_s - m) scale log2 e)
// (subtract first; w_s = 0 for a split that saw no key),
//     O = sum_s w_s O_s / sum_s w_s l_s,   LSE = (m scale log2 e + log2 sum_s w_s l_s) ln 2,
// exactly the softmax over all the keys (the chapter shows why). No key at all: O = 0, LSE = -inf.
// A call spends about one memory latency here up to kAhead kGroups splits (32 at head dim 128,
// one more past them): every thread first reads the O_s rows it will sum (they do not depend on
// the weights) while the first warp reads every split's m_s and l_s at once (a lane per split);
// only then do they wait for each other.
// (The first version looped over the splits with each weight waiting on the read before it:
// 0.36 us per split on the H200, 12.6 us at 32 splits, more than the split kernel's 8.4.)
constexpr int kCombineThreads = 128;
template <typename T, int HEAD_DIM>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(SplitParams<T> p) {
  constexpr int kChunksPerRow = HEAD_DIM / tile::kChunk;    // threads per split of a row
  constexpr int kGroups = kCombineThreads / kChunksPerRow;  // splits read at once
  constexpr int kAhead = 4;                                 // O_s rows a thread reads before the weights
  constexpr int kPerLane = kMaxSplits / vendor::kWarpSize;  // splits per lane of the first warp
  __shared__ float w_s[kMaxSplits];                         // the splits' weights
  __shared__ float m_l[2];                                  // the row's m and l
  __shared__ float o_g[kGroups][HEAD_DIM];                  // each group's sum of w_s O_s
  const std::int64_t rows = p.B * p.Hq * p.Nq, row = blockIdx.x;
  const int S = p.num_splits;
  vendor::wait_for_prior_grid();  // launched early (launch_dependent): the partials must be written
  vendor::allow_dependent_launch();  // the next kernel may launch; it waits for this grid's end
  // Thread (group g, chunk c) sums w_s O_s over the splits s = g, g + kGroups, ... of its
  // 8 columns (a split with no key wrote O_s = 0: weight 0 times 0).
  const int group = threadIdx.x / kChunksPerRow, c = (threadIdx.x % kChunksPerRow) * tile::kChunk;
  auto o_row = [&](int s) { return reinterpret_cast<const float4*>(p.o_part + (s * rows + row) * HEAD_DIM + c); };
  float4 ahead[kAhead][2];
#pragma unroll
  for (int a = 0; a < kAhead; ++a) {
    const int s = group + a * kGroups;
    const bool mine = group < kGroups && s < S;
    ahead[a][0] = mine ? o_row(s)[0] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    ahead[a][1] = mine ? o_row(s)[1] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  if (threadIdx.x < vendor::kWarpSize) {  // the first warp: m, the weights and l
    const int lane = threadIdx.x;
    float m_s[kPerLane], l_s[kPerLane], m = -INFINITY, l = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int s = lane + k * vendor::kWarpSize;
      m_s[k] = s < S ? p.m_part[s * rows + row] : -INFINITY;
      l_s[k] = s < S ? p.l_part[s * rows + row] : 0.0f;
      m = fmaxf(m, m_s[k]);
    }
    for (int d = vendor::kWarpSize / 2; d > 0; d /= 2) m = fmaxf(m, vendor::shfl_xor(m, d));
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {  // weight 0 for no key (m = -inf: 0 * inf = NaN)
      const float w = m_s[k] == -INFINITY ? 0.0f : tile::exp2_approx((m_s[k] - m) * p.scale_log2);
      if (lane + k * vendor::kWarpSize < S) w_s[lane + k * vendor::kWarpSize] = w;
      l += w * l_s[k];
    }
    for (int d = vendor::kWarpSize / 2; d > 0; d /= 2) l += vendor::shfl_xor(l, d);
    if (lane == 0) m_l[0] = m, m_l[1] = l;
  }
  __syncthreads();
  if (group < kGroups) {
    float o[tile::kChunk] = {};
    auto add = [&](float w, const float4& lo, const float4& hi) {
      o[0] += w * lo.x, o[1] += w * lo.y, o[2] += w * lo.z, o[3] += w * lo.w;
      o[4] += w * hi.x, o[5] += w * hi.y, o[6] += w * hi.z, o[7] += w * hi.w;
    };
#pragma unroll
    for (int a = 0; a < kAhead; ++a)
      if (group + a * kGroups < S) add(w_s[group + a * kGroups], ahead[a][0], ahead[a][1]);
#pragma unroll 4
    for (int s = group + kAhead * kGroups; s < S; s += kGroups) add(w_s[s], o_row(s)[0], o_row(s)[1]);
#pragma unroll
    for (int k = 0; k < tile::kChunk; ++k) o_g[group][c + k] = o[k];
  }
  __syncthreads();
  if (group != 0) return;
  const float m = m_l[0], l = m_l[1], inv_l = l > 0.0f ? 1.0f / l : 0.0f;
  float o[tile::kChunk] = {};
  for (int g = 0; g < kGroups; ++g)
#pragma unroll
    for (int k = 0; k < tile::kChunk; ++k) o[k] += o_g[g][c + k];
  // Workspace row -> (batch, query head, query row): row = (b Hkv + hk) G Nq + r, r = i G + g.
  const std::int64_t bhk = row / p.packed_rows, r = row % p.packed_rows;
  const std::int64_t b = bhk / p.Hkv, h = (bhk % p.Hkv) * p.group + r % p.group, i = r / p.group;
  if (c < p.D) {
    alignas(16) T out[tile::kChunk];
#pragma unroll
    for (int k = 0; k < tile::kChunk; ++k) out[k] = vendor::from_float<T>(o[k] * inv_l);
    *reinterpret_cast<uint4*>(p.o + row_offset(p.o_stride, b, h, i) + c) = *reinterpret_cast<const uint4*>(out);
  }
  if (c == 0 && p.lse != nullptr)
    p.lse[(b * p.Hq + h) * p.Nq + i] = l > 0.0f ? (m * p.scale_log2 + log2f(l)) * 0.69314718f : -INFINITY;
}
// [end:combine]

// [start:launch]
template <int HEAD_DIM, class Cfg>
void launch(const AttentionArgs& args, const SplitPlan& plan, vendor::Stream stream) {
  vendor::dispatch_dtype(args.q.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, float>) {
      SplitParams<T> p;
      static_cast<Params<T>&>(p) = make_params<T>(args, Cfg::BLOCK_M);
      p.group = plan.group, p.packed_rows = plan.packed_rows, p.num_splits = plan.num_splits;
      p.m_tiles = static_cast<int>(plan.m_tiles);
      const std::int64_t ws_rows = static_cast<std::int64_t>(plan.num_splits) * p.B * p.Hq * p.Nq;
      p.o_part = static_cast<float*>(args.workspace);
      p.m_part = plan.num_splits > 1 ? p.o_part + ws_rows * HEAD_DIM : nullptr;
      p.l_part = plan.num_splits > 1 ? p.m_part + ws_rows : nullptr;
      if (plan.blocks() > vendor::max_grid_blocks(Cfg::kThreads))
        throw exceeds_limit("step 10", "grid blocks (batch * heads_kv * row tiles * splits)", plan.blocks(),
                            "the runtime's grid limit", vendor::max_grid_blocks(Cfg::kThreads));
      constexpr std::size_t smem_bytes = tile_smem_bytes(Cfg::kShape, HEAD_DIM);
      const void* kernel = reinterpret_cast<const void*>(&split_kv_kernel<T, HEAD_DIM, Cfg>);
      vendor::set_max_dynamic_smem(kernel, smem_bytes);  // above 48 KiB needs an opt-in
      // Launched while the kernel ahead on the stream finishes, if that kernel allows it (the
      // combine does), so this launch hides behind that kernel's tail.
      vendor::launch_dependent(&split_kv_kernel<T, HEAD_DIM, Cfg>, static_cast<unsigned>(plan.blocks()),
                               Cfg::kThreads, smem_bytes, stream, p);
      FLASHSTEPS_CHECK_LAUNCH("step10::split_kv_kernel");
      if (plan.num_splits > 1) {
        const std::int64_t blocks = p.B * p.Hq * p.Nq;  // one per row
        if (blocks > vendor::max_grid_blocks(kCombineThreads))
          throw exceeds_limit("step 10", "combine blocks (batch * heads_q * seqlen_q)", blocks,
                              "the runtime's grid limit", vendor::max_grid_blocks(kCombineThreads));
        // Launched while the split kernel's last blocks run (NVIDIA sm_90+, code compiled for
        // it: vendor::dependent_launch_supported), so its launch and its first instructions
        // hide behind them; it waits for their results.
        vendor::launch_dependent(&combine_kernel<T, HEAD_DIM>, static_cast<unsigned>(blocks), kCombineThreads, 0,
                                 stream, p);
        FLASHSTEPS_CHECK_LAUNCH("step10::combine_kernel");
      }
    }
  });
}
// [end:launch]

int g_forced_splits = 0;  // ScopedNumSplits' count; 0: none

// FLASHSTEPS_NUM_SPLITS, or 0 when it is not set.
int env_num_splits() {
  const char* text = std::getenv("FLASHSTEPS_NUM_SPLITS");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 1 || value > kMaxSplits)
    throw InvalidArgument(std::string("FLASHSTEPS_NUM_SPLITS = '") + text + "': expected an integer from 1 to " +
                          std::to_string(kMaxSplits));
  return static_cast<int>(value);
}

}  // namespace

// [start:plan]
int resident_blocks_per_sm(const TileShape& tile, int head_dim) {
#if FLASHSTEPS_VENDOR_HIP
  constexpr std::size_t kSmemPerSm = 64 * 1024, kReservedPerBlock = 0;  // LDS per CU
  constexpr int kThreadsPerSm = 2048;
#else
  constexpr std::size_t kSmemPerSm = 228 * 1024, kReservedPerBlock = 1024;  // sm_80 164 KiB, sm_90 228 KiB
  constexpr int kThreadsPerSm = 2048;
#endif
  const std::size_t by_smem = kSmemPerSm / (tile_smem_bytes(tile, head_dim) + kReservedPerBlock);
  const int by_threads = kThreadsPerSm / (tile.warps() * vendor::kWarpSize);
  const int blocks = static_cast<int>(by_smem < static_cast<std::size_t>(by_threads) ? by_smem : by_threads);
  return blocks > 0 ? blocks : 1;
}

int target_blocks_per_sm(const TileShape& tile, int head_dim) {
  return tile.block_m == decode_tile(head_dim).block_m ? 1 : resident_blocks_per_sm(tile, head_dim);
}

int choose_num_splits(std::int64_t blocks_unsplit, std::int64_t key_tiles, int sm_count, int blocks_per_sm) {
  const std::int64_t slots = static_cast<std::int64_t>(sm_count) * blocks_per_sm;  // blocks in one wave
  if (blocks_unsplit <= 0 || slots <= 0 || blocks_unsplit >= slots) return 1;
  std::int64_t cap = key_tiles / kMinTilesPerSplit;
  if (cap > kMaxSplits) cap = kMaxSplits;
  if (cap <= 1) return 1;
  std::int64_t best = 1;
  double best_fill = static_cast<double>(blocks_unsplit) / static_cast<double>(slots);
  for (std::int64_t s = 2; s <= cap; ++s) {
    const double waves = static_cast<double>(blocks_unsplit * s) / static_cast<double>(slots);
    const double fill = waves / std::ceil(waves);  // busy share of the waves' blocks
    if (fill >= 0.95) return static_cast<int>(s);
    if (fill > best_fill) best = s, best_fill = fill;
  }
  return static_cast<int>(best);
}

std::int64_t SplitPlan::blocks() const { return batch_heads_kv * m_tiles * num_splits; }

SplitPlan plan_splits(const AttentionArgs& args, int sm_count, int forced) {
  SplitPlan plan;
  plan.head_dim = padded_head_dim_tc(args.head_dim());
  plan.group = args.heads_q() / args.heads_kv();
  plan.packed_rows = plan.group * args.seqlen_q();
  plan.batch_heads_kv = args.batch() * args.heads_kv();
  plan.tile = plan.packed_rows <= 16 ? decode_tile(plan.head_dim) : prefill_tile(plan.head_dim);
  plan.m_tiles = (plan.packed_rows + plan.tile.block_m - 1) / plan.tile.block_m;
  plan.key_tiles = (args.seqlen_k() + plan.tile.block_n - 1) / plan.tile.block_n;
  const int from_env = forced > 0 ? 0 : env_num_splits();
  if (forced > 0) {
    plan.num_splits = forced, plan.source = SplitSource::forced;
  } else if (from_env > 0) {
    plan.num_splits = from_env, plan.source = SplitSource::environment;
  } else {
    plan.num_splits = choose_num_splits(plan.batch_heads_kv * plan.m_tiles, plan.key_tiles, sm_count,
                                        target_blocks_per_sm(plan.tile, plan.head_dim));
    plan.source = SplitSource::heuristic;
  }
  return plan;
}

namespace {
// The SM count of the first device queried (one per process: the benchmark and the tests
// use one device); 0 without a device, which makes the heuristic choose one split.
int device_sm_count() {
  static const int sm_count = vendor::device_count() > 0 ? vendor::multiprocessor_count() : 0;
  return sm_count;
}
}  // namespace

SplitPlan plan_for_device(const AttentionArgs& args) { return plan_splits(args, device_sm_count(), g_forced_splits); }

int heuristic_num_splits(const AttentionArgs& args) {
  const SplitPlan plan = plan_splits(args, device_sm_count(), 1);  // forced: the shape alone, no environment read
  return choose_num_splits(plan.batch_heads_kv * plan.m_tiles, plan.key_tiles, device_sm_count(),
                           target_blocks_per_sm(plan.tile, plan.head_dim));
}

std::size_t workspace_bytes_for(const AttentionArgs& args, int num_splits) {
  if (num_splits <= 1) return 0;
  const std::int64_t rows = static_cast<std::int64_t>(num_splits) * args.batch() * args.heads_q() * args.seqlen_q();
  return static_cast<std::size_t>(rows * (padded_head_dim_tc(args.head_dim()) + 2)) * sizeof(float);
}

ScopedNumSplits::ScopedNumSplits(int num_splits) : previous_(g_forced_splits) {
  if (num_splits < 1 || num_splits > kMaxSplits)
    throw InvalidArgument("num_splits = " + std::to_string(num_splits) + ": expected 1 to " +
                          std::to_string(kMaxSplits));
  g_forced_splits = num_splits;
}
ScopedNumSplits::~ScopedNumSplits() { g_forced_splits = previous_; }
// [end:plan]

// The workspace of the split count attention_forward() will use (0 for one split). Invalid
// arguments report 0 here and throw in attention_forward().
std::size_t workspace_bytes(const AttentionArgs& args) {
  if (args.heads_kv() <= 0 || args.heads_q() % args.heads_kv() != 0 || is_empty(args) ||
      padded_head_dim_tc(args.head_dim()) == 0)
    return 0;
  return workspace_bytes_for(args, plan_for_device(args).num_splits);
}

StepInfo info() {
  StepInfo i{10, "split_kv", "split-KV decoding: keys split across blocks, combined by log-sum-exp; packed GQA heads"};
  i.accepts_fp32 = false, i.head_dim_multiple = 8, i.alignment_elems = 8;
  return i;
}

// [start:launcher]
void attention_forward(const AttentionArgs& args, vendor::Stream stream) {
  validate(args);
  check_tensor_core_args(args, "step 10");
  if (is_empty(args)) return;
  if (args.heads_q() > (1 << 30))  // the kernel works with G = Hq / Hkv (plus a tile's rows) in 32 bits
    throw exceeds_limit("step 10", "q.shape[1] (heads_q)", args.heads_q(), "2^30", 1 << 30);
  const SplitPlan plan = plan_for_device(args);
  const std::size_t needed = workspace_bytes_for(args, plan.num_splits);
  if (needed > 0 && (args.workspace == nullptr || args.workspace_size < needed))
    throw InvalidArgument("workspace_size = " + std::to_string(args.workspace_size) + " bytes (workspace " +
                          (args.workspace == nullptr ? "null" : "set") + "): step 10 needs " + std::to_string(needed) +
                          " bytes for " + std::to_string(plan.num_splits) + " splits (see workspace_bytes)");
  if (needed > 0 && reinterpret_cast<std::uintptr_t>(args.workspace) % 16 != 0)
    throw InvalidArgument("workspace: must be 16-byte aligned (float4 reads of the partial outputs)");
  dispatch_head_dim_tc(args.head_dim(), "step 10", [&](auto head_dim_tag) {
    constexpr int HEAD_DIM = decltype(head_dim_tag)::value;
    if (plan.packed_rows <= 16)  // the tile plan_splits() chose: decode_tile() for <= 16 rows
      launch<HEAD_DIM, DecodeConfig<HEAD_DIM>>(args, plan, stream);
    else
      launch<HEAD_DIM, PrefillConfig<HEAD_DIM>>(args, plan, stream);
  });
}
// [end:launcher]

}  // namespace flashsteps::step10
