// SPDX-License-Identifier: Apache-2.0
// FlashSteps step 04 of the series — tensor-core GEMMs.   previous: 04b_register_p · next: 05_causal
//
// What changes against step 04b:
//   - K/V tiles go through a STAGES-deep ring of shared-memory buffers filled by cp.async
//     (tile::load_tile_async, commit, wait_pending), so the next tiles load while the current
//     one is multiplied; per-vendor tile tables (TileConfig: 128 query rows per block on NVIDIA)
//   - the exponentials are one ex2.approx each (tile::exp2_rows), and O is rescaled only when
//     some row's max grew (tile::warp_any)
//   - before the epilogue reuses Q's rows, the block also waits for its last cp.async copies
//   - head dim 96 is compiled (a whole number of 16-wide k-steps) instead of padded to 128
//   (steps 04a and 04b brought the tensor cores, 16-bit tiles, P in registers and the epilogue)
// Why it is faster: step 04b stages every K/V tile through each thread's registers, with three
// barriers per tile; here the copies of the next tiles go straight to shared memory under the
// MMAs, behind one barrier, an exponential is one MUFU instruction instead of exp2f's range
// checks, and a 128-row block reads each K/V tile once for twice the queries.
// Against step 03 the products now run on tensor cores: on the H200 a dense bf16 GEMM runs at
// 13.1x the measured fp32 FMA rate of the CUDA cores step 03 used
// (results/nvidia-h200/*ceiling*.json); the block is now bound by the MMAs and the exp2s.
// Measured on an NVIDIA H200 (bf16, D = 128, N = 4096, non-causal): 323 TFLOP/s, 16.4x step 03's
// 19.7 in the same run, 1.64x step 04b's 196.5 measured minutes later (results/nvidia-h200/,
// commit 0267634; the chapter compares it with PyTorch SDPA).
// Limits: fp16/bf16 only (fp32 is rejected); head_dim a multiple of 8 up to 256 (compiled for
// 32, 64, 96, 128, 256; others padded); 16-byte aligned tensors and strides; every KV tile is
// still loaded and multiplied when the causal mask hides it (step 05 skips those).
// Chapter: book/steps/04_tensor_cores.md
#include <cmath>

#include "flashsteps/dispatch.h"
#include "flashsteps/params.h"
#include "flashsteps/step.h"
#include "flashsteps/tile.h"

namespace flashsteps::step04 {

namespace {

// [start:tile_config]
// A block of WARPS warps computes BLOCK_M query rows (WARP_M = BLOCK_M / WARPS per warp)
// against the keys, BLOCK_N at a time, through STAGES shared-memory buffers of K and V.
template <int BLOCK_M_, int BLOCK_N_, int WARPS_, int STAGES_>
struct TileConfig {
  static constexpr int BLOCK_M = BLOCK_M_, BLOCK_N = BLOCK_N_, WARPS = WARPS_, STAGES = STAGES_;
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

#if FLASHSTEPS_VENDOR_HIP
// AMD: 64 KiB of LDS per workgroup, wave64 (WARP_M = 16 rows per wave).
constexpr std::size_t kMaxSmem = 64 * 1024;
template <int HEAD_DIM> struct DefaultTile { using type = TileConfig<64, (HEAD_DIM <= 64 ? 64 : 32), 4, 2>; };
template <> struct DefaultTile<256> { using type = TileConfig<32, 16, 2, 2>; };
#else
// NVIDIA sm_80/sm_90: up to 227 KiB of shared memory per block. 4 warps of 32 rows, wide KV
// tiles for small head dims, narrower ones as D grows. Not FlashAttention-2's at every D: its
// launch template runs 128x128x4 at D = 64 and, on Hopper, 64x64x4 at D = 256 (the chapter).
constexpr std::size_t kMaxSmem = 227 * 1024;
template <int HEAD_DIM> struct DefaultTile { using type = TileConfig<128, 64, 4, 2>; };
template <> struct DefaultTile<32> { using type = TileConfig<128, 128, 4, 2>; };
template <> struct DefaultTile<256> { using type = TileConfig<128, 32, 8, 2>; };
#endif
// [end:tile_config]

// [start:kernel]
template <typename T, int HEAD_DIM, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads) attention_kernel(Params<T> p) {
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

  // One block per (batch, head, query tile), flattened into blockIdx.x.
  const std::int64_t bh = blockIdx.x / p.m_tiles;
  const std::int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hkv);
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x % p.m_tiles) * BLOCK_M;
  const T* q = p.q + b * p.q_stride[0] + h * p.q_stride[1] + m0 * p.q_stride[2];
  const T* k = p.k + b * p.k_stride[0] + hk * p.k_stride[1];
  const T* v = p.v + b * p.v_stride[0] + hk * p.v_stride[1];
  const std::int64_t n_tiles = (p.Nk + BLOCK_N - 1) / BLOCK_N;

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
  // The first query row of the block sees the fewest keys; a tile past it needs the mask.
  const std::int64_t first_row_last_key = last_visible_key(p.mask, m0, p.Nq, p.Nk);

  for (std::int64_t j = 0; j < n_tiles; ++j) {
    tile::wait_pending<STAGES - 2>();
    __syncthreads();  // tile j is visible to all; every warp is done with tile j - 1's buffer
    if (j + STAGES - 1 < n_tiles) load_kv(j + STAGES - 1);  // into the buffer tile j - 1 used
    tile::commit();
    const int stage = static_cast<int>(j % STAGES);
    const std::int64_t n0 = j * BLOCK_N;

    SAcc s_acc;  // S = Q K^T for this warp's rows, unscaled
    tile::mma_ABt<HEAD_DIM>(s_acc, Q_smem + warp * WARP_M * PITCH, K_smem + stage * BLOCK_N * PITCH);
    if (n0 + BLOCK_N - 1 > first_row_last_key) {  // some key of the tile is hidden from some row
      // Last visible column of each of this lane's rows, relative to the tile (-1: none).
      int last_col[kSlots];
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const std::int64_t last = last_visible_key(p.mask, row0 + SAcc::slot_row(s), p.Nq, p.Nk) - n0;
        last_col[s] = static_cast<int>(last < -1 ? -1 : last > BLOCK_N ? BLOCK_N : last);
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
    // Rescale O only when some row's max grew (alpha != 1): after the first tiles a new
    // maximum is rare, and the multiply by exactly 1 it skips changes nothing.
    bool grew = false;
#pragma unroll
    for (int s = 0; s < kSlots; ++s) grew = grew || alpha[s] != 1.0f;
    if (tile::warp_any(grew)) tile::mul_row(o_acc, alpha);
    tile::mma_AB<HEAD_DIM, T>(o_acc, s_acc, V_smem + stage * BLOCK_N * PITCH);
  }
  tile::wait_pending<0>();  // nothing may still be landing when the block exits...
  __syncthreads();          // ...nor in Q's rows, which the epilogue reuses (and no warp still reads them)
  // [end:online_softmax]

  // [start:epilogue]
  // Deferred normalisation: O_i = o_acc / l_i; a row with no visible key (l_i = 0) gets 0.
  float inv_l[kSlots], lse[kSlots];
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    const float l = tile::row_allreduce_sum(l_i[s]);
    inv_l[s] = l > 0.0f ? 1.0f / l : 0.0f;
    // LSE_i = ln(sum_j e^{scale S_ij}) = (m_i scale log2(e) + log2 l_i) ln 2
    lse[s] = l > 0.0f ? (m_i[s] * p.scale_log2 + log2f(l)) * 0.69314718f : -INFINITY;
  }
  // O goes out through shared memory, so that global stores are whole 16-byte rows: each warp
  // rounds its rows into its own rows of the Q tile (no other warp reads them), then copies.
  T* o_stage = Q_smem + warp * WARP_M * PITCH;
  o_acc.for_each([&](int s, int row, int col, float x) {
    o_stage[row * PITCH + col] = vendor::from_float<T>(x * inv_l[s]);
    if (col == 0 && p.lse != nullptr && row0 + row < p.Nq) p.lse[bh * p.Nq + row0 + row] = lse[s];
  });
  __syncthreads();  // the staged rows are visible to every lane of the warp
  T* o = p.o + b * p.o_stride[0] + h * p.o_stride[1] + row0 * p.o_stride[2];
  tile::store_tile<WARP_M, HEAD_DIM, vendor::kWarpSize>(o, p.o_stride[2], p.Nq - row0, p.D, o_stage, PITCH,
                                                        threadIdx.x % vendor::kWarpSize);
  // [end:epilogue]
}
// [end:kernel]

}  // namespace

std::size_t workspace_bytes(const AttentionArgs&) { return 0; }

StepInfo info() {
  StepInfo i{4, "tensor_cores", "both GEMMs on tensor cores (mma.sync / MFMA), P kept in registers"};
  i.accepts_fp32 = false, i.head_dim_multiple = 8, i.alignment_elems = 8;
  return i;
}

// [start:launcher]
void attention_forward(const AttentionArgs& args, vendor::Stream stream) {
  validate(args);
  check_tensor_core_args(args, "step 04");
  dispatch_head_dim_tc(args.head_dim(), "step 04", [&](auto head_dim_tag) {
    constexpr int HEAD_DIM = decltype(head_dim_tag)::value;
    using Cfg = typename DefaultTile<HEAD_DIM>::type;
    static_assert(Cfg::template smem_bytes<HEAD_DIM>() <= kMaxSmem, "the tiles exceed the shared memory of a block");
    if (is_empty(args)) return;
    vendor::dispatch_dtype(args.q.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, float>) {
        const Params<T> p = make_params<T>(args, Cfg::BLOCK_M);
        const unsigned blocks = grid_blocks(p, Cfg::kThreads, "step 04");
        constexpr std::size_t smem_bytes = Cfg::template smem_bytes<HEAD_DIM>();
        const void* kernel = reinterpret_cast<const void*>(&attention_kernel<T, HEAD_DIM, Cfg>);
        vendor::set_max_dynamic_smem(kernel, smem_bytes);  // above 48 KiB needs an opt-in
        attention_kernel<T, HEAD_DIM, Cfg><<<blocks, Cfg::kThreads, smem_bytes, stream>>>(p);
        FLASHSTEPS_CHECK_LAUNCH("step04::attention_kernel");
      }
    });
  });
}
// [end:launcher]

}  // namespace flashsteps::step04
