// SPDX-License-Identifier: Apache-2.0
// FlashSteps step 06 of the series — autotuned.   previous: 05_causal · next: (Hopper steps)
//
// What changes against step 05:
//   - the tile shape (BLOCK_M, BLOCK_N, WARPS, STAGES) becomes a declared configuration space,
//     per vendor, instantiated at compile time and pruned by a predicate (shared memory,
//     accumulator registers, tile size); TileConfig's static_asserts name the parameter that
//     breaks a rule
//   - one new kernel variant joins the space, OVERLAP: S of tile j + 1 is computed before the
//     softmax of tile j, so one warp can keep the tensor cores and the FP32 units busy at once
//     (three K/V stages, two S accumulators); otherwise the kernel is step 05's but for the
//     next three points
//   - causal blocks go heaviest first within sections of heads whose K and V fit in L2
//     together, section after section, instead of heaviest first over every head at once
//     (l2_sections.h): the blocks running together then read a few heads' K and V from L2
//   - P is rounded to 16 bits once, right after the row sums and before the rescale of O
//     (tile::pack_p), and the mask compares column offsets, not columns: ptxas then fits
//     128 x 128 x 4 at D = 64, the shape most D = 64 problems run, without spilling
//     (+0.5% to +5.4% on the H200 in an A/B, results/nvidia-h200/runs/step06-packed-p-cbf72b0/)
//   - a block's start and end cost less: the (batch, head) and KV head indices are divided in
//     32 bits, and the epilogue takes log2 l_i in one instruction (lg2.approx) and writes the
//     LSE once per row, after the loop over O (+0.4% to +3.6% up to N = 4096 on an H100, most
//     at N = 512, in an A/B, results/nvidia-h100/runs/step06-ends-fade74f/); then 1 / l_i in
//     one instruction too, every row without a branch, and a barrier of the warp, not the
//     block, before the epilogue and before its stores (+1.5% to +2.4% at D = 64 up to
//     N = 4096 on an H100 but -0.9% at causal N = 1024, -1.6% to +1.0% elsewhere,
//     results/nvidia-h100/runs/step06-ends3-3ca9239/)
//   - a runtime tuner times every surviving shape once per key (device, dtype, head dim,
//     causal, seqlen bucket) and caches its choice in JSON; without tuning, a table measured
//     on the H200 and checked in (steps/06_autotuned/tuned/) or, elsewhere, step 05's fixed
//     shapes are used (common/include/flashsteps/tuner.h says in which order; step 09 reuses it)
// Why it is faster: the best shape depends on the head dim, the mask and the sequence length
// (short sequences want more, smaller blocks to fill 132 SMs; long ones want the widest tiles
// the registers allow). One fixed shape leaves that on the table.
// Measured on an NVIDIA H200 (bf16, D = 128, N = 8192, non-causal): 355.2 TFLOP/s
// (results/nvidia-h200/step06.json, commit 02d8e73).
// The chapter compares it with PyTorch SDPA's FlashAttention-2 backend measured in the same
// run and timed by the same loop: at or above it at every causal point of D = 128, at the
// longest D = 64 causal ones and on the longer D = 128 full ones, short of it on the shorter
// full ones, on most D = 64 full ones and on the middle lengths of D = 64 causal, which the
// course's target asks to pass; it says where the gap is.
// Limits: as step 05 (fp16/bf16, head_dim a multiple of 8 up to 256, 16-byte alignment).
// Chapter: book/steps/06_autotuned.md
#include <cmath>
#include <cstddef>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include "flashsteps/dispatch.h"
#include "flashsteps/l2_sections.h"
#include "flashsteps/params.h"
#include "flashsteps/step.h"
#include "flashsteps/tile.h"
#include "tuner.h"  // TileChoice, Candidate and tuner(): which shape runs a call

namespace flashsteps::step06 {

namespace {

// [start:tile_config]
// A block of WARPS warps computes BLOCK_M query rows (WARP_M = BLOCK_M / WARPS per warp)
// against the keys, BLOCK_N at a time, through STAGES shared-memory buffers of K and V.
// OVERLAP: compute S of tile j + 1 while the softmax of tile j runs (needs STAGES >= 3 and a
// second S accumulator).
template <int BLOCK_M_, int BLOCK_N_, int WARPS_, int STAGES_, bool OVERLAP_ = false>
struct TileConfig {
  static constexpr int BLOCK_M = BLOCK_M_, BLOCK_N = BLOCK_N_, WARPS = WARPS_, STAGES = STAGES_;
  static constexpr bool OVERLAP = OVERLAP_;
  static_assert(!OVERLAP || STAGES >= 3, "OVERLAP needs STAGES >= 3 (tiles j and j + 1 resident while j + 2 loads)");
  static constexpr int kThreads = WARPS * vendor::kWarpSize;
  static constexpr int WARP_M = BLOCK_M / WARPS;
  static_assert(BLOCK_M % (WARPS * tile::kAtomM) == 0, "BLOCK_M must give every warp a multiple of 16 rows");
  static_assert(BLOCK_N % 16 == 0, "BLOCK_N must be a multiple of 16 (the k-step of P V)");
  static_assert(STAGES >= 2, "STAGES must be at least 2 (one K/V buffer loading, one in use)");
  /// Q tile plus STAGES K tiles and STAGES V tiles, 16-bit, padded rows.
  template <int HEAD_DIM>
  static constexpr std::size_t smem_bytes() {
    return static_cast<std::size_t>(BLOCK_M + 2 * STAGES * BLOCK_N) * tile::smem_pitch(HEAD_DIM) * 2;
  }
};
// [end:tile_config]

// [start:config_space]
// The declared space: every combination of these values is considered...
#if FLASHSTEPS_VENDOR_HIP
// AMD: 64 KiB of LDS, so smaller tiles (and 2 waves, for the 256-wide head dim); one stage
// more than two buys nothing, because the copies are synchronous (no cp.async).
inline constexpr int kBlockMs[] = {32, 64, 128};
inline constexpr int kBlockNs[] = {16, 32, 64};
inline constexpr int kWarpCounts[] = {2, 4};
inline constexpr int kStageCounts[] = {2};
inline constexpr int kOverlaps[] = {0};
constexpr std::size_t kMaxSmem = 64 * 1024;  // LDS per workgroup
constexpr int kAccBudget = 128;              // fp32 accumulator values per lane (of 512 VGPRs)
#else
inline constexpr int kBlockMs[] = {64, 128};
inline constexpr int kBlockNs[] = {32, 64, 128};
inline constexpr int kWarpCounts[] = {4, 8};
inline constexpr int kStageCounts[] = {2, 3};
inline constexpr int kOverlaps[] = {0, 1};
constexpr std::size_t kMaxSmem = 227 * 1024;  // NVIDIA sm_80/sm_90: opt-in shared memory per block
constexpr int kAccBudget = 192;               // of 255 registers per thread: the rest is addresses
#endif
inline constexpr int kNumBlockM = static_cast<int>(std::size(kBlockMs)), kNumBlockN = static_cast<int>(std::size(kBlockNs));
inline constexpr int kNumWarps = static_cast<int>(std::size(kWarpCounts)), kNumStages = static_cast<int>(std::size(kStageCounts));
inline constexpr int kNumOverlaps = static_cast<int>(std::size(kOverlaps));
inline constexpr int kSpaceSize = kNumBlockM * kNumBlockN * kNumWarps * kNumStages * kNumOverlaps;

// ...and this predicate prunes it, before anything is instantiated:
template <int HEAD_DIM, int BLOCK_M, int BLOCK_N, int WARPS, int STAGES, int OVERLAP>
constexpr bool keep_config() {
  if (BLOCK_M % (WARPS * tile::kAtomM) != 0) return false;  // whole 16-row MMA tiles per warp
  constexpr int WARP_M = BLOCK_M / WARPS;
  if (WARP_M > 32) return false;  // at most 2 row tiles per warp (registers)
  // S (WARP_M x BLOCK_N, twice with OVERLAP) and O (WARP_M x HEAD_DIM) accumulators must fit
  // the registers.
  if (WARP_M * ((1 + OVERLAP) * BLOCK_N + HEAD_DIM) / vendor::kWarpSize > kAccBudget) return false;
  if (OVERLAP && STAGES < 3) return false;  // tiles j, j + 1 resident while j + 2 loads
  if (static_cast<std::size_t>(BLOCK_M + 2 * STAGES * BLOCK_N) * tile::smem_pitch(HEAD_DIM) * 2 > kMaxSmem) return false;
  // K tiles of 4 to 16 KiB: smaller ones pay a barrier per few MMAs, larger ones starve the
  // registers; a third stage only for the 8 KiB middle, where it can still hide latency.
  if (BLOCK_N * HEAD_DIM < 2048 || BLOCK_N * HEAD_DIM > 8192) return false;
  if (STAGES == 3 && BLOCK_N * HEAD_DIM != 4096) return false;
  return true;
}
// [end:config_space]

// [start:kernel]
template <typename T, int HEAD_DIM, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads) attention_kernel(Params<T> p, std::int64_t section) {
  constexpr int BLOCK_M = Cfg::BLOCK_M, BLOCK_N = Cfg::BLOCK_N, WARP_M = Cfg::WARP_M, STAGES = Cfg::STAGES;
  constexpr int PITCH = tile::smem_pitch(HEAD_DIM);
  using SAcc = tile::Acc<WARP_M, BLOCK_N>;  // this warp's scores S (then P)
  using OAcc = tile::Acc<WARP_M, HEAD_DIM>; // this warp's unnormalised output O
  constexpr int kSlots = SAcc::kSlots;      // query rows per lane
  extern __shared__ uint4 smem_u4[];        // uint4: 16-byte aligned for the copies
  T* Q_smem = reinterpret_cast<T*>(smem_u4);        // [BLOCK_M][PITCH]
  T* K_smem = Q_smem + BLOCK_M * PITCH;             // [STAGES][BLOCK_N][PITCH]
  T* V_smem = K_smem + STAGES * BLOCK_N * PITCH;    // [STAGES][BLOCK_N][PITCH]
  const int warp = threadIdx.x / vendor::kWarpSize;

  // [start:schedule]
  // One block per (batch, head, query tile), flattened into blockIdx.x. Causal: the (batch,
  // head) pairs go in sections of `section` whose K and V fit in L2 together, section after
  // section; within one, the query tile is the slow index, counted down, so the first blocks
  // issued are the last query tiles of its heads, which see the most keys
  // (longest-processing-time first; with one section of every pair, step 05's order). Full:
  // the query tile is the fast index, so the blocks running together share one head's K and
  // V in L2.
  const std::int64_t BH = p.B * p.Hq;
  std::int64_t bh, m_tile;
  if (p.mask != Mask::none) {
    const std::int64_t sec = blockIdx.x / (section * p.m_tiles), r = blockIdx.x - sec * section * p.m_tiles;
    const std::int64_t pairs = BH - sec * section < section ? BH - sec * section : section;  // the last may hold fewer
    bh = sec * section + r % pairs;
    m_tile = p.m_tiles - 1 - r / pairs;
  } else {
    // 32-bit divisions: the launcher has checked that the blocks fit a grid, so these fit
    const unsigned m_tiles = static_cast<unsigned>(p.m_tiles);
    bh = blockIdx.x / m_tiles;
    m_tile = blockIdx.x % m_tiles;
  }
  const unsigned Hq = static_cast<unsigned>(p.Hq), bh32 = static_cast<unsigned>(bh), h32 = bh32 % Hq;
  const std::int64_t b = bh32 / Hq, h = h32, hk = h32 / (Hq / static_cast<unsigned>(p.Hkv));
  const std::int64_t m0 = m_tile * BLOCK_M;
  // [end:schedule]
  const T* q = p.q + b * p.q_stride[0] + h * p.q_stride[1] + m0 * p.q_stride[2];
  const T* k = p.k + b * p.k_stride[0] + hk * p.k_stride[1];
  const T* v = p.v + b * p.v_stride[0] + hk * p.v_stride[1];
  // [start:early_exit]
  // The block's last query row sees the most keys: tiles past its last visible key are hidden
  // from every row of the block and are skipped. Tiles up to the first row's last visible key
  // are visible in full to every row and need no mask.
  const std::int64_t last_row = (m0 + BLOCK_M < p.Nq ? m0 + BLOCK_M : p.Nq) - 1;
  const std::int64_t n_tiles = (last_visible_key(p.mask, last_row, p.Nq, p.Nk) + BLOCK_N) / BLOCK_N;
  const std::int64_t first_row_last_key = last_visible_key(p.mask, m0, p.Nq, p.Nk);
  const std::int64_t n_full_tiles = (first_row_last_key + 1) / BLOCK_N;  // <= n_tiles
  // [end:early_exit]

  // [start:pipeline]
  // Tile j's K and V go to buffer j % STAGES. Prologue: Q and the first STAGES - 1 tiles, one
  // commit group per tile (Q rides with tile 0). Every iteration commits one group (maybe
  // empty), so "tile j has landed" is always "at most STAGES - 2 groups still in flight".
  auto load_kv = [&](std::int64_t j) {
    const int stage = static_cast<int>(j % STAGES);
    const std::int64_t n0 = j * BLOCK_N;
    tile::load_tile_async<BLOCK_N, HEAD_DIM, Cfg::kThreads>(K_smem + stage * BLOCK_N * PITCH, PITCH,
                                                            k + n0 * p.k_stride[2], p.k_stride[2], p.Nk - n0, p.D);
    tile::load_tile_async<BLOCK_N, HEAD_DIM, Cfg::kThreads>(V_smem + stage * BLOCK_N * PITCH, PITCH,
                                                            v + n0 * p.v_stride[2], p.v_stride[2], p.Nk - n0, p.D);
  };
  if (n_tiles > 0)  // a block that sees no key writes zeros and needs no Q (the epilogue says why)
    tile::load_tile_async<BLOCK_M, HEAD_DIM, Cfg::kThreads>(Q_smem, PITCH, q, p.q_stride[2], p.Nq - m0, p.D);
#pragma unroll
  for (int j = 0; j < STAGES - 1; ++j) {
    if (j < n_tiles) load_kv(j);
    tile::commit();
  }
  // [end:pipeline]

  // [start:online_softmax]
  OAcc o_acc;
  o_acc.zero();
  float m_i[kSlots], l_i[kSlots];  // running max of the unscaled scores; this lane's part of the sum
#pragma unroll
  for (int s = 0; s < kSlots; ++s) m_i[s] = -INFINITY, l_i[s] = 0.0f;
  const std::int64_t row0 = m0 + warp * WARP_M;  // first query row of this warp

  // S = Q K^T of tile j for this warp's rows, unscaled.
  auto compute_s = [&](std::int64_t j, SAcc& s_acc) {
    tile::mma_ABt<HEAD_DIM>(s_acc, Q_smem + warp * WARP_M * PITCH, K_smem + static_cast<int>(j % STAGES) * BLOCK_N * PITCH);
  };
  // The rest of tile j: the mask when MASKED, the online softmax, O += P V.
  auto softmax_pv = [&](std::int64_t j, SAcc& s_acc, auto masked_tag) {
    constexpr bool MASKED = decltype(masked_tag)::value;
    const int stage = static_cast<int>(j % STAGES);
    const std::int64_t n0 = j * BLOCK_N;
    if constexpr (MASKED) {  // some key of the tile is hidden from some row
      // Last visible column of each of this lane's rows, relative to the tile (-1: none), less
      // the lane's first column col0, and so are the columns compared with it: what is left of
      // a column is a constant (an immediate of the compare), not one more register per column
      // while the compiler computes the compares early, under the MMAs of S (with P's packing
      // below, what keeps 128x128x4 at D = 64 from spilling).
      const int col0 = SAcc::col(0);
      int last_col[kSlots];
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const std::int64_t last = last_visible_key(p.mask, row0 + SAcc::slot_row(s), p.Nq, p.Nk) - n0;
        last_col[s] = static_cast<int>(last < -1 ? -1 : last > BLOCK_N ? BLOCK_N : last) - col0;
      }
      s_acc.for_each([&](int s, int, int col, float& x) {
        if (col - col0 > last_col[s]) x = -INFINITY;
      });
    }
    float m_new[kSlots], m_use[kSlots], alpha[kSlots];
#pragma unroll
    for (int s = 0; s < kSlots; ++s) m_new[s] = m_i[s];
    tile::row_max(s_acc, m_new);
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      // P = exp2((S - m) scale_log2): subtract before scaling (tile.h says why). A row with
      // no visible key so far keeps m = -inf; it subtracts 0 instead, so P = 0 and no NaN appears.
      m_use[s] = m_new[s] == -INFINITY ? 0.0f : m_new[s];
      // alpha rescales what was summed under the old max: exactly 1 when the max is unchanged
      // (and for a row that has seen no visible key: its sums are still 0).
      alpha[s] = m_new[s] == -INFINITY ? 1.0f : tile::exp2_approx((m_i[s] - m_new[s]) * p.scale_log2);
      m_i[s] = m_new[s];
      l_i[s] *= alpha[s];
    }
    tile::exp2_rows(s_acc, m_use, p.scale_log2);  // s_acc now holds P (unnormalised)
    tile::row_sum(s_acc, l_i);
    // P rounded to T now, before the rescale of O: the float accumulator of S dies here, not
    // after the branch below, which it would otherwise live across (128x128x4 at D = 64 and
    // 128x64x4 at D = 96 spilled without it). The same rounding mma_AB() does, so the same
    // result. Not with OVERLAP: there the packed P of tile j lives beside S of tile j + 1, and
    // 128x32x4x3 at D = 128 spills instead.
    [[maybe_unused]] tile::PackedP<T, WARP_M, BLOCK_N> p_packed;
    if constexpr (!Cfg::OVERLAP) p_packed = tile::pack_p<T>(s_acc);
    // Rescale O only when some row's max grew (alpha != 1): after the first tiles a new
    // maximum is rare, and the multiply by exactly 1 it skips changes nothing.
    bool grew = false;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) grew = grew || alpha[s] != 1.0f;
    if (tile::warp_any(grew)) tile::mul_row(o_acc, alpha);
    if constexpr (!Cfg::OVERLAP)
      tile::mma_AB<HEAD_DIM, T>(o_acc, p_packed, V_smem + stage * BLOCK_N * PITCH);
    else
      tile::mma_AB<HEAD_DIM, T>(o_acc, s_acc, V_smem + stage * BLOCK_N * PITCH);
  };
  // One KV tile, as in step 05.
  auto kv_tile = [&](std::int64_t j, auto masked_tag) {
    tile::wait_pending<STAGES - 2>();
    __syncthreads();  // tile j is visible to all; every warp is done with tile j - 1's buffer
    if (j + STAGES - 1 < n_tiles) load_kv(j + STAGES - 1);  // into the buffer tile j - 1 used
    tile::commit();
    SAcc s_acc;
    compute_s(j, s_acc);
    softmax_pv(j, s_acc, masked_tag);
  };
  // [start:split_loop]
  std::int64_t j = 0;
  if constexpr (!Cfg::OVERLAP) {
    for (; j < n_full_tiles; ++j) kv_tile(j, std::false_type{});  // no mask arithmetic at all
    for (; j < n_tiles; ++j) kv_tile(j, std::true_type{});        // the diagonal / ragged end
  } else {
    // [start:overlap]
    // Tile j with S of tile j + 1 computed first: the two are independent, so the compiler
    // interleaves the tensor-core instructions of one with the softmax arithmetic of the
    // other, and both pipes of the SM stay busy within one warp. Tiles j and j + 1 are
    // resident (at most STAGES - 3 copy groups in flight) while tile j + 2 loads. The two S
    // accumulators swap roles every tile (the loop is unrolled by two: no register copies).
    auto overlapped_tile = [&](std::int64_t jj, SAcc& s_cur, SAcc& s_next) {
      tile::wait_pending<STAGES - 3>();
      __syncthreads();  // tiles jj, jj + 1 visible; every warp is done with tile jj - 1's buffer
      if (jj + STAGES - 1 < n_tiles) load_kv(jj + STAGES - 1);
      tile::commit();
      if (jj + 1 < n_tiles) compute_s(jj + 1, s_next);
      if (jj < n_full_tiles)
        softmax_pv(jj, s_cur, std::false_type{});
      else
        softmax_pv(jj, s_cur, std::true_type{});
    };
    SAcc s_a, s_b;
    if (n_tiles > 0) {
      tile::wait_pending<STAGES - 2>();
      __syncthreads();
      compute_s(0, s_a);
    }
    for (; j + 1 < n_tiles; j += 2) {
      overlapped_tile(j, s_a, s_b);
      overlapped_tile(j + 1, s_b, s_a);
    }
    if (j < n_tiles) overlapped_tile(j, s_a, s_b);
    // [end:overlap]
  }
  // [end:split_loop]
  tile::wait_pending<0>();  // nothing may still be landing when the block exits
  // The epilogue reuses this warp's rows of the Q tile, which no other warp reads: a barrier of
  // the warp (its lanes are done reading them), not of the block, so a warp that is done goes
  // on without waiting for the others. Q, copied by every warp, has landed: the first tile's
  // wait and barrier saw to it (a block with no tile copies none).
  tile::sync_warp();
  // [end:online_softmax]

  // [start:epilogue]
  // Deferred normalisation: O_i = o_acc / l_i; a row with no visible key (l_i = 0) gets 0.
  // Every row's sum first, then 1 / l and the logarithm of every row, without a branch: with
  // a branch per row (l > 0 ? 1 / l : 0, and 1 / l's own slow path) the rows' shuffles and
  // reciprocals ran one row after the other.
  float l[kSlots], inv_l[kSlots], lse[kSlots];
#pragma unroll
  for (int s = 0; s < kSlots; ++s) l[s] = tile::row_allreduce_sum(l_i[s]);
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    // l >= 1 in a row with a visible key (its maximum adds 2^0): there the one-instruction
    // reciprocal is 1 ulp off at most, and the one-instruction logarithm 2^-22 (absolute below
    // l = 2, relative from l = 2 on), where 1.0f / l branches to a slow path and log2f() spends
    // a dozen FFMAs and range checks on inputs l never takes (NVIDIA; on AMD v_rcp_f32, 1 ulp,
    // and the device library's log2).
    const float rcp = tile::rcp_approx(l[s]), log2_l = tile::log2_approx(l[s]);  // +inf, -inf at l = 0: unused
    inv_l[s] = l[s] > 0.0f ? rcp : 0.0f;
    // LSE_i = ln(sum_j e^{scale S_ij}) = (m_i scale log2(e) + log2 l_i) ln 2
    lse[s] = l[s] > 0.0f ? (m_i[s] * p.scale_log2 + log2_l) * 0.69314718f : -INFINITY;
  }
  // O goes out through shared memory, so that global stores are whole 16-byte rows: each warp
  // rounds its rows into its own rows of the Q tile (no other warp reads them), then copies.
  T* o_stage = Q_smem + warp * WARP_M * PITCH;
  o_acc.for_each([&](int s, int row, int col, float x) { o_stage[row * PITCH + col] = vendor::from_float<T>(x * inv_l[s]); });
  if (p.lse != nullptr && OAcc::col(0) == 0) {  // the lanes that hold column 0 write their rows' LSE
#pragma unroll
    for (int s = 0; s < kSlots; ++s)
      if (row0 + OAcc::slot_row(s) < p.Nq) p.lse[bh * p.Nq + row0 + OAcc::slot_row(s)] = lse[s];
  }
  tile::sync_warp();  // the staged rows are visible to every lane of the warp
  T* o = p.o + b * p.o_stride[0] + h * p.o_stride[1] + row0 * p.o_stride[2];
  tile::store_tile<WARP_M, HEAD_DIM, vendor::kWarpSize>(o, p.o_stride[2], p.Nq - row0, p.D, o_stage, PITCH,
                                                        threadIdx.x % vendor::kWarpSize);
  // [end:epilogue]
}
// [end:kernel]

// [start:launch]
// Launches the kernel of one configuration (the launcher of step 05, templated on the tile).
template <int HEAD_DIM, class Cfg>
void launch(const AttentionArgs& args, vendor::Stream stream) {
  static_assert(Cfg::template smem_bytes<HEAD_DIM>() <= kMaxSmem, "the tiles exceed the shared memory of a block");
  vendor::dispatch_dtype(args.q.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, float>) {
      const Params<T> p = make_params<T>(args, Cfg::BLOCK_M);
      const unsigned blocks = grid_blocks(p, Cfg::kThreads, "step 06");
      const std::int64_t section =
          p.mask != Mask::none ? l2_section_pairs(p.B, p.Hq, p.Hkv, p.Nk, HEAD_DIM, static_cast<int>(sizeof(T)),
                                                  l2_section_bytes("FLASHSTEPS_STEP06_SECTION_MIB"))
                               : 1;
      constexpr std::size_t smem_bytes = Cfg::template smem_bytes<HEAD_DIM>();
      const void* kernel = reinterpret_cast<const void*>(&attention_kernel<T, HEAD_DIM, Cfg>);
      vendor::set_max_dynamic_smem(kernel, smem_bytes);  // above 48 KiB needs an opt-in
      attention_kernel<T, HEAD_DIM, Cfg><<<blocks, Cfg::kThreads, smem_bytes, stream>>>(p, section);
      FLASHSTEPS_CHECK_LAUNCH("step06::attention_kernel");
    }
  });
}

// Instantiates configuration I of the space (mixed radix over the five value lists) when the
// predicate keeps it.
template <int HEAD_DIM, int I>
void add_config(std::vector<Candidate>& out) {
  constexpr int OVERLAP = kOverlaps[I % kNumOverlaps];
  constexpr int J = I / kNumOverlaps;
  constexpr int BLOCK_M = kBlockMs[J / (kNumStages * kNumWarps * kNumBlockN)];
  constexpr int BLOCK_N = kBlockNs[(J / (kNumStages * kNumWarps)) % kNumBlockN];
  constexpr int WARPS = kWarpCounts[(J / kNumStages) % kNumWarps], STAGES = kStageCounts[J % kNumStages];
  if constexpr (keep_config<HEAD_DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, OVERLAP>())
    out.push_back({TileChoice{BLOCK_M, BLOCK_N, WARPS, STAGES, OVERLAP},
                   &launch<HEAD_DIM, TileConfig<BLOCK_M, BLOCK_N, WARPS, STAGES, OVERLAP != 0>>});
}
template <int HEAD_DIM, std::size_t... I>
std::vector<Candidate> build_space(std::index_sequence<I...>) {
  std::vector<Candidate> out;
  (add_config<HEAD_DIM, static_cast<int>(I)>(out), ...);
  return out;
}

}  // namespace

const std::vector<Candidate>& space(int head_dim) {
  static const std::vector<Candidate> none;
  const std::vector<Candidate>* out = &none;
  if (padded_head_dim_tc(head_dim) == head_dim)  // a compiled head dim: built once, on first use
    dispatch_head_dim_tc(head_dim, "step 06", [&](auto head_dim_tag) {
      static const std::vector<Candidate> s =
          build_space<decltype(head_dim_tag)::value>(std::make_index_sequence<kSpaceSize>{});
      out = &s;
    });
  return *out;
}
// [end:launch]

// [start:public]
// Step 05's fixed shapes, the same for full and causal masks. FlashAttention-2's launch
// template agrees at D = 32, 96 and 128, not at D = 64 (128x128x4, which the H200 table
// mostly picks) or D = 256 (64x64x4 on Hopper); book chapter 06 compares them.
TileChoice heuristic(int head_dim) {
#if FLASHSTEPS_VENDOR_HIP  // step 05's shapes
  const TileChoice preferred = head_dim <= 64    ? TileChoice{64, 64, 4, 2}
                               : head_dim <= 128 ? TileChoice{64, 32, 4, 2}
                                                 : TileChoice{32, 16, 2, 2};
#else
  const TileChoice preferred = head_dim <= 32    ? TileChoice{128, 128, 4, 2}
                               : head_dim <= 128 ? TileChoice{128, 64, 4, 2}
                                                 : TileChoice{128, 32, 8, 2};
#endif
  for (const Candidate& c : space(head_dim))
    if (c.shape == preferred) return preferred;
  return space(head_dim).at(0).shape;  // every compiled head dim has a non-empty space
}
// [end:public]

std::size_t workspace_bytes(const AttentionArgs&) { return 0; }

StepInfo info() {
  StepInfo i{6, "autotuned", "tile shape chosen per problem from a pruned compile-time space, tuned and cached"};
  i.accepts_fp32 = false, i.head_dim_multiple = 8, i.alignment_elems = 8;
  return i;
}

// [start:launcher]
void attention_forward(const AttentionArgs& args, vendor::Stream stream) {
  validate(args);
  check_tensor_core_args(args, "step 06");  // head_dim up to 256: every call has a space
  if (is_empty(args)) return;
  tuner().select(args, stream, /*may_tune=*/true).launch(args, stream);
}
// [end:launcher]

}  // namespace flashsteps::step06
