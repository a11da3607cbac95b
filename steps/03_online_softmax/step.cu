// SPDX-License-Identifier: Apache-2.0
// FlashSteps step 03 of the series — online softmax.   previous: 02_tiled · next: 04a_mma_plain
//
// What changes against step 02:
//   - one sweep over the K/V tiles instead of two: the row max m_i and the sum l_i are kept
//     running, and the accumulator O_i is rescaled by exp(m_old - m_new) whenever the max grows
//     (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"; FlashAttention-2,
//     Dao 2023, Algorithm 1: query tile outer, KV tiles inner, normalisation deferred to the end)
//   - K is read from global memory once instead of twice, and S computed once instead of twice
// Why it is faster: step 02 reads K twice and computes every score twice (3 N^2 D FMAs per
// head instead of 2); this step does 2 N^2 D, all of them on CUDA cores in register-blocked
// micro-tiles (each thread: TM x TN scores of S and TM x D/8 outputs of O).
// Measured on an NVIDIA H200 (bf16, D = 128, N = 4096, non-causal): 19.7 TFLOP/s, 1.39x step 02,
// 34% of the 57.7 TFLOP/s fp32 FMA ceiling measured on the same GPU (results/nvidia-h200/,
// commit 0267634).
// Limits: scalar fp32 FMAs (no tensor cores: step 04a); every KV tile is visited even when the
// causal mask hides it (step 05); head_dim <= 256 (compiled for 32, 64, 128, 256; others padded).
// Chapter: book/steps/03_online_softmax.md
#include <cmath>

#include "flashsteps/dispatch.h"
#include "flashsteps/params.h"
#include "flashsteps/step.h"

namespace flashsteps::step03 {

namespace {

// [start:tile_config]
// 128 threads as a 16 x 8 grid: ty picks rows, tx picks columns. Thread (ty, tx) owns rows
// ty + 16 i (i < TM) and, of S, columns tx + 8 j (j < TN); of O, columns tx + 8 k (k < D/8).
// Strided ownership keeps shared-memory reads free of bank conflicts.
constexpr int kThreadRows = 16, kThreadCols = 8, kThreads = kThreadRows * kThreadCols;

// Micro-tile sizes per head dim, chosen so that the fp32 tiles fit AMD's 64 KiB of LDS.
template <int HEAD_DIM> struct TileShape;
template <> struct TileShape<32> { static constexpr int TM = 4, TN = 8; };
template <> struct TileShape<64> { static constexpr int TM = 4, TN = 4; };
template <> struct TileShape<128> { static constexpr int TM = 4, TN = 2; };
template <> struct TileShape<256> { static constexpr int TM = 2, TN = 1; };

template <int HEAD_DIM>
struct Tile {
  static constexpr int TM = TileShape<HEAD_DIM>::TM, TN = TileShape<HEAD_DIM>::TN;
  static constexpr int BLOCK_M = kThreadRows * TM;  // query rows per block
  static constexpr int BLOCK_N = kThreadCols * TN;  // keys per KV tile
  static constexpr int DV = HEAD_DIM / kThreadCols; // O columns per thread
  // Row pitches padded by 4 floats: keeps float4 alignment and spreads rows over banks.
  static constexpr int QK_PITCH = HEAD_DIM + 4, P_PITCH = BLOCK_N + 4;
  static constexpr int SMEM_FLOATS = BLOCK_M * QK_PITCH + BLOCK_N * QK_PITCH + BLOCK_N * HEAD_DIM + BLOCK_M * P_PITCH;
  static_assert(HEAD_DIM % (4 * kThreadCols) == 0, "HEAD_DIM must be a multiple of 32");
  static_assert(SMEM_FLOATS * 4 <= 64 * 1024, "tiles must fit 64 KiB of shared memory (AMD LDS)");
};
// [end:tile_config]

// [start:load_tile]
// Global [rows, D] (row stride in elements) -> shared [ROWS][PITCH] fp32, zero-padded past
// `valid_rows` and past D. Consecutive threads read consecutive elements: coalesced.
template <int ROWS, int COLS, int PITCH, typename T>
__device__ void load_tile(float* smem, const T* gmem, std::int64_t row_stride, std::int64_t valid_rows, int D) {
  for (int e = threadIdx.x; e < ROWS * COLS; e += kThreads) {
    const int r = e / COLS, c = e % COLS;
    smem[r * PITCH + c] = (r < valid_rows && c < D) ? vendor::to_float(gmem[r * row_stride + c]) : 0.0f;
  }
}

// A K or V tile in flight: fetch() issues its global loads into registers (raw elements, so
// nothing waits for them), stash() converts and stores it to shared memory once the data is
// needed. Loads of the next tile thus overlap the arithmetic on the current one.
template <int ROWS, int COLS, typename T>
struct TileInFlight {
  static constexpr int kPerThread = ROWS * COLS / kThreads;
  static_assert(ROWS * COLS % kThreads == 0, "a tile must split evenly over the threads");
  T x[kPerThread];

  __device__ void fetch(const T* gmem, std::int64_t row_stride, std::int64_t valid_rows, int D) {
#pragma unroll
    for (int it = 0; it < kPerThread; ++it) {
      const int e = threadIdx.x + kThreads * it, r = e / COLS, c = e % COLS;
      x[it] = (r < valid_rows && c < D) ? gmem[r * row_stride + c] : vendor::from_float<T>(0.0f);
    }
  }
  template <int PITCH>
  __device__ void stash(float* smem) const {
#pragma unroll
    for (int it = 0; it < kPerThread; ++it) {
      const int e = threadIdx.x + kThreads * it;
      smem[(e / COLS) * PITCH + e % COLS] = vendor::to_float(x[it]);
    }
  }
};
// [end:load_tile]

// [start:score_tile]
// s[i][j] = scale_log2 * Q_i . K_j for this thread's TM x TN scores, -inf where masked or past Nk.
template <int HEAD_DIM, typename T>
__device__ void score_tile(float (&s)[Tile<HEAD_DIM>::TM][Tile<HEAD_DIM>::TN], const float* Q_smem,
                           const float* K_smem, const Params<T>& p, std::int64_t m0, std::int64_t n0) {
  using TileT = Tile<HEAD_DIM>;
  const int tx = threadIdx.x % kThreadCols, ty = threadIdx.x / kThreadCols;
#pragma unroll
  for (int i = 0; i < TileT::TM; ++i)
#pragma unroll
    for (int j = 0; j < TileT::TN; ++j) s[i][j] = 0.0f;
  // Register blocking: per 4 columns of D, TM + TN float4 loads feed 4 TM TN FMAs.
#pragma unroll 4
  for (int d = 0; d < HEAD_DIM; d += 4) {
    float4 q[TileT::TM], k[TileT::TN];
#pragma unroll
    for (int i = 0; i < TileT::TM; ++i) q[i] = *reinterpret_cast<const float4*>(&Q_smem[(ty + kThreadRows * i) * TileT::QK_PITCH + d]);
#pragma unroll
    for (int j = 0; j < TileT::TN; ++j) k[j] = *reinterpret_cast<const float4*>(&K_smem[(tx + kThreadCols * j) * TileT::QK_PITCH + d]);
#pragma unroll
    for (int i = 0; i < TileT::TM; ++i)
#pragma unroll
      for (int j = 0; j < TileT::TN; ++j)
        s[i][j] += q[i].x * k[j].x + q[i].y * k[j].y + q[i].z * k[j].z + q[i].w * k[j].w;
  }
#pragma unroll
  for (int i = 0; i < TileT::TM; ++i) {
    const std::int64_t row = m0 + ty + kThreadRows * i;
    const std::int64_t last = last_visible_key(p.mask, row, p.Nq, p.Nk);
#pragma unroll
    for (int j = 0; j < TileT::TN; ++j) {
      const std::int64_t col = n0 + tx + kThreadCols * j;
      s[i][j] = col <= last ? s[i][j] * p.scale_log2 : -INFINITY;
    }
  }
}
// [end:score_tile]

// Max and sum over the 8 threads (tx = 0..7, adjacent lanes) that share a row.
__device__ __forceinline__ float row_max(float x) {
  for (int lane_mask = 1; lane_mask < kThreadCols; lane_mask *= 2) x = fmaxf(x, vendor::shfl_xor(x, lane_mask));
  return x;
}
__device__ __forceinline__ float row_sum(float x) {
  for (int lane_mask = 1; lane_mask < kThreadCols; lane_mask *= 2) x += vendor::shfl_xor(x, lane_mask);
  return x;
}

template <typename T, int HEAD_DIM>
__global__ void __launch_bounds__(kThreads) attention_kernel(Params<T> p) {
  using TileT = Tile<HEAD_DIM>;
  constexpr int TM = TileT::TM, TN = TileT::TN, DV = TileT::DV;
  extern __shared__ float4 smem_f4[];  // float4: 16-byte aligned for the vector loads
  float* Q_smem = reinterpret_cast<float*>(smem_f4);     // [BLOCK_M][QK_PITCH]
  float* K_smem = Q_smem + TileT::BLOCK_M * TileT::QK_PITCH; // [BLOCK_N][QK_PITCH]
  float* V_smem = K_smem + TileT::BLOCK_N * TileT::QK_PITCH; // [BLOCK_N][HEAD_DIM]
  float* P_smem = V_smem + TileT::BLOCK_N * HEAD_DIM;        // [BLOCK_M][P_PITCH]
  const int tx = threadIdx.x % kThreadCols, ty = threadIdx.x / kThreadCols;

  // One block per (batch, head, query tile), flattened into blockIdx.x (no 65535 limit).
  const std::int64_t bh = blockIdx.x / p.m_tiles;
  const std::int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / (p.Hq / p.Hkv);
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x % p.m_tiles) * TileT::BLOCK_M;
  const T* q = p.q + b * p.q_stride[0] + h * p.q_stride[1] + m0 * p.q_stride[2];
  const T* k = p.k + b * p.k_stride[0] + hk * p.k_stride[1];
  const T* v = p.v + b * p.v_stride[0] + hk * p.v_stride[1];
  load_tile<TileT::BLOCK_M, HEAD_DIM, TileT::QK_PITCH>(Q_smem, q, p.q_stride[2], p.Nq - m0, p.D);

  // [start:online_softmax]
  float o_acc[TM][DV] = {};  // unnormalised O rows: sum_j exp2(S_ij - m_i) V_j
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
    float s[TM][TN];
    score_tile<HEAD_DIM>(s, Q_smem, K_smem, p, m0, n0);
    if (n0 + TileT::BLOCK_N < p.Nk)  // the next K tile lands during the softmax and P V
      k_next.fetch(k + (n0 + TileT::BLOCK_N) * p.k_stride[2], p.k_stride[2], p.Nk - n0 - TileT::BLOCK_N, p.D);
    v_next.template stash<HEAD_DIM>(V_smem);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < TN; ++j) tile_max = fmaxf(tile_max, s[i][j]);
      const float m_new = fmaxf(m_i[i], row_max(tile_max));
      // A row that has seen no visible key yet keeps m = -inf; subtract 0 instead (no NaN).
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = exp2f(m_i[i] - m_use);  // rescales what was summed under the old max
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const float p_ij = exp2f(s[i][j] - m_use);
        P_smem[(ty + kThreadRows * i) * TileT::P_PITCH + tx + kThreadCols * j] = p_ij;
        tile_sum += p_ij;
      }
      l_i[i] = l_i[i] * alpha + row_sum(tile_sum);
      m_i[i] = m_new;
#pragma unroll
      for (int c = 0; c < DV; ++c) o_acc[i][c] *= alpha;
    }
    __syncthreads();  // P of the whole tile is in shared memory
    // O_i += P_i V: per key, TM + DV loads feed TM DV FMAs.
    for (int j = 0; j < TileT::BLOCK_N; ++j) {
      float p_col[TM];
#pragma unroll
      for (int i = 0; i < TM; ++i) p_col[i] = P_smem[(ty + kThreadRows * i) * TileT::P_PITCH + j];
#pragma unroll
      for (int c = 0; c < DV; ++c) {
        const float v_jc = V_smem[j * HEAD_DIM + tx + kThreadCols * c];
#pragma unroll
        for (int i = 0; i < TM; ++i) o_acc[i][c] += p_col[i] * v_jc;
      }
    }
  }
  // [end:online_softmax]

  // [start:epilogue]
  // Deferred normalisation: O_i = o_acc / l_i; a row with no visible key (l_i = 0) gets 0.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const std::int64_t row = m0 + ty + kThreadRows * i;
    if (row >= p.Nq) continue;
    const float inv_l = l_i[i] > 0.0f ? 1.0f / l_i[i] : 0.0f;
    T* o_row = p.o + b * p.o_stride[0] + h * p.o_stride[1] + row * p.o_stride[2];
#pragma unroll
    for (int c = 0; c < DV; ++c) {
      const int d = tx + kThreadCols * c;
      if (d < p.D) o_row[d] = vendor::from_float<T>(o_acc[i][c] * inv_l);
    }
    if (p.lse != nullptr && tx == 0)  // LSE_i = ln(sum_j e^{S_ij}) = (m_i + log2 l_i) ln 2
      p.lse[bh * p.Nq + row] = l_i[i] > 0.0f ? (m_i[i] + log2f(l_i[i])) * 0.69314718f : -INFINITY;
  }
  // [end:epilogue]
}

}  // namespace

std::size_t workspace_bytes(const AttentionArgs&) { return 0; }

StepInfo info() { return {3, "online_softmax", "one sweep: running max and sum, rescaled accumulator"}; }

// [start:launcher]
void attention_forward(const AttentionArgs& args, vendor::Stream stream) {
  validate(args);
  dispatch_head_dim(args.head_dim(), "step 03", [&](auto head_dim_tag) {
    constexpr int HEAD_DIM = decltype(head_dim_tag)::value;
    using TileT = Tile<HEAD_DIM>;
    if (is_empty(args)) return;
    vendor::dispatch_dtype(args.q.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const Params<T> p = make_params<T>(args, TileT::BLOCK_M);
      const unsigned blocks = grid_blocks(p, kThreads, "step 03");
      constexpr std::size_t smem_bytes = TileT::SMEM_FLOATS * sizeof(float);
      // Above 48 KiB needs an opt-in; set on every launch (cheap), so every device gets it.
      vendor::set_max_dynamic_smem(reinterpret_cast<const void*>(&attention_kernel<T, HEAD_DIM>), smem_bytes);
      attention_kernel<T, HEAD_DIM><<<blocks, kThreads, smem_bytes, stream>>>(p);
      FLASHSTEPS_CHECK_LAUNCH("step03::attention_kernel");
    });
  });
}
// [end:launcher]

}  // namespace flashsteps::step03
