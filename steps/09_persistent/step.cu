// SPDX-License-Identifier: Apache-2.0
// FlashSteps step 09 of the series — a persistent grid, the TMA-store epilogue, wide key tiles (Hopper).   previous: 08_warp_specialized · next: (10, a branch off 06)
//
// What changes against step 08 (NVIDIA sm_90a only; the new words are in tile_sm90.h):
//   - a persistent grid: one block per SM walks a list of work tiles (one per batch, head and
//     query tile). Full problems whose tiles are all alike: a static deal, head by head, as
//     the flat grids of steps 05-08 ordered their blocks. Causal problems, and full ones with
//     a short last query tile, where there are more tiles than blocks: the tiles are claimed
//     from a counter in the workspace (4 bytes, zeroed before each launch); causal ones
//     heaviest first (LPT) within sections of heads whose K and V fit in L2 together. The K/V
//     ring and its phases run on across the tiles of a block, so the producer loads the next
//     tile's first K while the consumers still finish this one
//   - the epilogue goes out through TMA: each consumer writes its O rows into an O buffer
//     (swizzled, as TMA reads it), and one thread stores them with one tile copy per 64
//     columns; a ragged last tile clips itself. A q_empty barrier per Q buffer tells the producer when
//     the buffer may take another tile's Q: as soon as the consumers' last S = Q K^T of the
//     tile in it is done. The 176-key tiles leave
//     no room for an O buffer; they stage O in the Q buffer, which is then free only once O
//     has left it
//   - a configuration space per head dim (wgmma takes N up to 256 in steps of 8): D = 128
//     full problems take 176-key tiles (160 up to 4096 keys, 128 up to 2048), causal ones
//     128; D = 64 three consumers with 128-key tiles
//     (space(), default_shape()), chosen per call by step 06's tuner (tuner(): a table
//     tuned on the GPU where one is checked in, else default_shape(); FLASHSTEPS_STEP09_SHAPE
//     forces one on every call, for measurements; attention_forward_with() one per call, for
//     the tests)
//   - O is rescaled inside the consumer's turn, while its S = Q K^T is on the tensor cores and
//     before the P V that adds to O (FlashAttention-3's order), instead of after the softmax,
//     where it delayed the next turn
//   - the row sums of P are added in four chains per row as the exponents arrive, filling the
//     gaps between a warp's ex2.approx instructions, instead of as a tree after them
//   - only the batches S(j) + P V(j - 1) take ping-pong turns: a work tile's first S and last
//     P V go outside the ring (FlashAttention-3's order), and the ring runs on across tiles
//   - masked problems align their query tiles to the last row: a tile padded past Nq is the
//     first and lightest, not the last and heaviest
//   - the producer hands each work tile to the consumers: it computes the tile's indices and
//     each consumer's count of key tiles once, and writes them beside the tile's Q (TileInfo),
//     where the consumers read them when Q has landed; it loads K one tile ahead of V, so
//     that a K tile never queues behind a V buffer that is still in use
//   - a second Q buffer where it fits (128 x 128 at D = 128, every D = 64 shape), so that
//     the next work tile's Q loads while this one's is in use: the producer issues it as soon
//     as this tile's first V is on its way, not after this tile's last K/V load
//   - the epilogue's row sums, 1 / l and LSE are computed, without branches, while the last
//     P V is on the tensor cores, and O goes into shared memory with stmatrix (one store per
//     16 columns instead of one per 2)
//   - the rest of the softmax is step 08's
// Why it is faster: a causal problem's blocks read a few heads' K and V at a time from L2
// (heaviest first over every head, most of those reads went to HBM) and stay balanced; a
// block pays for its start (barriers, the first Q and K in flight) once
// per SM instead of once per tile, the next tile's first K loads while this one ends, a
// 176-key tile issues 38% more tensor work per hand-over and per barrier than a 128-key one,
// at D = 64 a block of three consumers shares each K/V tile among 192 query rows, the row
// sums no longer wait for the last exponent, and, where O has a buffer of its own (every
// shape but 128 x 176), the next work tile's Q no longer waits for this one's O to leave; a
// consumer's next first S waits for its own epilogue and the next Q, no longer for the other
// consumers' epilogues too; a masked problem's padded rows cost the lightest tile, not
// the heaviest; and between two work tiles a consumer no longer works out indices (the
// producer does) or waits on the LSE's arithmetic (it runs beside the last P V): about
// 1,000-1,300 cycles less per work tile and consumer.
// Measured on an NVIDIA H200 (bf16, D = 128, N = 8192, non-causal): 621.6 TFLOP/s
// (results/nvidia-h200/step09.json, commit e2474fd).
// The chapter compares it with step 08 and with SDPA's cuDNN backend measured in the same
// run and timed by the same loop: faster than step 08 at every point; at or above cuDNN at
// all but six of the points the goal counts, and just short of it at those (D = 64 causal on
// the shortest problems, D = 128 full on short and middle ones), which the course's goal asks
// to pass.
// Limits: as step 08: fp16/bf16; head_dim a multiple of 8 up to 128 (compiled for 64 and 128,
// others zero-padded by TMA); 16-byte aligned tensors and strides; sm_90 (H100/H200) only.
// Chapter: book/steps/09_persistent.md

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <tuple>
#include <utility>

#include "flashsteps/dispatch.h"
#include "flashsteps/l2_sections.h"
#include "flashsteps/params.h"
#include "flashsteps/step.h"
#include "flashsteps/tile.h"
#include "flashsteps/tile_sm90.h"
#include "flashsteps/trace_sm90.h"

#include "flashsteps/step09_tuned_tables.h"  // generated: step09::kTunedTables[], the files of tuned/
#include "shapes.h"

namespace flashsteps::step09 {

namespace {

constexpr int kMaxConsumers = 3;  // consumer warpgroups a block may have (64 Ki registers)
// A work tile: its (batch, head) pair bh = b Hq + h, K/V head hk, first query row m0 and key
// tiles n_tiles. In 32 bits: the forward() and check_work_tiles() limits keep every one of
// them below 2^31, and in 32 bits they take half as many of the producer's 24 registers.
struct WorkTile {
  std::int32_t bh, b, h, hk, m0, n_tiles;
};
// A work tile as the producer hands it to the consumers, through shared memory beside Q: its
// indices and, per consumer, the key tiles its 64 rows see and how many of them no mask touches.
struct TileInfo {
  WorkTile w;
  std::int32_t wg_tiles[kMaxConsumers], wg_full_tiles[kMaxConsumers];
};

// [start:tile_config]
// As step 08: CONSUMERS warpgroups of 64 query rows (BLOCK_M = 64 x CONSUMERS) and one
// producer warpgroup, BLOCK_N keys at a time through STAGES buffers of K and of V, every tile
// stored as HEAD_DIM / 64 swizzled chunks of [rows][64]. New: BLOCK_N may be 160 or 176 (any
// multiple of 16 up to 256 is a wgmma N and a whole number of P V k-steps; 176 is the widest
// whose S, P and O fit 240 registers at D = 128), an O buffer where it fits, a second Q
// buffer where that fits too, a q_empty barrier per Q buffer, and a TileInfo per Q buffer
// (the work tile whose Q it holds, as the producer hands it to the consumers).
constexpr std::size_t kMaxSmem = 227 * 1024;  // dynamic shared memory a block may take (sm_90)
template <int HEAD_DIM_, int CONSUMERS_, int BLOCK_N_, int STAGES_>
struct TileConfig {
  static constexpr int HEAD_DIM = HEAD_DIM_, CONSUMERS = CONSUMERS_, BLOCK_N = BLOCK_N_, STAGES = STAGES_;
  static constexpr int BLOCK_M = 64 * CONSUMERS;
  static constexpr int kThreads = (CONSUMERS + 1) * sm90::kWarpgroupThreads;  // + the producer
  static constexpr int CHUNKS = HEAD_DIM / sm90::kChunkCols;
  static constexpr std::uint32_t kQBytes = BLOCK_M * HEAD_DIM * 2;   // one Q tile
  static constexpr std::uint32_t kKvBytes = BLOCK_N * HEAD_DIM * 2;  // one K (or V) tile
  // Registers per thread after setmaxnreg: the producer keeps 24 (the least it may), the
  // consumers share the rest of the block's pool, rounded down to a multiple of 8 and at most
  // 240. The pool is what the block was launched with: kThreads x the registers per thread
  // ptxas gives a kernel of kThreads threads and one block per SM (168 for 384 threads, 128
  // for 512), not the SM's 64 Ki: a setmaxnreg.inc past the pool waits forever. Two
  // consumers: 384 x 168 = 24 x 128 + 2 x 240 x 128 exactly; three: 160 each.
  static constexpr int kProducerRegs = 24;
  static constexpr int kPoolRegs = kThreads * (65536 / kThreads / 8 * 8);
  static constexpr int kConsumerRegs =
      ((kPoolRegs - kProducerRegs * sm90::kWarpgroupThreads) / (CONSUMERS * sm90::kWarpgroupThreads)) / 8 * 8 > 240
          ? 240
          : ((kPoolRegs - kProducerRegs * sm90::kWarpgroupThreads) / (CONSUMERS * sm90::kWarpgroupThreads)) / 8 * 8;
  static_assert(HEAD_DIM % 64 == 0, "HEAD_DIM must be whole 128-byte swizzle chunks");
  static_assert(BLOCK_N == 64 || BLOCK_N == 128 || BLOCK_N == 160 || BLOCK_N == 176,
                "BLOCK_N is a wgmma N this step instantiates");
  static_assert(STAGES >= 2, "STAGES must be at least 2 (one K/V buffer loading, one in use)");
  static_assert(CONSUMERS >= 2 && CONSUMERS <= kMaxConsumers,
                "ping-pong needs two consumers; four would not fit 64 Ki registers");
  /// Q, STAGES K and V tiles, the mbarriers, two TileInfo slots, and 1 KiB of slack to align
  /// the tiles to the 1024-byte period of the swizzle; then an O buffer of Q's size, or O
  /// staged in Q; then, where it fits, a second Q buffer.
  static constexpr std::size_t kSmemSharedO =
      1024 + kQBytes + 2 * STAGES * kKvBytes + 8 * (4 + 4 * STAGES) + 2 * sizeof(TileInfo);
  /// O gets a buffer of its own where one fits (every shape but 128 x 176 at D = 128): a Q
  /// buffer is then free once the last S = Q K^T of its work tile is done.
  static constexpr bool kSeparateO = kSmemSharedO + kQBytes <= kMaxSmem;
  /// A second Q buffer where it fits beside the O buffer (128 x 128 at D = 128, every D = 64
  /// shape): the next work tile's Q then loads while this one's is still in use.
  static constexpr int kQBuffers = kSeparateO && kSmemSharedO + 2 * kQBytes <= kMaxSmem ? 2 : 1;
  static constexpr std::size_t smem_bytes = kSmemSharedO + (kSeparateO ? kQBytes : 0) + (kQBuffers - 1) * kQBytes;
  static TileShape shape() { return TileShape{BLOCK_M, BLOCK_N, STAGES}; }
};
// [end:tile_config]

// [start:scheduler]
// Which work tiles a block takes, and in what order. Full problems: a list walked head by
// head (the blocks running at once share a head's K and V in L2). Where seqlen_q is a
// multiple of BLOCK_M every tile is as heavy (as many rows, as many keys), and the list is
// dealt out statically in waves of gridDim.x tiles, back and forth: block i takes position i
// of waves 0, 2, 4, ... and position gridDim.x - 1 - i of waves 1, 3, ... Where it is not,
// each head's last tile is short (at D = 64, 192 rows: 1024 = 5 x 192 + 64, a tile with one
// busy consumer of three), and a static deal would give those light tiles to the same few
// blocks every wave (132 = 22 heads x 6 tiles: block i gets tile i % 6 of a head in the even
// waves and 5 - i % 6 in the odd ones, so the 88 blocks of i % 6 = 1 .. 4 never get a light
// one and set the pace), so the blocks claim them from a counter instead, as causal
// problems do. Causal problems: tiles differ (the last query tile of a head sees every key,
// the first one tile of them), so the blocks take them from one list in the order they
// become free: the producer of a block claims its next tile with an atomic add on a counter
// in the workspace (zeroed before the launch), heaviest tiles first (LPT, step 05) within
// sections of `section` (batch, head) pairs whose K and V fit together in L2 (launch() sizes
// them). Heaviest first over all heads at once, the blocks running together
// each read a different head's K and V, and a head's next query tile came two waves later,
// after every other head's K and V had gone through L2: most K/V reads went to HBM. A static
// deal of the sectioned list would not balance (it mixes heavy and light tiles in one wave);
// a shared counter does, and does not care how heavy a tile is.
// With a mask, the query tiles are aligned to the last row instead of the first: shifted
// back by whole consumers (64 rows) as far as the padding past Nq allows, so that the rows a
// tile lacks are missing from the first, lightest tile (its first consumers start before
// row 0 and have nothing to do) rather than from the last and heaviest, where idle consumers
// would wait on the one with the longest row of keys.
__device__ __forceinline__ std::int64_t dealt_tile(std::int64_t wave) {
  return wave * gridDim.x + (wave % 2 == 0 ? blockIdx.x : gridDim.x - 1 - blockIdx.x);
}
template <int BLOCK_M, int BLOCK_N, typename T>
__device__ __forceinline__ WorkTile work_tile(const Params<T>& p, std::int64_t t, std::uint32_t section) {
  // In 32 bits (check_work_tiles() refuses more than 2^31 - 1 work tiles): a 64-bit
  // division is a software routine of dozens of instructions. Only the producer runs this
  // (the consumers read its result from the TileInfo of the tile's Q buffer).
  const auto t32 = static_cast<std::uint32_t>(t), m_tiles = static_cast<std::uint32_t>(p.m_tiles);
  const auto Hq = static_cast<std::uint32_t>(p.Hq), BH = static_cast<std::uint32_t>(p.B) * Hq;
  WorkTile w;
  std::uint32_t bh, m_tile;
  if (p.mask != Mask::none) {
    // Section s holds pairs s * section .. (the last one may hold fewer); within it, query
    // tile m_tiles - 1 of each pair, then m_tiles - 2 of each, ...
    const std::uint32_t s = t32 / (section * m_tiles), r = t32 - s * section * m_tiles;
    const std::uint32_t pairs = BH - s * section < section ? BH - s * section : section;
    bh = s * section + r % pairs;
    m_tile = m_tiles - 1 - r / pairs;
  } else {
    bh = t32 / m_tiles;
    m_tile = t32 % m_tiles;
  }
  w.bh = static_cast<std::int32_t>(bh), w.b = static_cast<std::int32_t>(bh / Hq), w.h = static_cast<std::int32_t>(bh % Hq);
  w.hk = static_cast<std::int32_t>((bh % Hq) / (Hq / static_cast<std::uint32_t>(p.Hkv)));
  const std::int64_t shift = p.mask == Mask::none ? 0 : (std::int64_t{p.m_tiles} * BLOCK_M - p.Nq) / 64 * 64;
  w.m0 = static_cast<std::int32_t>(std::int64_t{m_tile} * BLOCK_M - shift);  // may be negative: TMA fills the rows before row 0 with zeros
  const std::int64_t last_row = (w.m0 + BLOCK_M < p.Nq ? w.m0 + BLOCK_M : p.Nq) - 1;
  w.n_tiles = (static_cast<std::int32_t>(last_visible_key(p.mask, last_row, p.Nq, p.Nk)) + BLOCK_N) / BLOCK_N;
  return w;
}
// [end:scheduler]

// [start:kernel]
template <typename T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    attention_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                     const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap o_map,
                     const Params<T> p, const std::int64_t work_tiles, std::uint32_t* const tile_counter,
                     const std::uint32_t section) {
  constexpr int HEAD_DIM = Cfg::HEAD_DIM, BLOCK_M = Cfg::BLOCK_M, BLOCK_N = Cfg::BLOCK_N, STAGES = Cfg::STAGES;
  constexpr int CHUNKS = Cfg::CHUNKS, CONSUMERS = Cfg::CONSUMERS;
  extern __shared__ unsigned char smem_raw[];
  // The swizzle repeats every 1024 bytes, and the descriptors assume tiles start on it.
  unsigned char* smem = smem_raw + ((1024 - sm90::smem_u32(smem_raw) % 1024) % 1024);
  T* Q_smem = reinterpret_cast<T*>(smem);             // [kQBuffers][CHUNKS][BLOCK_M][64] swizzled
  T* K_smem = Q_smem + Cfg::kQBuffers * BLOCK_M * HEAD_DIM;  // [STAGES][CHUNKS][BLOCK_N][64] swizzled
  T* V_smem = K_smem + STAGES * BLOCK_N * HEAD_DIM;   // [STAGES][CHUNKS][BLOCK_N][64] swizzled
  T* const after_kv = V_smem + STAGES * BLOCK_N * HEAD_DIM;
  T* O_smem = Cfg::kSeparateO ? after_kv : Q_smem;   // [CHUNKS][BLOCK_M][64] swizzled
  std::uint64_t* q_full = reinterpret_cast<std::uint64_t*>(Cfg::kSeparateO ? O_smem + BLOCK_M * HEAD_DIM : after_kv);
  std::uint64_t* q_empty = q_full + 2;        // [2]: every consumer is done with Q (and, staged in it, with O)
  std::uint64_t* k_full = q_empty + 2;        // [STAGES]: K tile landed (TMA transaction bytes)
  std::uint64_t* k_empty = k_full + STAGES;   // [STAGES]: every consumer warp done with the K buffer
  std::uint64_t* v_full = k_empty + STAGES;   // [STAGES]: V tile landed
  std::uint64_t* v_empty = v_full + STAGES;   // [STAGES]: every consumer warp done with the V buffer
  TileInfo* tile_info = reinterpret_cast<TileInfo*>(v_empty + STAGES);  // [2]: the work tile of the Q in each Q buffer
  // The warpgroup index, read from lane 0 so that the compiler knows it is the same in every
  // lane: what follows from it (descriptors, barrier ids) can live in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / sm90::kWarpgroupThreads, 0);
  const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;  // warp within the warpgroup
  sm90::Tracer trace(BLOCK_M, BLOCK_N, STAGES);  // phase marks of one block, in trace builds only (trace_sm90.h)

  if (threadIdx.x == 0) {
    for (int b = 0; b < Cfg::kQBuffers; ++b) sm90::mbarrier_init(&q_full[b], 1);
    // One arrival per consumer warp: after its last S; with O staged in Q, warp 0's after TMA
    // has read O, and the other warps' once their part of O is written.
    for (int b = 0; b < Cfg::kQBuffers; ++b) sm90::mbarrier_init(&q_empty[b], 4 * CONSUMERS);
    for (int s = 0; s < STAGES; ++s) {
      sm90::mbarrier_init(&k_full[s], 1);  // the producer's arrive.expect_tx
      sm90::mbarrier_init(&v_full[s], 1);
      sm90::mbarrier_init(&k_empty[s], 4 * CONSUMERS);  // one arrival per consumer warp
      sm90::mbarrier_init(&v_empty[s], 4 * CONSUMERS);
    }
    sm90::mbarrier_init_fence();
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them

  // [start:producer]
  // The producer walks the same work tiles as the consumers. K/V tile number `it` counts on
  // across work tiles: buffer it % STAGES, phase it / STAGES. A work tile's first K is loaded
  // before its Q, so that it is in flight while the consumers finish the tile before; with two
  // Q buffers the Q itself went out during that tile (load_q below says when).
  // Work tile `local` goes to Q buffer local % kQBuffers, with its TileInfo in the slot of
  // that buffer: the consumers read it once q_full completes, so the indices, divisions
  // included, are worked out here, where the producer would otherwise wait, and not by every
  // consumer thread between one work tile's epilogue and the next one's first S.
  if (wg == 0) {
    sm90::setmaxnreg_dec<Cfg::kProducerRegs>();
    if (warp == 0 && lane == 0) {
      std::uint32_t it = 0, local = 0;  // K/V tiles and work tiles this block has loaded
      auto load_k = [&](const WorkTile& w, std::uint32_t j) {  // in 32 bits, as the work tile
        const int stage = static_cast<int>((it + j) % STAGES);
        const std::uint32_t round = static_cast<std::uint32_t>((it + j) / STAGES);
        trace(sm90::TracePhase::k_empty_wait, it + j);
        if (round > 0) sm90::mbarrier_wait(&k_empty[stage], (round - 1) % 2, "k_empty");
        trace(sm90::TracePhase::k_load, it + j);
        sm90::mbarrier_arrive_expect_tx(&k_full[stage], Cfg::kKvBytes);
        for (int c = 0; c < CHUNKS; ++c)
          sm90::tma_load_4d(K_smem + (stage * CHUNKS + c) * BLOCK_N * 64, &k_map, c * 64,
                            static_cast<int>(j * BLOCK_N), static_cast<int>(w.hk), static_cast<int>(w.b),
                            &k_full[stage]);
      };
      auto load_v = [&](const WorkTile& w, std::uint32_t j) {
        const int stage = static_cast<int>((it + j) % STAGES);
        const std::uint32_t round = static_cast<std::uint32_t>((it + j) / STAGES);
        trace(sm90::TracePhase::v_empty_wait, it + j);
        if (round > 0) sm90::mbarrier_wait(&v_empty[stage], (round - 1) % 2, "v_empty");
        trace(sm90::TracePhase::v_load, it + j);
        sm90::mbarrier_arrive_expect_tx(&v_full[stage], Cfg::kKvBytes);
        for (int c = 0; c < CHUNKS; ++c)
          sm90::tma_load_4d(V_smem + (stage * CHUNKS + c) * BLOCK_N * 64, &v_map, c * 64,
                            static_cast<int>(j * BLOCK_N), static_cast<int>(w.hk), static_cast<int>(w.b),
                            &v_full[stage]);
      };
      // Work tile number q_local's TileInfo and Q into Q buffer q_local % kQBuffers, once the
      // consumers are done with the work tile that used that buffer before (q_local -
      // kQBuffers). With one Q buffer that wait is long (for the consumers' last S, or for O to
      // leave the buffer), and each consumer's share of the tile is worked out before it; with
      // two it is short (see load_next_q below), and the tile's indices and shares are worked
      // out after it, straight into the slot: held across the wait beside this tile's indices,
      // they would not fit in the producer's 24 registers (ptxas spilled).
      constexpr bool kEarlyQ = Cfg::kQBuffers == 2;
      auto shares = [&](const WorkTile& w, TileInfo& info) {
#pragma unroll
        for (int c = 0; c < CONSUMERS; ++c) {
          // Consumer c's share of the tile, as step 08; none where its rows lie before row 0
          // (the first tile of a masked problem, see work_tile()) or past the last.
          const std::int64_t row0 = w.m0 + 64 * c, last_row = (row0 + 64 < p.Nq ? row0 + 64 : p.Nq) - 1;
          const bool has_rows = row0 >= 0 && row0 < p.Nq;
          // (A key index is below Nk < 2^31: the divisions go in 32 bits, in fewer registers.)
          const auto last_key = static_cast<std::int32_t>(last_visible_key(p.mask, last_row, p.Nq, p.Nk));
          const auto first_row_last_key = static_cast<std::int32_t>(last_visible_key(p.mask, row0, p.Nq, p.Nk));
          info.wg_tiles[c] = has_rows ? (last_key + BLOCK_N) / BLOCK_N : 0;
          info.wg_full_tiles[c] = has_rows ? (first_row_last_key + 1) / BLOCK_N : 0;
        }
      };
      // No work tile left: a TileInfo with n_tiles = -1 and no Q, in the slot the consumers
      // read next, tells them to stop.
      auto hand_end = [&](std::uint32_t q_local) {
        const std::uint32_t qb = q_local % Cfg::kQBuffers;
        if (q_local >= Cfg::kQBuffers) sm90::mbarrier_wait(&q_empty[qb], ((q_local - Cfg::kQBuffers) / Cfg::kQBuffers) % 2, "q_empty");
        tile_info[qb].w.n_tiles = -1;
        sm90::mbarrier_arrive(&q_full[qb]);
      };
      auto load_q = [&](std::uint32_t t, std::uint32_t q_local) {
        const std::uint32_t qb = q_local % Cfg::kQBuffers;
        TileInfo info;
        WorkTile w;
        if constexpr (!kEarlyQ) w = work_tile<BLOCK_M, BLOCK_N>(p, t, section), shares(w, info);
        if (q_local >= Cfg::kQBuffers) sm90::mbarrier_wait(&q_empty[qb], ((q_local - Cfg::kQBuffers) / Cfg::kQBuffers) % 2, "q_empty");
        if constexpr (kEarlyQ) w = work_tile<BLOCK_M, BLOCK_N>(p, t, section);
        // The consumers read it once q_full completes (the arrival below releases these writes).
        tile_info[qb].w = w;
        if constexpr (kEarlyQ) {
          shares(w, tile_info[qb]);
        } else {
#pragma unroll
          for (int c = 0; c < CONSUMERS; ++c) tile_info[qb].wg_tiles[c] = info.wg_tiles[c], tile_info[qb].wg_full_tiles[c] = info.wg_full_tiles[c];
        }
        trace(sm90::TracePhase::q_load, it);
        sm90::mbarrier_arrive_expect_tx(&q_full[qb], Cfg::kQBytes);
        for (int c = 0; c < CHUNKS; ++c)
          sm90::tma_load_4d(Q_smem + (qb * CHUNKS + c) * BLOCK_M * 64, &q_map, c * 64, static_cast<int>(w.m0),
                            static_cast<int>(w.h), static_cast<int>(w.b), &q_full[qb]);
      };
      // With two Q buffers the next work tile's Q goes out early, as soon as this tile's first
      // V is on its way, and lands while the consumers still work on this tile. The Q buffer
      // it takes was the previous work tile's, free once every consumer is past that tile's
      // last S; with two stages, the V buffer this tile's first V reuses was released after
      // that S (by the previous tile's second-to-last P V, which each consumer waits for
      // after issuing its last S, where it had two key tiles or more), so the wait for
      // q_empty is short. With one Q buffer the next Q can only go out once this tile's last
      // S is done: after its loads, as before.
      // The block's next work tile: claimed from the shared counter (causal, or full with a
      // short last query tile), or the next wave's of the static deal (the wave is the block's
      // count of work tiles so far),
      // when its Q is to be loaded. In 32 bits, as work_tile().
      const auto tiles = static_cast<std::uint32_t>(work_tiles);
      auto next_tile = [&]() -> std::uint32_t {
        if (tile_counter != nullptr) return gridDim.x + atomicAdd(tile_counter, 1u);
        return static_cast<std::uint32_t>(dealt_tile(local + 1));
      };
      // Every block's first tile is its own (launch() starts no more blocks than tiles).
      std::uint32_t t = blockIdx.x;
      WorkTile w = work_tile<BLOCK_M, BLOCK_N>(p, t, section);
      for (;;) {
        if (w.n_tiles > 0) load_k(w, 0);
        if (!kEarlyQ || local == 0) load_q(t, local);  // else loaded during the previous work tile
        auto load_next_q = [&] {
          const std::uint32_t t_next = next_tile();
          if (t_next < tiles) load_q(t_next, local + 1);
          else hand_end(local + 1);
        };
        const auto n_tiles = static_cast<std::uint32_t>(w.n_tiles);
        std::uint32_t j = 0;  // K one tile ahead of V
        if constexpr (kEarlyQ) {  // the first V, then the next tile's Q (outside the loop: fewer live registers)
          if (n_tiles > 1) load_k(w, 1);
          if (n_tiles > 0) load_v(w, 0), j = 1;
          load_next_q();
        }
        for (; j < n_tiles; ++j) {
          if (j + 1 < n_tiles) load_k(w, j + 1);
          load_v(w, j);
        }
        it += n_tiles;
        if constexpr (kEarlyQ) {
          ++local;
          w = tile_info[local % Cfg::kQBuffers].w;  // the next tile, as load_next_q handed it over
          if (w.n_tiles < 0) break;
        } else {
          t = next_tile();  // before ++local: the static deal's next wave is local + 1
          ++local;
          if (t >= tiles) {
            hand_end(local);
            break;
          }
          w = work_tile<BLOCK_M, BLOCK_N>(p, t, section);
        }
      }
      trace.stop();
    }
    return;
  }
  sm90::setmaxnreg_inc<Cfg::kConsumerRegs>();
  // [end:producer]

  // Ping-pong: consumer c (0 .. CONSUMERS - 1) issues a batch of GEMMs only after named
  // barrier 1 + c has seen consumer c - 1 (cyclically) issue its own, and then lets consumer
  // c + 1 go. New against step 08: only the batches S(j) + P V(j - 1) take turns; a work
  // tile's first S and last P V are issued outside the ring (FlashAttention-3's order), so a
  // consumer that has finished its epilogue starts the next work tile as soon as the next Q is
  // there, without waiting for the others' epilogues (at 128 x 176, where O is staged in the Q
  // buffer, the next Q itself waits for them). Every consumer takes n_tiles - 1 turns per work
  // tile (one per batch, and an empty one per tile it skips; none where no row of the tile
  // sees a key), so the ring, started once by the last consumer, runs on across work tiles;
  // its last arrival is left unanswered when the block ends.
  const int consumer = wg - 1;
  auto my_turn = [&] { sm90::named_barrier_sync(1 + consumer, 2 * sm90::kWarpgroupThreads); };
  auto next_turn = [&] { sm90::named_barrier_arrive(1 + (consumer + 1) % CONSUMERS, 2 * sm90::kWarpgroupThreads); };
  if (consumer == CONSUMERS - 1) sm90::named_barrier_arrive(1, 2 * sm90::kWarpgroupThreads);
  const int r0 = 64 * consumer + 16 * warp + lane / 4;                       // row within the block
  std::uint32_t it = 0, local = 0;

  for (;;) {
    // The work tile's indices and this consumer's share of it, from the producer, which wrote
    // them before it loaded the tile's Q (or n_tiles = -1: there is none left).
    trace(sm90::TracePhase::q_wait, it);
    const std::uint32_t qb = local % Cfg::kQBuffers;  // the Q buffer of this work tile
    sm90::mbarrier_wait(&q_full[qb], (local / Cfg::kQBuffers) % 2, "q_full");
    // Lane 0 alone reads the slot and hands it to its warp. The producer overwrites the slot
    // once q_empty[qb] completes, and lane 0's own arrival there (a release) orders its reads
    // before that write. (Read by every lane, the order of the other 31 lanes' reads would
    // rest on a __syncwarp() before lane 0's arrival: right by the PTX memory model, but
    // racecheck does not follow it and reported each such read as a hazard.)
    WorkTile w{};
    std::int32_t share[2] = {0, 0};  // this consumer's key tiles, and those no mask touches
    if (lane == 0) {
      w = tile_info[qb].w;
      share[0] = tile_info[qb].wg_tiles[consumer];
      share[1] = tile_info[qb].wg_full_tiles[consumer];
    }
    w = {__shfl_sync(0xffffffffu, w.bh, 0), __shfl_sync(0xffffffffu, w.b, 0), __shfl_sync(0xffffffffu, w.h, 0),
         __shfl_sync(0xffffffffu, w.hk, 0), __shfl_sync(0xffffffffu, w.m0, 0), __shfl_sync(0xffffffffu, w.n_tiles, 0)};
    if (w.n_tiles < 0) break;
    const std::int64_t m0 = w.m0, n_tiles = w.n_tiles, wg_row0 = m0 + 64 * consumer;
    const std::int64_t wg_tiles = __shfl_sync(0xffffffffu, share[0], 0), wg_full_tiles = __shfl_sync(0xffffffffu, share[1], 0);
    // This warpgroup's 64 rows of Q, as the A operand of S = Q K^T.
    const std::uint64_t q_desc =
        sm90::desc_k_major(sm90::smem_u32(Q_smem + qb * BLOCK_M * HEAD_DIM) + 64 * consumer * 128);

    // [start:online_softmax]
    // This thread's accumulator elements (PTX ISA wgmma D layout): rows r0 and r0 + 8 of the
    // warpgroup's 64, element i of a row-block of 8 columns at column 8 (i / 4) + 2 (lane % 4)
    // + i % 2, row r0 + 8 ((i / 2) % 2).
    float o_acc[HEAD_DIM / 2];
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) o_acc[i] = 0.0f;
    float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};  // rows r0, r0 + 8
    std::uint32_t p_frag[BLOCK_N / 16][4];  // P of the previous tile, the A operand of its P V
    float alpha[2] = {1.0f, 1.0f};          // the previous tile's rescale of O, applied before its P V
    auto rescale_o = [&] {
      if (tile::warp_any(alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
        for (int i = 0; i < HEAD_DIM / 2; ++i) o_acc[i] *= alpha[(i / 2) % 2];
      }
      sm90::fence_registers(o_acc);
    };
    if constexpr (Cfg::kSeparateO)
      if (wg_tiles == 0 && lane == 0) sm90::mbarrier_arrive(&q_empty[qb]);  // these rows never read Q

    // K/V tile j of this work tile is tile it + j of the block's ring. O += P V of tile j (its
    // V buffer, waited for beforehand with wait_v), A from registers, V MN-major (16 keys =
    // 2048 bytes).
    auto wait_v = [&](std::int64_t j) {
      trace(sm90::TracePhase::v_wait, it + j);
      sm90::mbarrier_wait(&v_full[(it + j) % STAGES], static_cast<std::uint32_t>((it + j) / STAGES) % 2, "v_full");
    };
    auto v_desc = [&](std::int64_t j) {
      const int stage = static_cast<int>((it + j) % STAGES);
      return sm90::desc_mn_major(sm90::smem_u32(V_smem + stage * CHUNKS * BLOCK_N * 64), BLOCK_N * 128);
    };
    auto issue_pv = [&](std::uint64_t v) {
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk)
        sm90::wgmma_rs<HEAD_DIM, T>(o_acc, p_frag[kk], sm90::desc_advance(v, kk * 16 * 128), true);
    };
    auto release_v = [&](std::int64_t j) {
      if (lane == 0) sm90::mbarrier_arrive(&v_empty[(it + j) % STAGES]);
    };

    // Tile j; WITH_PV: every tile but the first, whose batch also holds the previous P V (a
    // compile-time flag: a branch between the wgmmas of one batch would make ptxas fence them).
    auto kv_tile = [&](std::int64_t j, auto masked_tag, auto with_pv_tag) {
      constexpr bool MASKED = decltype(masked_tag)::value, WITH_PV = decltype(with_pv_tag)::value;
      const int stage = static_cast<int>((it + j) % STAGES);
      const std::int64_t n0 = j * BLOCK_N;
      trace(sm90::TracePhase::k_wait, it + j);
      sm90::mbarrier_wait(&k_full[stage], static_cast<std::uint32_t>((it + j) / STAGES) % 2, "k_full");
      if (WITH_PV) wait_v(j - 1);

      // One batch, issued in this consumer's turn (the first S of a work tile, alone, takes
      // none): S = Q K^T of this tile (HEAD_DIM / 16 wgmmas chained on one accumulator; a commit
      // group of its own) and O += P V of the previous one.
      float s_acc[BLOCK_N / 2];
      // The descriptors are made before the turn, so that the turn only issues the GEMMs and
      // rescales O (fence_value keeps the compiler from sinking them past the barrier).
      std::uint64_t k_desc = sm90::desc_k_major(sm90::smem_u32(K_smem + stage * CHUNKS * BLOCK_N * 64));
      std::uint64_t pv_desc = 0;
      if constexpr (WITH_PV) pv_desc = v_desc(j - 1);
      sm90::fence_value(k_desc);
      sm90::fence_value(pv_desc);
      if constexpr (WITH_PV) {  // the first S takes no turn
        trace(sm90::TracePhase::turn, it + j);
        my_turn();
      }
      trace(sm90::TracePhase::issue, it + j);
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
      if constexpr (WITH_PV) {
        // O *= alpha of the previous tile while S occupies the tensor cores, before the P V
        // that adds to it (FlashAttention-3's order): off the softmax's path.
        rescale_o();
        sm90::wgmma_fence();
        issue_pv(pv_desc);
      }
      sm90::wgmma_commit();
      if constexpr (WITH_PV) next_turn();
      trace(sm90::TracePhase::s_wait, it + j);
      // Groups complete in order: with at most one pending, S is done, and the softmax below
      // runs while the tensor cores still work on P V (which reads p_frag, and writes o_acc:
      // neither is touched before the second wait).
      sm90::wgmma_wait<1>();
      sm90::fence_registers(s_acc);
      if (lane == 0) sm90::mbarrier_arrive(&k_empty[stage]);  // S is done with the K buffer
      if constexpr (Cfg::kSeparateO)
        if (j == wg_tiles - 1 && lane == 0) sm90::mbarrier_arrive(&q_empty[qb]);  // and, after its last tile, with Q
      trace(sm90::TracePhase::softmax, it + j);

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
      // must hide, so shortened: the row max as a tree (depth log2(BLOCK_N / 4) instead of a
      // chain of BLOCK_N / 4), the sum in four chains per row beside the exponents (below),
      // and the exponent as one FFMA, s * scale_log2 - m * scale_log2, wherever that is as exact
      // as step 07's (s - m) * scale_log2 (chapter 03): while |m * scale_log2| < 2^10, the
      // rounding of the bias costs at most 2^-14 in the exponent. A warp whose rows' maxima are
      // larger takes the subtract-first path.
      float m_new[2], m_use[2], bias[2];
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
      // P, unnormalised, and its row sums: four partial sums per row, each taking its exponent
      // as it arrives. A warp's ex2.approx instructions go out several cycles apart, and the
      // additions fill those gaps; summed as a tree after the last exponent (step 08), they
      // came after the whole stream instead.
      float part[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      if (!tile::warp_any(!(fabsf(bias[0]) < 1024.0f && fabsf(bias[1]) < 1024.0f))) {
#pragma unroll
        for (int i = 0; i < BLOCK_N / 2; ++i) {
          s_acc[i] = tile::exp2_approx(fmaf(s_acc[i], p.scale_log2, -bias[(i / 2) % 2]));
          part[(i / 2) % 2][(i / 4) % 4] += s_acc[i];
        }
      } else {
#pragma unroll
        for (int i = 0; i < BLOCK_N / 2; ++i) {
          s_acc[i] = tile::exp2_approx((s_acc[i] - m_use[(i / 2) % 2]) * p.scale_log2);
          part[(i / 2) % 2][(i / 4) % 4] += s_acc[i];
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) l_i[r] = l_i[r] * alpha[r] + ((part[r][0] + part[r][1]) + (part[r][2] + part[r][3]));

      trace(sm90::TracePhase::pv_wait, it + j);
      sm90::wgmma_wait<0>();  // P V of the previous tile is done: O and p_frag are free
      sm90::fence_registers(o_acc);
      trace(sm90::TracePhase::rescale, it + j);  // O is rescaled in the next turn; P is packed here
      if (WITH_PV) release_v(j - 1);
      // P as the A operand of the next batch: k-step kk (keys 16 kk ..) is elements 8 kk .. 8 kk + 7.
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) p_frag[kk][r] = tile::pack2<T>(s_acc[8 * kk + 2 * r], s_acc[8 * kk + 2 * r + 1]);
    };
    // What the epilogue needs that does not wait for the last P V: the row sums across the
    // four lanes of a row, 1 / l and the LSE. Computed between issuing the last P V and waiting
    // for it, so that they run while it is on the tensor cores, and for both rows at once
    // (with a branch per row, as before, the two rows ran one after the other: 800-1000
    // cycles per work tile at N = 1024, 110-210 now). lg2.approx (2^-22 absolute error) stands
    // in for log2f's polynomial; the LSE's tolerance is orders of magnitude wider.
    float inv_l[2], lse[2];
    auto finish_rows = [&] {
      float l[2] = {l_i[0], l_i[1]};
#pragma unroll
      for (int r = 0; r < 2; ++r) l[r] += vendor::shfl_xor(l[r], 1);
#pragma unroll
      for (int r = 0; r < 2; ++r) l[r] += vendor::shfl_xor(l[r], 2);
#pragma unroll
      for (int r = 0; r < 2; ++r) {  // both rows at once, without branches (l = 0: no visible key)
        const float rcp = __frcp_rn(l[r]), log2_l = __log2f(l[r]);
        inv_l[r] = l[r] > 0.0f ? rcp : 0.0f;
        lse[r] = l[r] > 0.0f ? (m_i[r] * p.scale_log2 + log2_l) * 0.69314718f : -INFINITY;
      }
      sm90::fence_registers(inv_l);
      sm90::fence_registers(lse);
    };
    if (wg_tiles > 0) {  // the first tile: S alone
      if (wg_full_tiles > 0) kv_tile(0, std::false_type{}, std::false_type{});
      else kv_tile(0, std::true_type{}, std::false_type{});
    }
    std::int64_t j = 1;
    for (; j < wg_full_tiles; ++j) kv_tile(j, std::false_type{}, std::true_type{});  // no mask arithmetic at all
    for (; j < wg_tiles; ++j) kv_tile(j, std::true_type{}, std::true_type{});  // the diagonal / ragged end
    if (wg_tiles > 0) {  // the last tile's P V, a batch of its own
      wait_v(wg_tiles - 1);
      std::uint64_t pv_desc = v_desc(wg_tiles - 1);
      sm90::fence_value(pv_desc);
      trace(sm90::TracePhase::issue, it + wg_tiles);  // no turn: nothing of this tile follows
      rescale_o();
      sm90::wgmma_fence();
      issue_pv(pv_desc);
      sm90::wgmma_commit();
      finish_rows();
      trace(sm90::TracePhase::pv_wait, it + wg_tiles);
      sm90::wgmma_wait<0>();
      sm90::fence_registers(o_acc);
      release_v(wg_tiles - 1);
    } else {
      finish_rows();
    }
    for (j = wg_tiles; j < n_tiles; ++j) {  // tiles none of these rows sees
      if (j > 0) {  // an empty turn in place of the batch S(j) + P V(j - 1), which keeps the ring's count
        trace(sm90::TracePhase::turn, it + j);
        my_turn();
        next_turn();
      }
      // Released unread, but only once they have landed: a release counts towards the phase
      // of the tile in the buffer.
      trace(sm90::TracePhase::k_wait, it + j);
      sm90::mbarrier_wait(&k_full[(it + j) % STAGES], static_cast<std::uint32_t>((it + j) / STAGES) % 2, "k_full");
      if (lane == 0) sm90::mbarrier_arrive(&k_empty[(it + j) % STAGES]);
      wait_v(j);
      release_v(j);
    }
    it += static_cast<std::uint32_t>(n_tiles);
    // [end:online_softmax]

    trace(sm90::TracePhase::epilogue, -1);
    // [start:epilogue]
    // O_i = o_acc / l_i and the LSE as step 08. The O rows of this warpgroup go into its own
    // 64 rows of the O buffer, laid out as TMA reads them, once the previous tile's store has
    // read them: stmatrix x4 writes a 16 x 16 block of a warp's rows per instruction, each
    // lane giving the address of one 8-element row (PTX ISA 9.7.14.5.16); its four registers
    // are the accumulator's layout (row lane / 4, columns 2 (lane % 4)) of the four 8 x 8
    // quarters. Then one thread stores them, one 64-column box per chunk, and moves on
    // without waiting. Staged in the Q buffer instead (no O buffer), the thread waits for TMA
    // to read them and then tells the producer (q_empty) that its part of the buffer is free.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const std::int64_t row = m0 + r0 + 8 * r;
      if (lane % 4 == 0 && p.lse != nullptr && row >= 0 && row < p.Nq) p.lse[w.bh * p.Nq + row] = lse[r];
    }
    trace(sm90::TracePhase::o_buffer_wait, -1);
    if constexpr (Cfg::kSeparateO) {
      // The previous work tile's O has left the buffer (its store has read it).
      if (warp == 0 && lane == 0) sm90::tma_store_wait_read();
      sm90::named_barrier_sync(1 + CONSUMERS + consumer, sm90::kWarpgroupThreads);
    }
    trace(sm90::TracePhase::o_write, -1);
    {
      const std::uint32_t o_base = sm90::smem_u32(O_smem);
      // Lane l addresses row l % 8 of quarter l / 8 of the warp's 16 x 16 block k: quarters
      // 0 and 1 are rows 0-7 and 8-15 of columns 0-7, quarters 2 and 3 the same of columns 8-15.
      const int st_row = 64 * consumer + 16 * warp + 8 * ((lane / 8) % 2) + lane % 8, st_col = 8 * (lane / 16);
#pragma unroll
      for (int k = 0; k < HEAD_DIM / 16; ++k) {
        std::uint32_t x[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const int i = 4 * (2 * k + m / 2) + 2 * (m % 2);
          x[m] = tile::pack2<T>(o_acc[i] * inv_l[m % 2], o_acc[i + 1] * inv_l[m % 2]);
        }
        const std::uint32_t addr = o_base + sm90::swizzle_128b(BLOCK_M, st_row, 16 * k + st_col);
        sm90::stmatrix_x4(addr, x);
      }
    }
    trace(sm90::TracePhase::o_fence, -1);
    sm90::fence_proxy_async_smem();  // these writes, then TMA's reads
    sm90::named_barrier_sync(1 + CONSUMERS + consumer, sm90::kWarpgroupThreads);
    trace(sm90::TracePhase::o_store, -1);
    // Staged in Q, warps 1-3 arrive on q_empty here, each for its own lane 0's reads of the
    // TileInfo (a release orders only its own thread's accesses; the named barrier above
    // orders them before warp 0's arrival too, but racecheck does not follow it). The phase
    // still completes only with warp 0's arrival, once TMA has read O.
    if constexpr (!Cfg::kSeparateO)
      if (warp != 0 && lane == 0) sm90::mbarrier_arrive(&q_empty[0]);
    if (warp == 0 && lane == 0) {
      // A consumer whose rows lie before row 0 (all 64 of them, see work_tile()) stores
      // nothing; past the last row TMA clips the box.
      for (int c = 0; c < CHUNKS && wg_row0 >= 0; ++c)
        sm90::tma_store_4d(&o_map, O_smem + c * BLOCK_M * 64 + 64 * consumer * 64, c * 64,
                           static_cast<int>(m0 + 64 * consumer), static_cast<int>(w.h), static_cast<int>(w.b));
      sm90::tma_store_commit();
      if constexpr (!Cfg::kSeparateO) {
        sm90::tma_store_wait_read();
        sm90::mbarrier_arrive(&q_empty[0]);
      }
    }
    ++local;
    trace(sm90::TracePhase::next_tile, -1);
    // [end:epilogue]
  }
  if constexpr (Cfg::kSeparateO)
    if (warp == 0 && lane == 0) sm90::tma_store_wait_read();  // the last O has left shared memory
  trace.stop();
}
// [end:kernel]

// [start:space]
// The configuration space: per compiled head dim, the shapes below. At D = 64 three
// consumers fit 128-key tiles in their 160 registers (S 64 + O 32 + P 32; FlashAttention-3's
// 192 x 128). Two consumers with 64-key tiles are left out (step 08 measured them no faster),
// 176-key tiles at D = 64 too (a 64 x 176 S is twice the work per exponent of D = 64's GEMMs:
// the softmax would be the longer phase), and three consumers at D = 128: with 128-key tiles
// their 160 registers cannot hold a 64 x 128 O, S and P (64 + 64 + 32 before any address);
// with 64-key tiles (64 + 32 + 16) they would, and that shape was not tried. 160-key tiles at
// D = 128 leave room for an O buffer, which 176-key ones do not.
template <int HEAD_DIM>
using Space = std::conditional_t<HEAD_DIM == 64,
                                 std::tuple<TileConfig<64, 3, 64, 4>, TileConfig<64, 2, 128, 2>,
                                            TileConfig<64, 3, 128, 2>>,
                                 std::tuple<TileConfig<HEAD_DIM, 2, 176, 2>, TileConfig<HEAD_DIM, 2, 160, 2>,
                                            TileConfig<HEAD_DIM, 2, 128, 2>>>;
// [end:space]

template <typename T, class Cfg>
void launch(const AttentionArgs& args, vendor::Stream stream, std::int64_t kv_section_bytes) {
  static_assert(Cfg::smem_bytes <= kMaxSmem, "the tiles exceed the shared memory of a block");
  const Params<T> p = make_params<T>(args, Cfg::BLOCK_M);
  // [start:grid]
  // One block per SM (a block takes all the registers of one), never more blocks than tiles.
  const std::int64_t work_tiles = p.B * p.Hq * p.m_tiles;  // at most 2^31 - 1: check_work_tiles()
  const int sms = vendor::multiprocessor_count();
  const unsigned blocks = static_cast<unsigned>(work_tiles < sms ? work_tiles : sms);
  // [end:grid]
  const CUtensorMap q_map = sm90::make_tensor_map(args.q, "q", Cfg::BLOCK_M);
  const CUtensorMap o_map = sm90::make_tensor_map(args.o, "o", 64);  // one consumer's 64 rows per box
  CUtensorMap k_map{}, v_map{};
  if (p.Nk > 0) {
    k_map = sm90::make_tensor_map(args.k, "k", Cfg::BLOCK_N);
    v_map = sm90::make_tensor_map(args.v, "v", Cfg::BLOCK_N);
  }
  // [start:sections]
  // Causal problems and full ones with a short last query tile (scheduler above): the tile
  // counter, zeroed on the stream before the launch (a memset of 4 bytes: one more operation
  // on the stream, inside every such call's measured time), where there are more work tiles
  // than blocks; with no more, each block's first tile is its only one, and the static deal
  // says so without a memset (MiniLM's 72 tiles: about 1 us of an 8 us call). Causal problems:
  // sections of the (batch, head) pairs whose K and V fit in kv_section_bytes together
  // (l2_sections.h).
  std::uint32_t* tile_counter = nullptr;
  std::uint32_t section = 1;
  if ((p.mask != Mask::none || p.Nq % Cfg::BLOCK_M != 0) && work_tiles > blocks) {
    tile_counter = static_cast<std::uint32_t*>(args.workspace);
    vendor::memset_device_async(tile_counter, 0, sizeof(std::uint32_t), stream);
  }
  if (p.mask != Mask::none)
    section = static_cast<std::uint32_t>(
        l2_section_pairs(p.B, p.Hq, p.Hkv, p.Nk, Cfg::HEAD_DIM, static_cast<int>(sizeof(T)), kv_section_bytes));
  // [end:sections]
  const void* kernel = reinterpret_cast<const void*>(&attention_kernel<T, Cfg>);
  vendor::set_max_dynamic_smem(kernel, Cfg::smem_bytes);
  attention_kernel<T, Cfg><<<blocks, Cfg::kThreads, Cfg::smem_bytes, stream>>>(q_map, k_map, v_map, o_map, p, work_tiles,
                                                                               tile_counter, section);
  FLASHSTEPS_CHECK_LAUNCH("step09::attention_kernel");
}

// work_tile() divides in 32 bits: more than 2^31 - 1 work tiles (reachable: head_dim 8,
// seqlen_q 1, batch 2 and 2^30 heads fit an H200) are refused by name, before anything is launched.
void check_work_tiles(const AttentionArgs& args, int block_m) {
  const std::int64_t work_tiles = args.batch() * args.heads_q() * ((args.seqlen_q() + block_m - 1) / block_m);
  if (work_tiles > std::numeric_limits<std::int32_t>::max())
    throw exceeds_limit("step 09",
                        "q.shape[0] (batch) * q.shape[1] (heads_q) * ceil(q.shape[2] (seqlen_q) / " +
                            std::to_string(block_m) + ") (work tiles)",
                        work_tiles, "the 32-bit work-tile index", std::numeric_limits<std::int32_t>::max());
}

// The tile counter: workspace_bytes(args) bytes, 4-byte aligned.
void check_workspace(const AttentionArgs& args) {
  const std::size_t needed = workspace_bytes(args);
  if (needed > 0 && (args.workspace == nullptr || args.workspace_size < needed))
    throw InvalidArgument("workspace_size = " + std::to_string(args.workspace_size) + " bytes (workspace " +
                          (args.workspace == nullptr ? "null" : "set") + "): step 09 needs " + std::to_string(needed) +
                          " bytes for its tile counter (see workspace_bytes)");
  if (needed > 0 && reinterpret_cast<std::uintptr_t>(args.workspace) % alignof(std::uint32_t) != 0)
    throw InvalidArgument("workspace: must be 4-byte aligned (the tile counter)");
}

// Runs configuration Cfg (one candidate of the space) on checked arguments: the limits that
// depend on its shape first, then the launch.
template <class Cfg>
void run_config(const AttentionArgs& args, vendor::Stream stream) {
  if (is_empty(args)) return;
  check_work_tiles(args, Cfg::BLOCK_M);
  check_workspace(args);
  const std::int64_t kv_section_bytes = args.mask != Mask::none ? l2_section_bytes("FLASHSTEPS_STEP09_SECTION_MIB") : 0;
  sm90::require_sm90("step 09");
  vendor::dispatch_dtype(args.q.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, float>) launch<T, Cfg>(args, stream, kv_section_bytes);
  });
}

}  // namespace

std::string TileShape::name() const {
  return "m" + std::to_string(block_m) + "_n" + std::to_string(block_n) + "_s" + std::to_string(stages);
}

std::optional<TileShape> TileShape::parse(const std::string& text) {
  TileShape t;
  char tail = 0;
  if (std::sscanf(text.c_str(), "m%d_n%d_s%d%c", &t.block_m, &t.block_n, &t.stages, &tail) != 3) return std::nullopt;
  if (t.name() != text) return std::nullopt;  // no signs, no leading zeros
  return t;
}

const std::vector<Candidate>& space(int head_dim) {
  static const std::vector<Candidate> none;
  const std::vector<Candidate>* out = &none;
  if (padded_head_dim_sm90(head_dim) == head_dim)  // a compiled head dim: built once, on first use
    dispatch_head_dim_sm90(head_dim, "step 09", [&](auto head_dim_tag) {
      static const std::vector<Candidate> s = std::apply(
          [](auto... cfg) { return std::vector<Candidate>{{decltype(cfg)::shape(), &run_config<decltype(cfg)>}...}; },
          Space<decltype(head_dim_tag)::value>{});
      out = &s;
    });
  return *out;
}

// [start:default_shape]
// Measured on the H200 (bf16, N 512-8192, results/nvidia-h200/runs/step09-shapes-*,
// step09-softmax-levers-*, step09-epilogue-levers-* and step09-n128-div32-0ad6688): at
// D = 128 the 176-key tiles gain 0-5% on full problems and lose up to 9% on short causal
// ones; on full problems of at most 4096 keys 160-key tiles, whose O buffer lets the next Q
// load early, are 0.7-2.9% ahead of them (1% behind at 8192 keys), and up to 2048 keys
// 128-key tiles are ahead of both (17% at 512 keys, 7% at 1024, 1% at 2048; level at 4096),
// as they pad no key tile where 128 divides the keys (2048 keys are 12.8 tiles of 160); at
// D = 64 three consumers with 128-key tiles gain 3-12% over two (full) and over 64-key
// tiles (causal). On causal
// problems of at most 1024 keys the 64-key tiles were 3% ahead until masked query tiles were
// aligned to the last row; since then the 128-key ones are 4% ahead at 1024 keys
// (runs/step09-turns-end-aligned-0835aa0).
TileShape default_shape(int head_dim, Mask mask, std::int64_t seqlen_k) {
  if (head_dim == 64) return TileShape{192, 128, 2};
  if (mask != Mask::none || seqlen_k <= 2048) return TileShape{128, 128, 2};
  return seqlen_k <= 4096 ? TileShape{128, 160, 2} : TileShape{128, 176, 2};
}
// [end:default_shape]

// The tile counter (see the scheduler): 4 bytes for every problem that is not empty. Full
// problems whose seqlen_q is a multiple of the shape's BLOCK_M do not use it, nor problems of
// no more work tiles than SMs; the shape is chosen per call (and may be forced), so the
// contract does not depend on it.
std::size_t workspace_bytes(const AttentionArgs& args) { return !is_empty(args) ? sizeof(std::uint32_t) : 0; }

StepInfo info() {
  StepInfo i{9, "persistent",
             "Hopper: a persistent grid, the O tile stored by TMA, 160- and 176-key tiles at D = 128 (sm_90a)"};
  i.accepts_fp32 = false, i.head_dim_multiple = 8, i.alignment_elems = 8, i.max_head_dim = 128;
  return i;
}

// The tuner: step 06's (common/src/tuner.cpp), given step 09's space, tables and default.
tuning::Tuner<TileShape>& tuner() {
  static tuning::Tuner<TileShape> t(
      {"step 09", "step09", "shape", "FLASHSTEPS_STEP09_SHAPE", "FLASHSTEPS_STEP09_TUNE_CACHE", "m128_n176_s2"},
      kTunedTables, &padded_head_dim_sm90, &space,
      [](const AttentionArgs& args, int head_dim) { return default_shape(head_dim, args.mask, args.seqlen_k()); });
  return t;
}

// [start:launcher]
namespace {
// The shape to run: @p forced, else the tuner's choice (FLASHSTEPS_STEP09_SHAPE, the user's
// cache, FLASHSTEPS_TUNE=1, the tables of tuned/, default_shape(): tuner.h).
void forward(const AttentionArgs& args, vendor::Stream stream, const TileShape* forced) {
  validate(args);
  check_tensor_core_args(args, "step 09");
  for (const auto& [name, n] : {std::pair<const char*, std::int64_t>{"q.shape[2] (seqlen_q)", args.seqlen_q()},
                                std::pair<const char*, std::int64_t>{"k.shape[2] (seqlen_k)", args.seqlen_k()},
                                std::pair<const char*, std::int64_t>{"q.shape[0] (batch)", args.batch()},
                                std::pair<const char*, std::int64_t>{"q.shape[1] (heads_q)", args.heads_q()}})
    if (n > std::numeric_limits<std::int32_t>::max())  // TMA coordinates are 32-bit
      throw exceeds_limit("step 09", name, n, "TMA's 32-bit coordinates", std::numeric_limits<std::int32_t>::max());
  // work_tile() adds a tile's rows (up to 192) to its first row in 32 bits.
  constexpr std::int64_t kMaxSeqlenQ = std::numeric_limits<std::int32_t>::max() - 256;
  if (args.seqlen_q() > kMaxSeqlenQ)
    throw exceeds_limit("step 09", "q.shape[2] (seqlen_q)", args.seqlen_q(), "a work tile's 32-bit rows", kMaxSeqlenQ);
  dispatch_head_dim_sm90(args.head_dim(), "step 09", [](auto) {});  // head_dim up to 128, by name
  if (forced == nullptr && is_empty(args)) return;  // nothing to run, nothing to choose (no cache read)
  const Candidate& c = forced != nullptr ? tuner().find(padded_head_dim_sm90(args.head_dim()), *forced, "shape")
                                         : tuner().select(args, stream, /*may_tune=*/true);
  c.launch(args, stream);  // run_config(): the shape's own limits, then the kernel
}
}  // namespace

void attention_forward(const AttentionArgs& args, vendor::Stream stream) { forward(args, stream, nullptr); }

void attention_forward_with(const AttentionArgs& args, vendor::Stream stream, const TileShape& shape) {
  forward(args, stream, &shape);
}
// [end:launcher]

}  // namespace flashsteps::step09
