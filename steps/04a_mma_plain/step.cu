// SPDX-License-Identifier: Apache-2.0
// FlashSteps step 04a of the series — tensor cores, plain loads.   previous: 03_online_softmax · next: 04b_register_p
//
// What changes against step 03:
//   - both GEMMs, S = Q K^T and O += P V, run on tensor cores (fp16/bf16 in, fp32 accumulate):
//     NVIDIA mma.sync m16n8k16, AMD MFMA 16x16x16, behind one tile vocabulary
//     (common/include/flashsteps/tile.h: Acc, mma_ABt_plain, mma_AB_plain); every operand
//     register is filled by plain shared-memory loads
//   - each warp owns WARP_M query rows: its scores S and its part of O are accumulators in
//     registers, a lane holding TM whole rows (slots) of both, TN scores and DV outputs of each
//     (Acc::at, Acc::col); step 03's online softmax runs per slot, its row max and sum combined
//     over the lanes that share the row
//   - P goes through shared memory, rounded to 16 bits, each warp to its own rows
//   - Q, K, V stay 16-bit in shared memory, in rows padded by 16 bytes (tile::smem_pitch)
//   - fp32 inputs, head dims that are not a multiple of 8 and misaligned tensors are rejected,
//     as steps 04b and 04 reject them
// Why it is faster: a tensor core does a 16x8x16 multiply-add per instruction, 64 times the work
// of an FMA instruction: step 03's 2 N^2 D FMAs per head become 2 N^2 D / 2048 mma instructions.
// Measured on an NVIDIA H200 (bf16, D = 128, N = 4096, non-causal): 128 TFLOP/s, 6.50x step 03's
// 19.7 measured earlier the same day (results/nvidia-h200/, commit 04eb783).
// Limits: fp16/bf16 only; head_dim a multiple of 8 up to 256 (compiled for 32, 64, 128, 256;
// others padded); 16-byte aligned tensors and strides; P makes a round trip through shared
// memory and every operand register takes its own loads (step 04b: P in registers, ldmatrix);
// K/V staged through registers as in step 03 (step 04: cp.async); every causal tile is computed.
// Chapter: book/steps/04a_mma_plain.md
#include <cmath>

#include "flashsteps/dispatch.h"
#include "flashsteps/params.h"
#include "flashsteps/step.h"
#include "flashsteps/tile.h"

namespace flashsteps::step04a {

namespace {

// [start:tile_config]
// 128 threads: 4 warps on NVIDIA, 2 wavefronts on AMD. Warp w owns the WARP_M query rows from
// w WARP_M: its scores, its rows of P and of O. The tensor cores fix which lane holds which
// element (tile_cuda.h, tile_hip.h): element j of a lane's row slot i is s.at(i, j), in
// column s.col(j), where step 03 had s[i][j] in column tx + 8 j.
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
  // A lane's part of the accumulators: TM rows (slots), TN of each row's scores, DV of its O.
  static constexpr int TM = tile::Acc<WARP_M, BLOCK_N>::kSlots, TN = tile::Acc<WARP_M, BLOCK_N>::kRowElems;
  static constexpr int DV = tile::Acc<WARP_M, HEAD_DIM>::kRowElems; // O columns per thread
  // Row pitches padded by 16 bytes: spreads the rows a fragment load touches over the banks.
  static constexpr int QK_PITCH = tile::smem_pitch(HEAD_DIM), P_PITCH = tile::smem_pitch(BLOCK_N);
  static constexpr int SMEM_ELEMS = BLOCK_M * QK_PITCH + 2 * BLOCK_N * QK_PITCH + BLOCK_M * P_PITCH;
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

// [start:score_tile]
// s = scale_log2 * Q_i . K_j for this warp's WARP_M x BLOCK_N scores (on the tensor cores),
// -inf where masked or past Nk.
// m0 is this warp's first query row; Q_smem points at its rows.
template <int HEAD_DIM, typename T>
__device__ void score_tile(tile::Acc<Tile<HEAD_DIM>::WARP_M, Tile<HEAD_DIM>::BLOCK_N>& s, const T* Q_smem,
                           const T* K_smem, const Params<T>& p, std::int64_t m0, std::int64_t n0) {
  using TileT = Tile<HEAD_DIM>;
  tile::mma_ABt_plain<HEAD_DIM>(s, Q_smem, K_smem);
#pragma unroll
  for (int i = 0; i < TileT::TM; ++i) {
    const std::int64_t row = m0 + s.slot_row(i);
    const std::int64_t last = last_visible_key(p.mask, row, p.Nq, p.Nk);
#pragma unroll
    for (int j = 0; j < TileT::TN; ++j) {
      const std::int64_t col = n0 + s.col(j);
      s.at(i, j) = col <= last ? s.at(i, j) * p.scale_log2 : -INFINITY;
    }
  }
}
// [end:score_tile]

// Max and sum over the lanes that share a row (4 of them, on NVIDIA and on AMD: tile.h).
__device__ __forceinline__ float row_max(float x) { return tile::row_allreduce_max(x); }
__device__ __forceinline__ float row_sum(float x) { return tile::row_allreduce_sum(x); }

template <typename T, int HEAD_DIM>
__global__ void __launch_bounds__(kThreads) attention_kernel(Params<T> p) {
  using TileT = Tile<HEAD_DIM>;
  constexpr int TM = TileT::TM, TN = TileT::TN, DV = TileT::DV;
  extern __shared__ float4 smem_f4[];  // float4: 16-byte aligned for the vector loads
  const int warp = threadIdx.x / vendor::kWarpSize;
  T* Q_smem = reinterpret_cast<T*>(smem_f4);                 // [BLOCK_M][QK_PITCH]
  T* K_smem = Q_smem + TileT::BLOCK_M * TileT::QK_PITCH;     // [BLOCK_N][QK_PITCH]
  T* V_smem = K_smem + TileT::BLOCK_N * TileT::QK_PITCH;     // [BLOCK_N][QK_PITCH]
  // P_smem: this warp's WARP_M rows of the block's [BLOCK_M][P_PITCH] tile of P.
  T* P_smem = V_smem + TileT::BLOCK_N * TileT::QK_PITCH + warp * TileT::WARP_M * TileT::P_PITCH;

  // One block per (batch, head, query tile), flattened into blockIdx.x (no 65535 limit).
  const std::int64_t bh = blockIdx.x / p.m_tiles;
  const std::int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hkv);
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x % p.m_tiles) * TileT::BLOCK_M;
  const T* q = p.q + b * p.q_stride[0] + h * p.q_stride[1] + m0 * p.q_stride[2];
  const T* k = p.k + b * p.k_stride[0] + hk * p.k_stride[1];
  const T* v = p.v + b * p.v_stride[0] + hk * p.v_stride[1];
  load_tile<TileT::BLOCK_M, HEAD_DIM, TileT::QK_PITCH>(Q_smem, q, p.q_stride[2], p.Nq - m0, p.D);

  // [start:online_softmax]
  tile::Acc<TileT::WARP_M, HEAD_DIM> o_acc = {};  // unnormalised O rows: sum_j exp2(S_ij - m_i) V_j
  float m_i[TM], l_i[TM];    // running max (base 2) and running sum
#pragma unroll
  for (int i = 0; i < TM; ++i) m_i[i] = -INFINITY, l_i[i] = 0.0f;

  TileInFlight<TileT::BLOCK_N, HEAD_DIM, T> k_next, v_next;
  k_next.fetch(k, p.k_stride[2], p.Nk, p.D);
  for (std::int64_t n0 = 0; n0 < p.Nk; n0 += TileT::BLOCK_N) {
    v_next.fetch(v + n0 * p.v_stride[2], p.v_stride[2], p.Nk - n0, p.D);  // lands during S
    __syncthreads();  // the previous tile's K, V and P are no longer read
    k_next.template stash<TileT::QK_PITCH>(K_smem);
    __syncthreads();
    tile::Acc<TileT::WARP_M, TileT::BLOCK_N> s;  // this warp's scores S
    score_tile<HEAD_DIM>(s, Q_smem + warp * TileT::WARP_M * TileT::QK_PITCH, K_smem, p, m0 + warp * TileT::WARP_M, n0);
    if (n0 + TileT::BLOCK_N < p.Nk)  // the next K tile lands during the softmax and P V
      k_next.fetch(k + (n0 + TileT::BLOCK_N) * p.k_stride[2], p.k_stride[2], p.Nk - n0 - TileT::BLOCK_N, p.D);
    v_next.template stash<TileT::QK_PITCH>(V_smem);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < TN; ++j) tile_max = fmaxf(tile_max, s.at(i, j));
      const float m_new = fmaxf(m_i[i], row_max(tile_max));
      // A row that has seen no visible key yet keeps m = -inf; subtract 0 instead (no NaN).
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = exp2f(m_i[i] - m_use);  // rescales what was summed under the old max
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const float p_ij = exp2f(s.at(i, j) - m_use);
        P_smem[s.slot_row(i) * TileT::P_PITCH + s.col(j)] = vendor::from_float<T>(p_ij);  // 16 bits
        tile_sum += p_ij;
      }
      l_i[i] = l_i[i] * alpha + row_sum(tile_sum);
      m_i[i] = m_new;
#pragma unroll
      for (int c = 0; c < DV; ++c) o_acc.at(i, c) *= alpha;
    }
    __syncthreads();  // P of the whole tile is in shared memory
    // O_i += P_i V on the tensor cores: this warp's rows of P, all of V.
    tile::mma_AB_plain<HEAD_DIM, TileT::BLOCK_N>(o_acc, P_smem, V_smem);
  }
  // [end:online_softmax]

  // [start:epilogue]
  // Deferred normalisation: O_i = o_acc / l_i; a row with no visible key (l_i = 0) gets 0.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const std::int64_t row = m0 + warp * TileT::WARP_M + o_acc.slot_row(i);
    if (row >= p.Nq) continue;
    const float inv_l = l_i[i] > 0.0f ? 1.0f / l_i[i] : 0.0f;
    T* o_row = p.o + b * p.o_stride[0] + h * p.o_stride[1] + row * p.o_stride[2];
#pragma unroll
    for (int c = 0; c < DV; ++c) {
      const int d = o_acc.col(c);
      if (d < p.D) o_row[d] = vendor::from_float<T>(o_acc.at(i, c) * inv_l);
    }
    if (p.lse != nullptr && o_acc.col(0) == 0)  // LSE_i = ln(sum_j e^{S_ij}) = (m_i + log2 l_i) ln 2
      p.lse[bh * p.Nq + row] = l_i[i] > 0.0f ? (m_i[i] + log2f(l_i[i])) * 0.69314718f : -INFINITY;
  }
  // [end:epilogue]
}

}  // namespace

std::size_t workspace_bytes(const AttentionArgs&) { return 0; }

// Accepts what step 04 accepts: no fp32, head_dim a multiple of 8, 16-byte aligned (8 elements).
StepInfo info() { return {4, "mma_plain", "tensor cores fed by plain loads, P through shared memory", 0, 256, false, 8, 8}; }

// [start:launcher]
void attention_forward(const AttentionArgs& args, vendor::Stream stream) {
  validate(args);
  check_tensor_core_args(args, "step 04a");
  dispatch_head_dim(args.head_dim(), "step 04a", [&](auto head_dim_tag) {
    constexpr int HEAD_DIM = decltype(head_dim_tag)::value;
    using TileT = Tile<HEAD_DIM>;
    if (is_empty(args)) return;
    vendor::dispatch_dtype(args.q.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, float>) {  // fp32 was rejected above
        const Params<T> p = make_params<T>(args, TileT::BLOCK_M);
        const unsigned blocks = grid_blocks(p, kThreads, "step 04a");
        constexpr std::size_t smem_bytes = TileT::SMEM_ELEMS * sizeof(T);
        // Above 48 KiB needs an opt-in; set on every launch (cheap), so every device gets it.
        vendor::set_max_dynamic_smem(reinterpret_cast<const void*>(&attention_kernel<T, HEAD_DIM>), smem_bytes);
        attention_kernel<T, HEAD_DIM><<<blocks, kThreads, smem_bytes, stream>>>(p);
        FLASHSTEPS_CHECK_LAUNCH("step04a::attention_kernel");
      }
    });
  });
}
// [end:launcher]

}  // namespace flashsteps::step04a
