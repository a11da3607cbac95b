// SPDX-License-Identifier: Apache-2.0
// FlashSteps step 08 of the series — warp specialisation and ping-pong (Hopper).   previous: 07_tma_wgmma · next: 09_persistent
//
// What changes against step 07 (NVIDIA sm_90a only; the new words are in tile_sm90.h):
//   - roles: warpgroup 0 is the producer, it only issues the TMA copies (one thread of it);
//     the other warpgroups, the consumers, only compute. setmaxnreg moves registers from
//     the producer (24 per thread) to the consumers (240 with two of them), which hold
//     S, P and O in registers
//   - K and V have their own rings of full / empty mbarriers, so S = Q K^T of a tile waits
//     for K alone, and a K buffer is released as soon as S is computed
//   - each consumer issues its GEMMs as one batch per tile, O += P V of the previous tile with
//     S = Q K^T of this one, then runs the softmax of this tile
//   - ping-pong: named barriers hand the tensor cores from one consumer to the next in turn,
//     so that one warpgroup's softmax runs while the other's GEMMs occupy the tensor cores
//   - the tiles, the swizzle, the softmax, the masks and the LPT order are step 07's
// Why it is faster: in step 07 every warp waits for its own GEMMs and then runs its softmax,
// and the tensor cores idle whenever all warpgroups of a block are in their softmax at once;
// here the hand-over keeps one warpgroup's GEMMs in flight during the other's softmax, and no
// computing thread spends instructions on copies.
// Measured on an NVIDIA H200 (bf16, D = 128, N = 8192, non-causal): 578.5 TFLOP/s, 1.05x step 07's
// 548.5 in the same run (results/nvidia-h200/step08.json, commit e1ddb9b). The chapter compares
// the two at every point: faster at D = 128 but short of the course's goal there, and slower
// than step 07 at D = 64.
// Limits: as step 07: fp16/bf16; head_dim a multiple of 8 up to 128 (compiled for 64 and 128,
// others zero-padded by TMA); 16-byte aligned tensors and strides; sm_90 (H100/H200) only.
// Chapter: book/steps/08_warp_specialized.md

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "flashsteps/dispatch.h"
#include "flashsteps/params.h"
#include "flashsteps/step.h"
#include "flashsteps/tile.h"
#include "flashsteps/tile_sm90.h"
#include "flashsteps/trace_sm90.h"

namespace flashsteps::step08 {

namespace {

// [start:tile_config]
// CONSUMERS warpgroups of 64 query rows (BLOCK_M = 64 x CONSUMERS) and one producer
// warpgroup, against BLOCK_N keys at a time, through STAGES shared-memory buffers of K and
// of V. Every tile is stored as HEAD_DIM / 64 chunks of [rows][64] 16-bit elements, 128-byte
// swizzled (sm90::swizzle_128b): what TMA writes and wgmma reads.
template <int HEAD_DIM_, int CONSUMERS_, int BLOCK_N_, int STAGES_>
struct TileConfig {
  static constexpr int HEAD_DIM = HEAD_DIM_, CONSUMERS = CONSUMERS_, BLOCK_N = BLOCK_N_, STAGES = STAGES_;
  static constexpr int BLOCK_M = 64 * CONSUMERS;
  static constexpr int kThreads = (CONSUMERS + 1) * sm90::kWarpgroupThreads;  // + the producer
  static constexpr int CHUNKS = HEAD_DIM / sm90::kChunkCols;
  static constexpr std::uint32_t kQBytes = BLOCK_M * HEAD_DIM * 2;   // one Q tile
  static constexpr std::uint32_t kKvBytes = BLOCK_N * HEAD_DIM * 2;  // one K (or V) tile
  // Registers per thread after setmaxnreg: the producer keeps 24 (the least it may), the
  // consumers share the rest of the 64 Ki of the SM, rounded down to a multiple of 8.
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs =
      ((65536 - kProducerRegs * sm90::kWarpgroupThreads) / (CONSUMERS * sm90::kWarpgroupThreads)) / 8 * 8 > 240
          ? 240
          : ((65536 - kProducerRegs * sm90::kWarpgroupThreads) / (CONSUMERS * sm90::kWarpgroupThreads)) / 8 * 8;
  static_assert(HEAD_DIM % 64 == 0, "HEAD_DIM must be whole 128-byte swizzle chunks");
  static_assert(BLOCK_N == 64 || BLOCK_N == 128, "BLOCK_N is a wgmma N this step instantiates (64 or 128)");
  static_assert(STAGES >= 2, "STAGES must be at least 2 (one K/V buffer loading, one in use)");
  static_assert(CONSUMERS >= 2 && CONSUMERS <= 3, "ping-pong needs two consumers; four would not fit 64 Ki registers");
  /// Q, STAGES K and V tiles, the mbarriers, and 1 KiB of slack to align the tiles to the
  /// 1024-byte period of the swizzle.
  static constexpr std::size_t smem_bytes = 1024 + kQBytes + 2 * STAGES * kKvBytes + 8 * (1 + 4 * STAGES);
};
// D = 128: two consumers (BLOCK_M = 128) and the producer, 384 threads with 168 registers each
// at launch, 24 / 240 after setmaxnreg; 64-key tiles measured no faster, three stages neither.
// D = 64: three consumers (BLOCK_M = 192, as step 07), 512 threads, 128 registers at launch,
// 24 / 160 after; with 128-key tiles a consumer's S, P and O do not fit 160 registers (ptxas
// spills), so the key tiles are 64 wide, with four stages. Measured against two consumers with
// 128-key tiles in one run (H200, bf16, N = 8192): 1.07x full, 1.07x causal (the chapter).
template <int HEAD_DIM>
using DefaultTile = std::conditional_t<HEAD_DIM == 64, TileConfig<64, 3, 64, 4>, TileConfig<HEAD_DIM, 2, 128, 2>>;
constexpr std::size_t kMaxSmem = 227 * 1024;
// [end:tile_config]

// [start:kernel]
template <typename T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    attention_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                     const __grid_constant__ CUtensorMap v_map, const Params<T> p) {
  constexpr int HEAD_DIM = Cfg::HEAD_DIM, BLOCK_M = Cfg::BLOCK_M, BLOCK_N = Cfg::BLOCK_N, STAGES = Cfg::STAGES;
  constexpr int CHUNKS = Cfg::CHUNKS, CONSUMERS = Cfg::CONSUMERS;
  extern __shared__ unsigned char smem_raw[];
  // The swizzle repeats every 1024 bytes, and the descriptors assume tiles start on it.
  unsigned char* smem = smem_raw + ((1024 - sm90::smem_u32(smem_raw) % 1024) % 1024);
  T* Q_smem = reinterpret_cast<T*>(smem);             // [CHUNKS][BLOCK_M][64] swizzled
  T* K_smem = Q_smem + BLOCK_M * HEAD_DIM;            // [STAGES][CHUNKS][BLOCK_N][64] swizzled
  T* V_smem = K_smem + STAGES * BLOCK_N * HEAD_DIM;   // [STAGES][CHUNKS][BLOCK_N][64] swizzled
  std::uint64_t* q_full = reinterpret_cast<std::uint64_t*>(V_smem + STAGES * BLOCK_N * HEAD_DIM);
  std::uint64_t* k_full = q_full + 1;         // [STAGES]: K tile landed (TMA transaction bytes)
  std::uint64_t* k_empty = k_full + STAGES;   // [STAGES]: every consumer warp done with the K buffer
  std::uint64_t* v_full = k_empty + STAGES;   // [STAGES]: V tile landed
  std::uint64_t* v_empty = v_full + STAGES;   // [STAGES]: every consumer warp done with the V buffer
  // The warpgroup index, read from lane 0 so that the compiler knows it is the same in every
  // lane: what follows from it (descriptors, barrier ids) can live in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / sm90::kWarpgroupThreads, 0);
  const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;  // warp within the warpgroup
  sm90::Tracer trace(BLOCK_M, BLOCK_N, STAGES);  // phase marks of one block, in trace builds only (trace_sm90.h)

  // [start:schedule]
  // As step 05: causal blocks heaviest first (LPT), full ones head by head.
  const std::int64_t BH = p.B * p.Hq;
  std::int64_t bh, m_tile;
  if (p.mask != Mask::none) {
    bh = blockIdx.x % BH;
    m_tile = p.m_tiles - 1 - static_cast<std::int64_t>(blockIdx.x / BH);
  } else {
    bh = blockIdx.x / p.m_tiles;
    m_tile = blockIdx.x % p.m_tiles;
  }
  const std::int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hkv);
  const std::int64_t m0 = m_tile * BLOCK_M;
  const std::int64_t last_row = (m0 + BLOCK_M < p.Nq ? m0 + BLOCK_M : p.Nq) - 1;
  const std::int64_t n_tiles = (last_visible_key(p.mask, last_row, p.Nq, p.Nk) + BLOCK_N) / BLOCK_N;
  // Each consumer's own share: the tiles its 64 rows see (none for rows past Nq), of which
  // the first wg_full_tiles need no mask. The producer loads all n_tiles; a consumer releases
  // the ones past its own unread (causal: the upper consumer of a diagonal block skips the
  // last tile; the last block of a ragged Nq has a consumer without rows).
  const int consumer = wg - 1;
  const std::int64_t wg_row0 = m0 + 64 * consumer, wg_last_row = (wg_row0 + 64 < p.Nq ? wg_row0 + 64 : p.Nq) - 1;
  const std::int64_t wg_tiles =
      wg_row0 >= p.Nq ? 0 : (last_visible_key(p.mask, wg_last_row, p.Nq, p.Nk) + BLOCK_N) / BLOCK_N;
  const std::int64_t wg_full_tiles = wg_row0 >= p.Nq ? 0 : (last_visible_key(p.mask, wg_row0, p.Nq, p.Nk) + 1) / BLOCK_N;
  // [end:schedule]

  if (threadIdx.x == 0) {
    sm90::mbarrier_init(q_full, 1);
    for (int s = 0; s < STAGES; ++s) {
      sm90::mbarrier_init(&k_full[s], 1);                // the producer's arrive.expect_tx
      sm90::mbarrier_init(&v_full[s], 1);
      sm90::mbarrier_init(&k_empty[s], 4 * CONSUMERS);  // one arrival per consumer warp
      sm90::mbarrier_init(&v_empty[s], 4 * CONSUMERS);
    }
    sm90::mbarrier_init_fence();
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them

  // [start:producer]
  // The producer: one thread issues every copy, the rest of its warpgroup leaves. Tile j's K
  // goes to K buffer j % STAGES and completes on k_full[j % STAGES] (its (j / STAGES)-th
  // phase); before the buffer is written again, the consumers have released the tile that
  // was there, STAGES tiles earlier: phase j / STAGES - 1 of k_empty. V likewise.
  if (wg == 0) {
    sm90::setmaxnreg_dec<Cfg::kProducerRegs>();
    if (warp == 0 && lane == 0) {
      const int kv_head = static_cast<int>(hk), batch = static_cast<int>(b);
      trace(sm90::TracePhase::q_load, 0);
      sm90::mbarrier_arrive_expect_tx(q_full, Cfg::kQBytes);
      for (int c = 0; c < CHUNKS; ++c)
        sm90::tma_load_4d(Q_smem + c * BLOCK_M * 64, &q_map, c * 64, static_cast<int>(m0), static_cast<int>(h),
                          batch, q_full);
      for (std::int64_t j = 0; j < n_tiles; ++j) {
        const int stage = static_cast<int>(j % STAGES), n0 = static_cast<int>(j * BLOCK_N);
        const std::uint32_t round = static_cast<std::uint32_t>(j / STAGES);
        trace(sm90::TracePhase::k_empty_wait, j);
        if (round > 0) sm90::mbarrier_wait(&k_empty[stage], (round - 1) % 2, "k_empty");
        trace(sm90::TracePhase::k_load, j);
        sm90::mbarrier_arrive_expect_tx(&k_full[stage], Cfg::kKvBytes);
        for (int c = 0; c < CHUNKS; ++c)
          sm90::tma_load_4d(K_smem + (stage * CHUNKS + c) * BLOCK_N * 64, &k_map, c * 64, n0, kv_head, batch,
                            &k_full[stage]);
        trace(sm90::TracePhase::v_empty_wait, j);
        if (round > 0) sm90::mbarrier_wait(&v_empty[stage], (round - 1) % 2, "v_empty");
        trace(sm90::TracePhase::v_load, j);
        sm90::mbarrier_arrive_expect_tx(&v_full[stage], Cfg::kKvBytes);
        for (int c = 0; c < CHUNKS; ++c)
          sm90::tma_load_4d(V_smem + (stage * CHUNKS + c) * BLOCK_N * 64, &v_map, c * 64, n0, kv_head, batch,
                            &v_full[stage]);
      }
      trace.stop();
    }
    return;
  }
  sm90::setmaxnreg_inc<Cfg::kConsumerRegs>();
  // [end:producer]

  // [start:pingpong]
  // Consumer c (0 .. CONSUMERS - 1) issues its GEMMs only after named barrier 1 + c has seen
  // consumer c - 1 (cyclically) issue its own, and then lets consumer c + 1 go: the GEMM
  // batches of the consumers enter the tensor cores in turn, each warpgroup's softmax
  // running while the next ones' GEMMs execute. Every consumer takes n_tiles + 1 turns (its
  // own tiles, its last P V, and an empty turn per tile it skips); the last consumer starts
  // the ring and does not pass on its last turn (nobody waits for it).
  auto my_turn = [&] { sm90::named_barrier_sync(1 + consumer, 2 * sm90::kWarpgroupThreads); };
  auto next_turn = [&](bool last_batch) {
    if (!(last_batch && consumer == CONSUMERS - 1))
      sm90::named_barrier_arrive(1 + (consumer + 1) % CONSUMERS, 2 * sm90::kWarpgroupThreads);
  };
  if (consumer == CONSUMERS - 1 && n_tiles > 0) sm90::named_barrier_arrive(1, 2 * sm90::kWarpgroupThreads);
  // [end:pingpong]

  // [start:online_softmax]
  // This thread's accumulator elements (PTX ISA wgmma D layout): rows r0 and r0 + 8 of the
  // warpgroup's 64, element i of a row-block of 8 columns at column 8 (i / 4) + 2 (lane % 4)
  // + i % 2, row r0 + 8 ((i / 2) % 2).
  float o_acc[HEAD_DIM / 2];
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) o_acc[i] = 0.0f;
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};  // rows r0, r0 + 8
  const int r0 = 64 * consumer + 16 * warp + lane / 4;           // row within the block
  // This warpgroup's 64 rows of Q, as the A operand of S = Q K^T.
  const std::uint64_t q_desc = sm90::desc_k_major(sm90::smem_u32(Q_smem) + 64 * consumer * 128);
  std::uint32_t p_frag[BLOCK_N / 16][4];  // P of the previous tile, the A operand of its P V
  trace(sm90::TracePhase::q_wait, 0);
  sm90::mbarrier_wait(q_full, 0, "q_full");

  // O += P V of tile j (its V buffer, waited for beforehand with wait_v), A from registers, V
  // MN-major (16 keys = 2048 bytes).
  auto wait_v = [&](std::int64_t j) {
    trace(sm90::TracePhase::v_wait, j);
    sm90::mbarrier_wait(&v_full[j % STAGES], static_cast<std::uint32_t>(j / STAGES) % 2, "v_full");
  };
  auto v_desc = [&](std::int64_t j) {
    const int stage = static_cast<int>(j % STAGES);
    return sm90::desc_mn_major(sm90::smem_u32(V_smem + stage * CHUNKS * BLOCK_N * 64), BLOCK_N * 128);
  };
  auto issue_pv = [&](std::uint64_t v) {
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk)
      sm90::wgmma_rs<HEAD_DIM, T>(o_acc, p_frag[kk], sm90::desc_advance(v, kk * 16 * 128), true);
  };
  auto release_v = [&](std::int64_t j) {
    if (lane == 0) sm90::mbarrier_arrive(&v_empty[j % STAGES]);  // this warp is done with the buffer
  };

  // Tile j; WITH_PV: every tile but the first, whose batch also holds the previous P V (a
  // compile-time flag: a branch between the wgmmas of one batch would make ptxas fence them).
  auto kv_tile = [&](std::int64_t j, auto masked_tag, auto with_pv_tag) {
    constexpr bool MASKED = decltype(masked_tag)::value, WITH_PV = decltype(with_pv_tag)::value;
    const int stage = static_cast<int>(j % STAGES);
    const std::int64_t n0 = j * BLOCK_N;
    trace(sm90::TracePhase::k_wait, j);
    sm90::mbarrier_wait(&k_full[stage], static_cast<std::uint32_t>(j / STAGES) % 2, "k_full");
    if (WITH_PV) wait_v(j - 1);

    // One batch, issued in this consumer's turn: S = Q K^T of this tile (HEAD_DIM / 16 wgmmas
    // chained on one accumulator; a commit group of its own) and O += P V of the previous one.
    float s_acc[BLOCK_N / 2];
    // The descriptors are made before the turn, so that the turn only issues (fence_value keeps
    // the compiler from sinking them past the barrier).
    std::uint64_t k_desc = sm90::desc_k_major(sm90::smem_u32(K_smem + stage * CHUNKS * BLOCK_N * 64));
    std::uint64_t pv_desc = 0;
    if constexpr (WITH_PV) pv_desc = v_desc(j - 1);
    sm90::fence_value(k_desc);
    sm90::fence_value(pv_desc);
    trace(sm90::TracePhase::turn, j);
    my_turn();
    trace(sm90::TracePhase::issue, j);
    sm90::fence_registers(s_acc);
    sm90::fence_registers(o_acc);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
      const int chunk = kk / 4, col_bytes = (kk % 4) * 32;  // 16 columns = 32 bytes into the chunk
      sm90::wgmma_ss<BLOCK_N, T>(s_acc, sm90::desc_advance(q_desc, chunk * BLOCK_M * 128 + col_bytes),
                                 sm90::desc_advance(k_desc, chunk * BLOCK_N * 128 + col_bytes), kk > 0);
    }
    sm90::wgmma_commit();
    if constexpr (WITH_PV) issue_pv(pv_desc);
    sm90::wgmma_commit();
    next_turn(false);
    trace(sm90::TracePhase::s_wait, j);
    // Groups complete in order: with at most one pending, S is done, and the softmax below
    // runs while the tensor cores still work on P V (which reads p_frag, and writes o_acc:
    // neither is touched before the second wait).
    sm90::wgmma_wait<1>();
    sm90::fence_registers(s_acc);
    if (lane == 0) sm90::mbarrier_arrive(&k_empty[stage]);  // S is done with the K buffer
    trace(sm90::TracePhase::softmax, j);

    if constexpr (MASKED) {  // some key of the tile is hidden from some row
      int last_col[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const std::int64_t last = last_visible_key(p.mask, m0 + r0 + 8 * r, p.Nq, p.Nk) - n0;
        last_col[r] = static_cast<int>(last < -1 ? -1 : last > BLOCK_N ? BLOCK_N : last);
      }
#pragma unroll
      for (int i = 0; i < BLOCK_N / 2; ++i)
        if (8 * (i / 4) + 2 * (lane % 4) + i % 2 > last_col[(i / 2) % 2]) s_acc[i] = -INFINITY;
    }
    // The online softmax of step 07, now the critical path that the other consumer's GEMMs
    // must hide, so shortened: the row max and sum as trees (depth 5 instead of chains of 32),
    // and the exponent as one FFMA, s * scale_log2 - m * scale_log2, wherever that is as exact
    // as step 07's (s - m) * scale_log2 (chapter 03): while |m * scale_log2| < 2^10, the
    // rounding of the bias costs at most 2^-14 in the exponent. A warp whose rows' maxima are
    // larger takes the subtract-first path.
    float m_new[2], m_use[2], alpha[2], bias[2];
    sm90::reduce_rows<BLOCK_N>(s_acc, m_new, [](float a, float c) { return fmaxf(a, c); });
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m_new[r] = fmaxf(m_i[r], m_new[r]);
      m_new[r] = fmaxf(m_new[r], vendor::shfl_xor(m_new[r], 1));
      m_new[r] = fmaxf(m_new[r], vendor::shfl_xor(m_new[r], 2));
      m_use[r] = m_new[r] == -INFINITY ? 0.0f : m_new[r];  // a row with no visible key yet
      alpha[r] = m_new[r] == -INFINITY ? 1.0f : tile::exp2_approx((m_i[r] - m_new[r]) * p.scale_log2);
      m_i[r] = m_new[r];
      bias[r] = m_use[r] * p.scale_log2;
    }
    if (!tile::warp_any(!(fabsf(bias[0]) < 1024.0f && fabsf(bias[1]) < 1024.0f))) {
#pragma unroll
      for (int i = 0; i < BLOCK_N / 2; ++i)  // P, unnormalised
        s_acc[i] = tile::exp2_approx(fmaf(s_acc[i], p.scale_log2, -bias[(i / 2) % 2]));
    } else {
#pragma unroll
      for (int i = 0; i < BLOCK_N / 2; ++i) s_acc[i] = tile::exp2_approx((s_acc[i] - m_use[(i / 2) % 2]) * p.scale_log2);
    }
    float row_sum[2];
    sm90::reduce_rows<BLOCK_N>(s_acc, row_sum, [](float a, float c) { return a + c; });
#pragma unroll
    for (int r = 0; r < 2; ++r) l_i[r] = l_i[r] * alpha[r] + row_sum[r];

    trace(sm90::TracePhase::pv_wait, j);
    sm90::wgmma_wait<0>();  // P V of the previous tile is done: O and p_frag are free
    sm90::fence_registers(o_acc);
    trace(sm90::TracePhase::rescale, j);
    if (WITH_PV) release_v(j - 1);
    if (tile::warp_any(alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int i = 0; i < HEAD_DIM / 2; ++i) o_acc[i] *= alpha[(i / 2) % 2];
    }
    // P as the A operand of the next batch: k-step kk (keys 16 kk ..) is elements 8 kk .. 8 kk + 7.
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) p_frag[kk][r] = tile::pack2<T>(s_acc[8 * kk + 2 * r], s_acc[8 * kk + 2 * r + 1]);
  };
  if (wg_tiles > 0) {  // the first tile: S alone
    if (wg_full_tiles > 0) kv_tile(0, std::false_type{}, std::false_type{});
    else kv_tile(0, std::true_type{}, std::false_type{});
  }
  std::int64_t j = 1;
  for (; j < wg_full_tiles; ++j) kv_tile(j, std::false_type{}, std::true_type{});  // no mask arithmetic at all
  for (; j < wg_tiles; ++j) kv_tile(j, std::true_type{}, std::true_type{});        // the diagonal / ragged end
  if (wg_tiles > 0) {  // the last tile's P V, a batch of its own
    wait_v(wg_tiles - 1);
    std::uint64_t pv_desc = v_desc(wg_tiles - 1);
    sm90::fence_value(pv_desc);
    trace(sm90::TracePhase::turn, wg_tiles);
    my_turn();
    trace(sm90::TracePhase::issue, wg_tiles);
    sm90::fence_registers(o_acc);
    sm90::wgmma_fence();
    issue_pv(pv_desc);
    sm90::wgmma_commit();
    next_turn(wg_tiles == n_tiles);
    trace(sm90::TracePhase::pv_wait, wg_tiles);
    sm90::wgmma_wait<0>();
    sm90::fence_registers(o_acc);
    release_v(wg_tiles - 1);
  } else if (n_tiles > 0) {  // rows that see no tile: the turn of the last P V is empty too
    my_turn();
    next_turn(false);
  }
  for (j = wg_tiles; j < n_tiles; ++j) {  // tiles none of these rows sees
    trace(sm90::TracePhase::turn, j + 1);
    my_turn();  // an empty turn, which keeps the ring's count
    next_turn(j == n_tiles - 1);
    // Released unread, but only once they have landed: a release counts towards the phase
    // of the tile in the buffer.
    trace(sm90::TracePhase::k_wait, j);
    sm90::mbarrier_wait(&k_full[j % STAGES], static_cast<std::uint32_t>(j / STAGES) % 2, "k_full");
    if (lane == 0) sm90::mbarrier_arrive(&k_empty[j % STAGES]);
    wait_v(j);
    release_v(j);
  }
  // [end:online_softmax]

  // [start:epilogue]
  // O_i = o_acc / l_i (0 for a row with no visible key), LSE as step 06. O goes out through
  // this warp's own 16 rows of the Q tile (its warpgroup's wgmmas are done with them), so
  // that the global stores are whole 16-byte pieces of rows.
  trace(sm90::TracePhase::epilogue, -1);
  float inv_l[2], lse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_i[r];
    l += vendor::shfl_xor(l, 1);
    l += vendor::shfl_xor(l, 2);
    inv_l[r] = l > 0.0f ? 1.0f / l : 0.0f;
    lse[r] = l > 0.0f ? (m_i[r] * p.scale_log2 + log2f(l)) * 0.69314718f : -INFINITY;
    const std::int64_t row = m0 + r0 + 8 * r;
    if (lane % 4 == 0 && p.lse != nullptr && row < p.Nq) p.lse[bh * p.Nq + row] = lse[r];
  }
  unsigned char* q_bytes = reinterpret_cast<unsigned char*>(Q_smem);
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; i += 2) {
    const int r = (i / 2) % 2, col = 8 * (i / 4) + 2 * (lane % 4);
    *reinterpret_cast<std::uint32_t*>(q_bytes + sm90::swizzle_128b(BLOCK_M, r0 + 8 * r, col)) =
        tile::pack2<T>(o_acc[i] * inv_l[r], o_acc[i + 1] * inv_l[r]);
  }
  __syncwarp();
  const int warp_row0 = 64 * consumer + 16 * warp;
  T* o = p.o + b * p.o_stride[0] + h * p.o_stride[1];
  for (int u = lane; u < 16 * HEAD_DIM / 8; u += 32) {
    const int row = warp_row0 + u / (HEAD_DIM / 8), col = 8 * (u % (HEAD_DIM / 8));
    if (m0 + row < p.Nq && col < p.D)
      *reinterpret_cast<uint4*>(o + (m0 + row) * p.o_stride[2] + col) =
          *reinterpret_cast<const uint4*>(q_bytes + sm90::swizzle_128b(BLOCK_M, row, col));
  }
  trace.stop();
  // [end:epilogue]
}
// [end:kernel]

}  // namespace

std::size_t workspace_bytes(const AttentionArgs&) { return 0; }

StepInfo info() {
  StepInfo i{8, "warp_specialized", "Hopper: a producer warpgroup, consumers taking turns on the tensor cores (ping-pong) (sm_90a)"};
  i.accepts_fp32 = false, i.head_dim_multiple = 8, i.alignment_elems = 8, i.max_head_dim = 128;
  return i;
}

// [start:launcher]
void attention_forward(const AttentionArgs& args, vendor::Stream stream) {
  validate(args);
  check_tensor_core_args(args, "step 08");
  for (const auto& [name, n] : {std::pair<const char*, std::int64_t>{"q.shape[2] (seqlen_q)", args.seqlen_q()},
                                std::pair<const char*, std::int64_t>{"k.shape[2] (seqlen_k)", args.seqlen_k()},
                                std::pair<const char*, std::int64_t>{"q.shape[0] (batch)", args.batch()},
                                std::pair<const char*, std::int64_t>{"q.shape[1] (heads_q)", args.heads_q()}})
    if (n > std::numeric_limits<std::int32_t>::max())  // TMA coordinates are 32-bit
      throw exceeds_limit("step 08", name, n, "TMA's 32-bit coordinates", std::numeric_limits<std::int32_t>::max());
  dispatch_head_dim_sm90(args.head_dim(), "step 08", [&](auto head_dim_tag) {
    using Cfg = DefaultTile<decltype(head_dim_tag)::value>;
    static_assert(Cfg::smem_bytes <= kMaxSmem, "the tiles exceed the shared memory of a block");
    if (is_empty(args)) return;
    sm90::require_sm90("step 08");
    vendor::dispatch_dtype(args.q.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, float>) {
        const Params<T> p = make_params<T>(args, Cfg::BLOCK_M);
        const unsigned blocks = grid_blocks(p, Cfg::kThreads, "step 08");
        // The tensor maps: Q read in boxes of BLOCK_M rows, K and V of BLOCK_N (no keys: never read).
        const CUtensorMap q_map = sm90::make_tensor_map(args.q, "q", Cfg::BLOCK_M);
        CUtensorMap k_map{}, v_map{};
        if (p.Nk > 0) {
          k_map = sm90::make_tensor_map(args.k, "k", Cfg::BLOCK_N);
          v_map = sm90::make_tensor_map(args.v, "v", Cfg::BLOCK_N);
        }
        const void* kernel = reinterpret_cast<const void*>(&attention_kernel<T, Cfg>);
        vendor::set_max_dynamic_smem(kernel, Cfg::smem_bytes);
        attention_kernel<T, Cfg><<<blocks, Cfg::kThreads, Cfg::smem_bytes, stream>>>(q_map, k_map, v_map, p);
        FLASHSTEPS_CHECK_LAUNCH("step08::attention_kernel");
      }
    });
  });
}
// [end:launcher]

}  // namespace flashsteps::step08
