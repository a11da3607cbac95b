// SPDX-License-Identifier: Apache-2.0
// FlashSteps step 07 of the series — TMA and wgmma (Hopper).   previous: 06_autotuned · next: (08)
//
// What changes against step 06 (NVIDIA sm_90a only; the warpgroup vocabulary is tile_sm90.h):
//   - the unit of work is the warpgroup (4 warps, 64 query rows): two (D = 128) or three
//     (D = 64) of them per block, each
//     computing S = Q K^T with `wgmma.mma_async` reading both operands straight from shared
//     memory (no ldmatrix, no per-warp fragments), 64 x BLOCK_N x 16 per instruction
//   - P stays in registers and is the A operand of the P V wgmma; V is read through an
//     MN-major descriptor (its head_dim contiguous), so it needs no transposing load
//   - Q, K and V arrive by TMA (`cp.async.bulk.tensor`): one thread issues a whole tile copy,
//     128-byte swizzled, rows past the end of the tensor filled with zeros, and the copy
//     completes on an mbarrier (kv_full[stage]); a second mbarrier per stage (kv_empty) says
//     when every warp is done with it, so the ring refills without a block-wide barrier
//   - each warpgroup computes only the KV tiles its own 64 rows see (causal diagonal, ragged
//     Nq); the block's other tiles it waits for and releases unread, so the ring keeps count
//   - the online softmax, masks, causal early exit and LPT order are step 05's: step 06's L2
//     sections of causal heads (since 3a4cdb9) are not taken, so the diff against step 06
//     shows that order going back to step 05's (step 09 brings the sections back, with its
//     persistent scheduler)
// Why it is faster: one wgmma.m64n128k16, issued by the warpgroup's four warps, does the work
// of 64 mma.sync.m16n8k16 (16 per warp), and its operands need no register round trip, so
// about a third fewer instructions are issued per FLOP (Nsight Compute, in the chapter); TMA moves a tile with one instruction instead of 16-byte copies from every thread.
// Measured on an NVIDIA H200 (bf16, D = 128, N = 8192, non-causal): 548.5 TFLOP/s
// (results/nvidia-h200/step07.json, commit e1ddb9b); over the 40 fp16 and bf16, D = 64 and 128,
// N = 1024-16384 problems, 1.10-1.72x PyTorch SDPA's FlashAttention-2 backend (geometric mean
// 1.43), measured in the same run. The chapter compares it with step 06 of that run at every
// point, with cuDNN, and says why the shortest causal problems gain the least: at the
// shortest length the goal counts, they are the four points where step 07 misses the course's
// goal over step 06.
// Limits: fp16/bf16; head_dim a multiple of 8 up to 128 (compiled for 64 and 128, others
// zero-padded by TMA); 16-byte aligned tensors and strides; sm_90 (H100/H200) only; the copies
// are issued by a computing thread, thread 0 (step 08 gives them a producer warp).
// Chapter: book/steps/07_tma_wgmma.md

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "flashsteps/dispatch.h"
#include "flashsteps/params.h"
#include "flashsteps/step.h"
#include "flashsteps/tile.h"
#include "flashsteps/tile_sm90.h"

namespace flashsteps::step07 {

namespace {

// [start:tile_config]
// WARPGROUPS warpgroups of 64 query rows (BLOCK_M = 64 x WARPGROUPS) against BLOCK_N keys at a
// time, through
// STAGES shared-memory buffers of K and V. Every tile is stored as HEAD_DIM / 64 chunks of
// [rows][64] 16-bit elements, 128-byte swizzled (sm90::swizzle_128b): what TMA writes and
// wgmma reads.
template <int HEAD_DIM_, int WARPGROUPS_, int BLOCK_N_, int STAGES_>
struct TileConfig {
  static constexpr int HEAD_DIM = HEAD_DIM_, WARPGROUPS = WARPGROUPS_, BLOCK_N = BLOCK_N_, STAGES = STAGES_;
  static constexpr int BLOCK_M = 64 * WARPGROUPS;
  static constexpr int kThreads = WARPGROUPS * sm90::kWarpgroupThreads;
  static constexpr int CHUNKS = HEAD_DIM / sm90::kChunkCols;
  static constexpr std::uint32_t kQBytes = BLOCK_M * HEAD_DIM * 2;   // one Q tile
  static constexpr std::uint32_t kKvBytes = BLOCK_N * HEAD_DIM * 2;  // one K (or V) tile
  static_assert(HEAD_DIM % 64 == 0, "HEAD_DIM must be whole 128-byte swizzle chunks");
  static_assert(BLOCK_N == 64 || BLOCK_N == 128, "BLOCK_N is a wgmma N this step instantiates (64 or 128)");
  static_assert(STAGES >= 2, "STAGES must be at least 2 (one K/V buffer loading, one in use)");
  /// Q, STAGES K and V tiles, the mbarriers, and 1 KiB of slack to align the tiles to the
  /// 1024-byte period of the swizzle.
  static constexpr std::size_t smem_bytes = 1024 + kQBytes + 2 * STAGES * kKvBytes + 8 * (1 + 2 * STAGES);
};
// D = 64: three warpgroups (BLOCK_M = 192), since a 64-wide head has half the MMA work per
// score of D = 128 and the softmax of one warpgroup needs two others' GEMMs to hide behind;
// D = 128: two (three would leave a thread at most 168 registers, 65536 / 384, against the 158
// this shape uses: no room to spare; not tried).
template <int HEAD_DIM> using DefaultTile = TileConfig<HEAD_DIM, (HEAD_DIM == 64 ? 3 : 2), 128, 2>;
constexpr std::size_t kMaxSmem = 227 * 1024;
// [end:tile_config]

// [start:kernel]
template <typename T, class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    attention_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                     const __grid_constant__ CUtensorMap v_map, const Params<T> p) {
  constexpr int HEAD_DIM = Cfg::HEAD_DIM, BLOCK_M = Cfg::BLOCK_M, BLOCK_N = Cfg::BLOCK_N, STAGES = Cfg::STAGES;
  constexpr int CHUNKS = Cfg::CHUNKS;
  extern __shared__ unsigned char smem_raw[];
  // The swizzle repeats every 1024 bytes, and the descriptors assume tiles start on it.
  unsigned char* smem = smem_raw + ((1024 - sm90::smem_u32(smem_raw) % 1024) % 1024);
  T* Q_smem = reinterpret_cast<T*>(smem);             // [CHUNKS][BLOCK_M][64] swizzled
  T* K_smem = Q_smem + BLOCK_M * HEAD_DIM;            // [STAGES][CHUNKS][BLOCK_N][64] swizzled
  T* V_smem = K_smem + STAGES * BLOCK_N * HEAD_DIM;   // [STAGES][CHUNKS][BLOCK_N][64] swizzled
  std::uint64_t* q_full = reinterpret_cast<std::uint64_t*>(V_smem + STAGES * BLOCK_N * HEAD_DIM);
  std::uint64_t* kv_full = q_full + 1;         // [STAGES]: tile landed (TMA transaction bytes)
  std::uint64_t* kv_empty = kv_full + STAGES;  // [STAGES]: every warp done with the buffer
  // This thread's warpgroup (rows 64 wg ..), read from lane 0 so that the compiler knows it is
  // the same in every lane: the descriptors that follow from it live in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / sm90::kWarpgroupThreads, 0);
  const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32;  // warp within the warpgroup

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
  // Each warpgroup's own share: the tiles its 64 rows see (none for rows past Nq), of which
  // the first wg_full_tiles need no mask. The block loads all n_tiles; a warpgroup releases
  // the ones past its own unread (causal: the upper warpgroups of a diagonal block skip the
  // last tile; the last block of a ragged Nq has warpgroups without rows).
  const std::int64_t wg_row0 = m0 + 64 * wg, wg_last_row = (wg_row0 + 64 < p.Nq ? wg_row0 + 64 : p.Nq) - 1;
  const std::int64_t wg_tiles =
      wg_row0 >= p.Nq ? 0 : (last_visible_key(p.mask, wg_last_row, p.Nq, p.Nk) + BLOCK_N) / BLOCK_N;
  const std::int64_t wg_full_tiles = wg_row0 >= p.Nq ? 0 : (last_visible_key(p.mask, wg_row0, p.Nq, p.Nk) + 1) / BLOCK_N;
  // [end:schedule]

  // [start:pipeline]
  // Thread 0 issues every copy. Tile j's K and V go to buffer j % STAGES and complete on
  // kv_full[j % STAGES]: its (j / STAGES)-th phase, so waiters pass parity (j / STAGES) % 2.
  // The transaction count is the whole box, including rows TMA fills with zeros past Nk.
  auto load_kv = [&](std::int64_t j) {
    const int stage = static_cast<int>(j % STAGES);
    sm90::mbarrier_arrive_expect_tx(&kv_full[stage], 2 * Cfg::kKvBytes);
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const int n0 = static_cast<int>(j * BLOCK_N);
      const int kv_head = static_cast<int>(hk), batch = static_cast<int>(b);
      sm90::tma_load_4d(K_smem + (stage * CHUNKS + c) * BLOCK_N * 64, &k_map, c * 64, n0, kv_head, batch, &kv_full[stage]);
      sm90::tma_load_4d(V_smem + (stage * CHUNKS + c) * BLOCK_N * 64, &v_map, c * 64, n0, kv_head, batch, &kv_full[stage]);
    }
  };
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(q_full, 1);
    for (int s = 0; s < STAGES; ++s) {
      sm90::mbarrier_init(&kv_full[s], 1);                    // thread 0's arrive.expect_tx
      sm90::mbarrier_init(&kv_empty[s], Cfg::kThreads / 32);  // one arrival per warp
    }
    sm90::mbarrier_init_fence();
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them
  if (threadIdx.x == 0) {
    sm90::mbarrier_arrive_expect_tx(q_full, Cfg::kQBytes);
    for (int c = 0; c < CHUNKS; ++c)
      sm90::tma_load_4d(Q_smem + c * BLOCK_M * 64, &q_map, c * 64, static_cast<int>(m0), static_cast<int>(h),
                        static_cast<int>(b), q_full);
    for (std::int64_t j = 0; j < STAGES && j < n_tiles; ++j) load_kv(j);
  }
  // [end:pipeline]

  // [start:online_softmax]
  // This thread's accumulator elements (PTX ISA wgmma D layout): rows r0 and r0 + 8 of the
  // warpgroup's 64, element i of a row-block of 8 columns at column 8 (i / 4) + 2 (lane % 4)
  // + i % 2, row r0 + 8 ((i / 2) % 2).
  float o_acc[HEAD_DIM / 2];
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) o_acc[i] = 0.0f;
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};  // rows r0, r0 + 8
  const int r0 = 64 * wg + 16 * warp + lane / 4;                  // row within the block
  const std::uint64_t q_desc = sm90::desc_k_major(sm90::smem_u32(Q_smem) + 64 * wg * 128);  // this warpgroup's rows
  sm90::mbarrier_wait(q_full, 0, "q_full");

  // Tile j is in its buffer: thread 0 first refills the buffer of tile j - 1 with tile
  // j - 1 + STAGES, once every warp has released it; then everyone waits for tile j.
  auto acquire = [&](std::int64_t j) {
    if (threadIdx.x == 0 && j >= 1 && j - 1 + STAGES < n_tiles) {
      sm90::mbarrier_wait(&kv_empty[(j - 1) % STAGES], static_cast<std::uint32_t>((j - 1) / STAGES) % 2, "kv_empty");
      load_kv(j - 1 + STAGES);
    }
    __syncwarp();  // warp 0 reconverges before the warpgroup-wide wgmma
    sm90::mbarrier_wait(&kv_full[j % STAGES], static_cast<std::uint32_t>(j / STAGES) % 2, "kv_full");
  };
  auto release = [&](std::int64_t j) {
    if (lane == 0) sm90::mbarrier_arrive(&kv_empty[j % STAGES]);  // this warp is done with the buffer
  };

  auto kv_tile = [&](std::int64_t j, auto masked_tag) {
    constexpr bool MASKED = decltype(masked_tag)::value;
    const int stage = static_cast<int>(j % STAGES);
    const std::int64_t n0 = j * BLOCK_N;
    acquire(j);

    // S = Q K^T: HEAD_DIM / 16 wgmmas chained on one accumulator, issued, then waited for.
    // Each k-step's descriptors are the tile's moved by a constant (desc_advance): one add, not
    // a new encoding of the address.
    float s_acc[BLOCK_N / 2];
    const std::uint64_t k_desc = sm90::desc_k_major(sm90::smem_u32(K_smem + stage * CHUNKS * BLOCK_N * 64));
    sm90::fence_registers(s_acc);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) {
      const int chunk = kk / 4, col_bytes = (kk % 4) * 32;  // 16 columns = 32 bytes into the chunk
      sm90::wgmma_ss<BLOCK_N, T>(s_acc, sm90::desc_advance(q_desc, chunk * BLOCK_M * 128 + col_bytes),
                                 sm90::desc_advance(k_desc, chunk * BLOCK_N * 128 + col_bytes), kk > 0);
    }
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_registers(s_acc);

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
    // The online softmax of step 06, on two rows per thread (a row's 4 threads: lanes 4g..4g+3).
    float m_new[2] = {m_i[0], m_i[1]}, m_use[2], alpha[2];
#pragma unroll
    for (int i = 0; i < BLOCK_N / 2; ++i) m_new[(i / 2) % 2] = fmaxf(m_new[(i / 2) % 2], s_acc[i]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m_new[r] = fmaxf(m_new[r], vendor::shfl_xor(m_new[r], 1));
      m_new[r] = fmaxf(m_new[r], vendor::shfl_xor(m_new[r], 2));
      m_use[r] = m_new[r] == -INFINITY ? 0.0f : m_new[r];  // a row with no visible key yet
      alpha[r] = m_new[r] == -INFINITY ? 1.0f : tile::exp2_approx((m_i[r] - m_new[r]) * p.scale_log2);
      m_i[r] = m_new[r];
      l_i[r] *= alpha[r];
    }
#pragma unroll
    for (int i = 0; i < BLOCK_N / 2; ++i) {
      s_acc[i] = tile::exp2_approx((s_acc[i] - m_use[(i / 2) % 2]) * p.scale_log2);  // P, unnormalised
      l_i[(i / 2) % 2] += s_acc[i];
    }
    if (tile::warp_any(alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
      for (int i = 0; i < HEAD_DIM / 2; ++i) o_acc[i] *= alpha[(i / 2) % 2];
    }
    // P as the A operand: k-step kk (keys 16 kk ..) is accumulator elements 8 kk .. 8 kk + 7.
    std::uint32_t p_frag[BLOCK_N / 16][4];
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) p_frag[kk][r] = tile::pack2<T>(s_acc[8 * kk + 2 * r], s_acc[8 * kk + 2 * r + 1]);

    // O += P V: BLOCK_N / 16 wgmmas, A from registers, V MN-major (16 keys = 2048 bytes).
    const std::uint64_t v_desc =
        sm90::desc_mn_major(sm90::smem_u32(V_smem + stage * CHUNKS * BLOCK_N * 64), BLOCK_N * 128);
    sm90::fence_registers(o_acc);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk)
      sm90::wgmma_rs<HEAD_DIM, T>(o_acc, p_frag[kk], sm90::desc_advance(v_desc, kk * 16 * 128), true);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_registers(o_acc);
    release(j);
  };
  std::int64_t j = 0;
  for (; j < wg_full_tiles; ++j) kv_tile(j, std::false_type{});  // no mask arithmetic at all
  for (; j < wg_tiles; ++j) kv_tile(j, std::true_type{});        // the diagonal / ragged end
  for (; j < n_tiles; ++j) {  // tiles none of this warpgroup's rows sees: released unread
    acquire(j);  // (waited for all the same: a release counts towards the phase of this tile)
    release(j);
  }
  // [end:online_softmax]

  // [start:epilogue]
  // O_i = o_acc / l_i (0 for a row with no visible key), LSE as step 06. O goes out through
  // this warp's own 16 rows of the Q tile (its warpgroup's wgmmas are done with them), so
  // that the global stores are whole 16-byte pieces of rows.
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
  const int warp_row0 = 64 * wg + 16 * warp;
  T* o = p.o + b * p.o_stride[0] + h * p.o_stride[1];
  for (int u = lane; u < 16 * HEAD_DIM / 8; u += 32) {
    const int row = warp_row0 + u / (HEAD_DIM / 8), col = 8 * (u % (HEAD_DIM / 8));
    if (m0 + row < p.Nq && col < p.D)
      *reinterpret_cast<uint4*>(o + (m0 + row) * p.o_stride[2] + col) =
          *reinterpret_cast<const uint4*>(q_bytes + sm90::swizzle_128b(BLOCK_M, row, col));
  }
  // [end:epilogue]
}
// [end:kernel]

}  // namespace

std::size_t workspace_bytes(const AttentionArgs&) { return 0; }

StepInfo info() {
  StepInfo i{7, "tma_wgmma", "Hopper: TMA copies on mbarriers, both GEMMs on wgmma (sm_90a)"};
  i.accepts_fp32 = false, i.head_dim_multiple = 8, i.alignment_elems = 8, i.max_head_dim = 128;
  return i;
}

// [start:launcher]
void attention_forward(const AttentionArgs& args, vendor::Stream stream) {
  validate(args);
  check_tensor_core_args(args, "step 07");
  for (const auto& [name, n] : {std::pair<const char*, std::int64_t>{"q.shape[2] (seqlen_q)", args.seqlen_q()},
                                std::pair<const char*, std::int64_t>{"k.shape[2] (seqlen_k)", args.seqlen_k()},
                                std::pair<const char*, std::int64_t>{"q.shape[0] (batch)", args.batch()},
                                std::pair<const char*, std::int64_t>{"q.shape[1] (heads_q)", args.heads_q()}})
    if (n > std::numeric_limits<std::int32_t>::max())  // TMA coordinates are 32-bit
      throw exceeds_limit("step 07", name, n, "TMA's 32-bit coordinates", std::numeric_limits<std::int32_t>::max());
  dispatch_head_dim_sm90(args.head_dim(), "step 07", [&](auto head_dim_tag) {
    using Cfg = DefaultTile<decltype(head_dim_tag)::value>;
    static_assert(Cfg::smem_bytes <= kMaxSmem, "the tiles exceed the shared memory of a block");
    if (is_empty(args)) return;
    sm90::require_sm90("step 07");
    vendor::dispatch_dtype(args.q.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, float>) {
        const Params<T> p = make_params<T>(args, Cfg::BLOCK_M);
        const unsigned blocks = grid_blocks(p, Cfg::kThreads, "step 07");
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
        FLASHSTEPS_CHECK_LAUNCH("step07::attention_kernel");
      }
    });
  });
}
// [end:launcher]

}  // namespace flashsteps::step07
