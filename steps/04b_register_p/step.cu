// SPDX-License-Identifier: Apache-2.0
// FlashSteps step 04b of the series — P in registers, ldmatrix.   previous: 04a_mma_plain · next: 04_tensor_cores
//
// What changes against step 04a:
//   - P stays in registers: the accumulator of S is, element for element, the A operand of
//     O += P V (NVIDIA: two adjacent n8 atoms of S make one A fragment; AMD: the products are
//     computed transposed, so S^T is already P^T's B operand) (FlashAttention-2, Dao 2023,
//     section 3.3); P's shared-memory tile and its 16-bit stores go (tile::mma_AB)
//   - NVIDIA: the fragments of Q, K and V are read by ldmatrix, one instruction per four 8x8
//     matrices, .trans for V's columns, instead of one load per register (tile::mma_ABt)
//   - the softmax works on the accumulator as a whole (tile::row_max, row_sum, mul_row) in
//     base 2 on unscaled scores, P = exp2((S - m) * scale * log2(e)); a lane keeps its part of
//     each row sum l_i and the lanes of a row add theirs once, at the end
//   - only the tiles that need it pay for the mask (past Nk, or crossing the causal diagonal)
//   - O leaves through shared memory: each warp rounds its rows into its own rows of the Q tile,
//     and tile::store_tile writes them to global memory in 16-byte stores
// Why it is faster: per 16 x 16 fragment a warp issues one ldmatrix instead of 4 loads (Q, K)
// or 8 (V's columns); P's stores and loads through shared memory go, and with them the bank
// traffic and the conversions of the round trip; O is written in 16-byte stores, not 2-byte.
// Measured on an NVIDIA H200 (bf16, D = 128, N = 4096, non-causal): 196.5 TFLOP/s, 1.53x step
// 04a's 128 in the same run (results/nvidia-h200/, commit 04eb783).
// Limits: fp16/bf16 only; head_dim a multiple of 8 up to 256 (compiled for 32, 64, 128, 256;
// others padded); 16-byte aligned tensors and strides; K/V staged through registers, three
// barriers per tile (step 04: the cp.async ring); every causal tile is computed (step 05).
// Chapter: book/steps/04b_register_p.md
#include <cmath>

#include "flashsteps/dispatch.h"
#include "flashsteps/params.h"
#include "flashsteps/step.h"
#include "flashsteps/tile.h"

namespace flashsteps::step04b {

namespace {

// [start:tile_config]
// 128 threads: 4 warps on NVIDIA, 2 wavefronts on AMD. Warp w owns the WARP_M query rows from
// w WARP_M: its scores, P and its rows of O never leave its registers. The tensor cores fix
// which lane holds which element (tile_cuda.h, tile_hip.h): a lane holds kSlots whole rows.
constexpr int kThreads = 128, kWarps = kThreads / vendor::kWarpSize;

// KV tile sizes per head dim, chosen so that the 16-bit tiles fit AMD's 64 KiB of LDS.
template <int HEAD_DIM> struct TileShape { static constexpr int BLOCK_N = 64; };
template <> struct TileShape<128> { static constexpr int BLOCK_N = 32; };
template <> struct TileShape<256> { static constexpr int BLOCK_N = 16; };

template <int HEAD_DIM>
struct Tile {
  static constexpr int BLOCK_M = 64;                            // query rows per block
  static constexpr int BLOCK_N = TileShape<HEAD_DIM>::BLOCK_N;  // keys per KV tile
  static constexpr int WARP_M = BLOCK_M / kWarps;               // query rows per warp
  // Row pitches padded by 16 bytes: spreads the rows a fragment load touches over the banks.
  static constexpr int PITCH = tile::smem_pitch(HEAD_DIM);
  static constexpr int SMEM_ELEMS = (BLOCK_M + 2 * BLOCK_N) * PITCH;
  static_assert(SMEM_ELEMS * 2 <= 64 * 1024, "tiles must fit 64 KiB of shared memory (AMD LDS)");
};
// [end:tile_config]

// [start:load_tile]
// Global [rows, D] (row stride in elements) -> shared [ROWS][PITCH] 16-bit, zero-padded past
// `valid_rows` and past D. Consecutive threads read consecutive elements: coalesced.
template <int ROWS, int COLS, int PITCH, typename T>
__device__ void load_tile(T* smem, const T* gmem, std::int64_t row_stride, std::int64_t valid_rows, int D) {
  for (int e = threadIdx.x; e < ROWS * COLS; e += kThreads) {
    const int r = e / COLS, c = e % COLS;
    smem[r * PITCH + c] = (r < valid_rows && c < D) ? gmem[r * row_stride + c] : vendor::from_float<T>(0.0f);
  }
}

// A K or V tile in flight: fetch() issues its global loads into registers (raw elements, so
// nothing waits for them), stash() stores it to shared memory once the data is needed. Loads
// of the next tile thus overlap the arithmetic on the current one. 16 bytes (8 elements) per
// load: an eighth of the load instructions of 2-byte loads, two elements in every register.
template <int ROWS, int COLS, typename T>
struct TileInFlight {
  static constexpr int kChunks = COLS / tile::kChunk;  // 16-byte chunks per row
  static constexpr int kPerThread = ROWS * kChunks / kThreads;
  static_assert(ROWS * kChunks % kThreads == 0, "a tile must split evenly over the threads");
  uint4 x[kPerThread];

  __device__ void fetch(const T* gmem, std::int64_t row_stride, std::int64_t valid_rows, int D) {
#pragma unroll
    for (int it = 0; it < kPerThread; ++it) {
      const int e = threadIdx.x + kThreads * it, r = e / kChunks, c = e % kChunks * tile::kChunk;
      x[it] = (r < valid_rows && c < D) ? *reinterpret_cast<const uint4*>(&gmem[r * row_stride + c]) : uint4{};
    }
  }
  template <int PITCH>
  __device__ void stash(T* smem) const {
#pragma unroll
    for (int it = 0; it < kPerThread; ++it) {
      const int e = threadIdx.x + kThreads * it;
      *reinterpret_cast<uint4*>(&smem[(e / kChunks) * PITCH + e % kChunks * tile::kChunk]) = x[it];
    }
  }
};
// [end:load_tile]

// [start:kernel]
template <typename T, int HEAD_DIM>
__global__ void __launch_bounds__(kThreads) attention_kernel(Params<T> p) {
  using TileT = Tile<HEAD_DIM>;
  constexpr int BLOCK_M = TileT::BLOCK_M, BLOCK_N = TileT::BLOCK_N, WARP_M = TileT::WARP_M;
  constexpr int PITCH = tile::smem_pitch(HEAD_DIM);
  using SAcc = tile::Acc<WARP_M, BLOCK_N>;  // this warp's scores S (then P)
  using OAcc = tile::Acc<WARP_M, HEAD_DIM>; // this warp's unnormalised output O
  constexpr int kSlots = SAcc::kSlots;      // query rows per lane
  extern __shared__ uint4 smem_u4[];        // uint4: 16-byte aligned for the copies
  T* Q_smem = reinterpret_cast<T*>(smem_u4);        // [BLOCK_M][PITCH]
  T* K_smem = Q_smem + BLOCK_M * PITCH;             // [BLOCK_N][PITCH]
  T* V_smem = K_smem + BLOCK_N * PITCH;             // [BLOCK_N][PITCH]
  const int warp = threadIdx.x / vendor::kWarpSize;

  // One block per (batch, head, query tile), flattened into blockIdx.x.
  const std::int64_t bh = blockIdx.x / p.m_tiles;
  const std::int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hkv);
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x % p.m_tiles) * BLOCK_M;
  const T* q = p.q + b * p.q_stride[0] + h * p.q_stride[1] + m0 * p.q_stride[2];
  const T* k = p.k + b * p.k_stride[0] + hk * p.k_stride[1];
  const T* v = p.v + b * p.v_stride[0] + hk * p.v_stride[1];

  load_tile<BLOCK_M, HEAD_DIM, PITCH>(Q_smem, q, p.q_stride[2], p.Nq - m0, p.D);

  // [start:online_softmax]
  OAcc o_acc;
  o_acc.zero();
  float m_i[kSlots], l_i[kSlots];  // running max of the unscaled scores; this lane's part of the sum
#pragma unroll
  for (int s = 0; s < kSlots; ++s) m_i[s] = -INFINITY, l_i[s] = 0.0f;
  const std::int64_t row0 = m0 + warp * WARP_M;  // first query row of this warp
  // The first query row of the block sees the fewest keys; a tile past it needs the mask.
  const std::int64_t first_row_last_key = last_visible_key(p.mask, m0, p.Nq, p.Nk);

  TileInFlight<BLOCK_N, HEAD_DIM, T> k_next, v_next;
  k_next.fetch(k, p.k_stride[2], p.Nk, p.D);
  for (std::int64_t n0 = 0; n0 < p.Nk; n0 += BLOCK_N) {
    v_next.fetch(v + n0 * p.v_stride[2], p.v_stride[2], p.Nk - n0, p.D);  // lands during S
    __syncthreads();  // the previous tile's K and V are no longer read
    k_next.template stash<PITCH>(K_smem);
    __syncthreads();

    SAcc s_acc;  // S = Q K^T for this warp's rows, unscaled
    tile::mma_ABt<HEAD_DIM>(s_acc, Q_smem + warp * WARP_M * PITCH, K_smem);
    if (n0 + BLOCK_N < p.Nk)  // the next K tile lands during the softmax and P V
      k_next.fetch(k + (n0 + BLOCK_N) * p.k_stride[2], p.k_stride[2], p.Nk - n0 - BLOCK_N, p.D);
    v_next.template stash<PITCH>(V_smem);
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
      alpha[s] = m_new[s] == -INFINITY ? 1.0f : exp2f((m_i[s] - m_new[s]) * p.scale_log2);
      m_i[s] = m_new[s];
      l_i[s] *= alpha[s];
    }
    // P = exp2((S - m) scale_log2), in place: s_acc now holds P (unnormalised).
    s_acc.for_each([&](int s, int, int, float& x) { x = exp2f((x - m_use[s]) * p.scale_log2); });
    tile::row_sum(s_acc, l_i);
    tile::mul_row(o_acc, alpha);
    __syncthreads();  // V of the whole tile is in shared memory
    tile::mma_AB<HEAD_DIM, T>(o_acc, s_acc, V_smem);  // rounds P to T in registers (tile.h)
  }
  __syncthreads();  // no warp still reads Q's rows, which the epilogue reuses
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
  StepInfo i{4, "register_p", "both GEMMs on tensor cores, fragments by ldmatrix, P kept in registers"};
  i.accepts_fp32 = false, i.head_dim_multiple = 8, i.alignment_elems = 8;
  return i;
}

// [start:launcher]
void attention_forward(const AttentionArgs& args, vendor::Stream stream) {
  validate(args);
  check_tensor_core_args(args, "step 04b");
  dispatch_head_dim(args.head_dim(), "step 04b", [&](auto head_dim_tag) {
    constexpr int HEAD_DIM = decltype(head_dim_tag)::value;
    using TileT = Tile<HEAD_DIM>;
    if (is_empty(args)) return;
    vendor::dispatch_dtype(args.q.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, float>) {
        const Params<T> p = make_params<T>(args, TileT::BLOCK_M);
        const unsigned blocks = grid_blocks(p, kThreads, "step 04b");
        constexpr std::size_t smem_bytes = TileT::SMEM_ELEMS * sizeof(T);
        const void* kernel = reinterpret_cast<const void*>(&attention_kernel<T, HEAD_DIM>);
        vendor::set_max_dynamic_smem(kernel, smem_bytes);  // above 48 KiB needs an opt-in
        attention_kernel<T, HEAD_DIM><<<blocks, kThreads, smem_bytes, stream>>>(p);
        FLASHSTEPS_CHECK_LAUNCH("step04b::attention_kernel");
      }
    });
  });
}
// [end:launcher]

}  // namespace flashsteps::step04b
