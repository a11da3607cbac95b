// SPDX-License-Identifier: Apache-2.0
/// @file tile_cuda.h
/// @brief NVIDIA implementation of the tile vocabulary (see tile.h): warp-wide
/// `mma.sync.aligned.m16n8k16` (fp16/bf16 in, fp32 accumulate), fed by plain shared-memory
/// loads (step 04a) or by `ldmatrix` (step 04b on), and `cp.async` copies (step 04 on).
/// Needs sm_80 or newer. Included by tile.h only; tile.h explains the `[introduced:NN]` markers.
///
/// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"; the index maps are
/// fragment_layout.h's, shared with the host test and the book's figure), lane = 4 g + t:
///  - A (16 x 16, row-major): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1],
///    a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9]  (two 16-bit values per register);
///  - B (16 x 8, "col"): b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g];
///  - C (16 x 8, fp32): c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1].
/// So the accumulator of two adjacent n8 tiles of S is, element for element, the A fragment
/// of P for the next GEMM (FlashAttention-2's register reuse, from step 04b on: P never
/// touches shared memory; step 04a still passes it through shared memory).
#pragma once

#include <cstdint>
#include <type_traits>

#include "flashsteps/fragment_layout.h"
#include "flashsteps/vendor.h"

namespace flashsteps::tile {

// [introduced:04a] the accumulator, row reductions
/// Rows of one matrix-instruction tile; WARP_M is a multiple of it.
inline constexpr int kAtomM = 16;
/// Columns of one accumulator atom (mma n8); tile widths are multiples of 16.
inline constexpr int kAtomN = 8;

/// ROWS x COLS fp32 accumulator of one warp: kRowTiles x kColTiles m16n8 atoms, 4 values per lane.
template <int ROWS, int COLS>
struct Acc {
  static_assert(ROWS % 16 == 0, "accumulator rows (WARP_M) must be a multiple of 16");
  static_assert(COLS % 16 == 0, "accumulator columns (BLOCK_N, head dim) must be a multiple of 16");
  static constexpr int kRowTiles = ROWS / 16;  ///< m16 atoms down
  static constexpr int kColTiles = COLS / 8;   ///< n8 atoms across
  /// Rows this lane holds: g and g + 8 of every 16-row tile.
  static constexpr int kSlots = 2 * kRowTiles;
  float x[kRowTiles][kColTiles][4];  ///< c0..c3 of every atom

  /// Row (within the accumulator) of this lane's slot @p s.
  __device__ __forceinline__ static int slot_row(int s) { return FLASHSTEPS_MMA_C_ROW(16 * (s / 2), threadIdx.x % 32, s % 2); }
  /// Elements of one row slot that this lane holds: two columns of every n8 atom.
  static constexpr int kRowElems = 2 * kColTiles;
  /// Element @p k (0 .. kRowElems - 1) of this lane's row slot @p s: c[2 (s % 2) + k % 2] of
  /// atom (s / 2, k / 2), the same element for_each() passes with slot s and column col(k).
  __device__ __forceinline__ float& at(int s, int k) { return x[s / 2][k / 2][2 * (s % 2) + k % 2]; }
  /// As at(), read-only.
  __device__ __forceinline__ float at(int s, int k) const { return x[s / 2][k / 2][2 * (s % 2) + k % 2]; }
  /// Column (within the accumulator) of element @p k of a row slot of this lane.
  __device__ __forceinline__ static int col(int k) { return FLASHSTEPS_MMA_C_COL(8 * (k / 2), threadIdx.x % 32, k % 2); }
  /// Sets every element to 0.
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < kRowTiles; ++i)
#pragma unroll
      for (int j = 0; j < kColTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) x[i][j][e] = 0.0f;
  }
  /// Calls f(slot, row, col, value) for the 4 kRowTiles kColTiles elements of this lane.
  template <typename F>
  __device__ __forceinline__ void for_each(F&& f) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < kRowTiles; ++i)
#pragma unroll
      for (int j = 0; j < kColTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) f(2 * i + e / 2, FLASHSTEPS_MMA_C_ROW(16 * i, lane, e / 2), FLASHSTEPS_MMA_C_COL(8 * j, lane, e % 2), x[i][j][e]);
  }
  /// As for_each(), read-only.
  template <typename F>
  __device__ __forceinline__ void for_each(F&& f) const {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < kRowTiles; ++i)
#pragma unroll
      for (int j = 0; j < kColTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) f(2 * i + e / 2, FLASHSTEPS_MMA_C_ROW(16 * i, lane, e / 2), FLASHSTEPS_MMA_C_COL(8 * j, lane, e % 2), x[i][j][e]);
  }
};

/// Max over the 4 lanes (t = 0..3) that hold the same row.
__device__ __forceinline__ float row_allreduce_max(float v) {
  v = fmaxf(v, vendor::shfl_xor(v, 1));
  return fmaxf(v, vendor::shfl_xor(v, 2));
}
/// Sum over the 4 lanes (t = 0..3) that hold the same row.
__device__ __forceinline__ float row_allreduce_sum(float v) {
  v += vendor::shfl_xor(v, 1);
  return v + vendor::shfl_xor(v, 2);
}

// [introduced:04] one-instruction exp2, warp vote
/// 2^x in one instruction (`ex2.approx.ftz.f32`: MUFU.EX2, relative error ~2^-22, subnormal
/// results flushed to zero). exp2f() adds range checks around it for subnormals, three more
/// instructions per score that a probability rounded to 16 bits never needs.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// True on every lane when @p p is true on any lane of the warp.
__device__ __forceinline__ bool warp_any(bool p) { return __any_sync(0xffffffffu, p); }

// [introduced:04b] shared-space addresses
/// Shared-memory address of @p p for the PTX shared state space.
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// [introduced:04] cp.async
/// 16 bytes global -> shared, asynchronously (`cp.async.cg`, bypassing L1 and the registers);
/// writes zeros instead when @p in_bounds is false (source size 0: nothing is read). With
/// L2_LINE (step 10), L2 fetches the whole 128-byte line of the 16 bytes from DRAM at once
/// (`.L2::128B`, PTX ISA 9.7.9.25.3.1), not the 32-byte sectors as they are asked for.
template <bool L2_LINE = false, typename T>
__device__ __forceinline__ void copy_16B_async(T* smem, const T* gmem, bool in_bounds) {
  if constexpr (L2_LINE)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
                 "r"(in_bounds ? 16 : 0));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
                 "r"(in_bounds ? 16 : 0));
}
/// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
/// Waits until at most N committed groups are still in flight (this thread's copies only:
/// follow with __syncthreads() before reading what other threads copied).
template <int N>
__device__ __forceinline__ void wait_pending() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// [introduced:04b] ldmatrix
/// Four 8x8 matrices of 16-bit elements from shared memory; lane l gives the (shared-space)
/// address of
/// row l % 8 of matrix l / 8, and receives (row l / 4, columns 2 (l % 4), +1) of each.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}
/// As ldmatrix_x4, transposed: lane l receives (rows 2 (l % 4), +1; column l / 4) of each.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}

// [introduced:04a] mma.sync, operands by plain loads
/// c += a b for one m16n8k16 atom; T (vendor::half_t or vendor::bf16_t) picks the instruction.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<T, vendor::bf16_t>) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, vendor::half_t>, "tensor-core tiles take fp16 or bf16");
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/// Two adjacent 16-bit elements of shared memory as one register, @p p[0] in the low half
/// (one 4-byte load, LDS.32).
template <typename T>
__device__ __forceinline__ std::uint32_t load2(const T* p) {
  return *reinterpret_cast<const std::uint32_t*>(p);
}

/// Two 16-bit elements @p pitch apart (a column of a row-major tile) as one register, @p p[0]
/// in the low half (two 2-byte loads).
template <typename T>
__device__ __forceinline__ std::uint32_t load2_column(const T* p, int pitch) {
  const unsigned short* b = reinterpret_cast<const unsigned short*>(p);
  return static_cast<std::uint32_t>(b[0]) | static_cast<std::uint32_t>(b[pitch]) << 16;
}

/// The A fragment of one m16n8k16 atom from the 16 x 16 block at @p sA of a row-major tile:
/// a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9], a3 = A[g+8][2t+8, 2t+9].
template <typename T>
__device__ __forceinline__ void load_a_plain(std::uint32_t (&a)[4], const T* sA, int pitch) {
  const int lane = threadIdx.x % 32, g = FLASHSTEPS_MMA_GROUP_ID(lane), t = FLASHSTEPS_MMA_THREAD_IN_GROUP(lane);
  a[0] = load2(sA + g * pitch + 2 * t);
  a[1] = load2(sA + (g + 8) * pitch + 2 * t);
  a[2] = load2(sA + g * pitch + 2 * t + 8);
  a[3] = load2(sA + (g + 8) * pitch + 2 * t + 8);
}

/// S = A B^T for one warp, every operand register read by a plain shared-memory load: A is the
/// warp's ROWS x D rows at @p sA, B the COLS x D rows at @p sB (both with pitch
/// smem_pitch(D)). B^T's fragment of atom j is b0 = B[8j + g][2t, 2t+1], b1 = B[8j + g][2t+8, 2t+9]:
/// a row of B, so 4-byte loads serve it as they serve A. Per 16 columns of D and 16 rows of A:
/// 4 loads for A, then 2 loads and 1 mma per n8 atom.
template <int D, typename T, int ROWS, int COLS>
__device__ __forceinline__ void mma_ABt_plain(Acc<ROWS, COLS>& s, const T* sA, const T* sB) {
  constexpr int pitch = smem_pitch(D);
  const int lane = threadIdx.x % 32, g = FLASHSTEPS_MMA_GROUP_ID(lane), t = FLASHSTEPS_MMA_THREAD_IN_GROUP(lane);
  s.zero();
#pragma unroll
  for (int k = 0; k < D; k += 16) {
    std::uint32_t a[Acc<ROWS, COLS>::kRowTiles][4];
#pragma unroll
    for (int i = 0; i < Acc<ROWS, COLS>::kRowTiles; ++i) load_a_plain(a[i], sA + 16 * i * pitch + k, pitch);
#pragma unroll
    for (int j = 0; j < Acc<ROWS, COLS>::kColTiles; ++j) {
      const T* b_row = sB + (8 * j + g) * pitch + k + 2 * t;
      const std::uint32_t b0 = load2(b_row), b1 = load2(b_row + 8);
#pragma unroll
      for (int i = 0; i < Acc<ROWS, COLS>::kRowTiles; ++i) mma_16816<T>(s.x[i][j], a[i], b0, b1);
    }
  }
}

/// O += P V for one warp, by plain shared-memory loads: P is the warp's ROWS x KEYS rows at
/// @p sP (16-bit, pitch smem_pitch(KEYS)), V the KEYS x D rows at @p sV (pitch smem_pitch(D)).
/// V's fragment of output atom j is b0 = V[2t, 2t+1][8j + g], b1 = V[2t+8, 2t+9][8j + g]: two
/// elements of a column, so each register takes two 2-byte loads.
template <int D, int KEYS, typename T, int ROWS>
__device__ __forceinline__ void mma_AB_plain(Acc<ROWS, D>& o, const T* sP, const T* sV) {
  constexpr int pitch = smem_pitch(D), p_pitch = smem_pitch(KEYS);
  const int lane = threadIdx.x % 32, g = FLASHSTEPS_MMA_GROUP_ID(lane), t = FLASHSTEPS_MMA_THREAD_IN_GROUP(lane);
#pragma unroll
  for (int kk = 0; kk < KEYS; kk += 16) {
    std::uint32_t a[Acc<ROWS, D>::kRowTiles][4];
#pragma unroll
    for (int i = 0; i < Acc<ROWS, D>::kRowTiles; ++i) load_a_plain(a[i], sP + 16 * i * p_pitch + kk, p_pitch);
#pragma unroll
    for (int j = 0; j < Acc<ROWS, D>::kColTiles; ++j) {
      const T* v_col = sV + (kk + 2 * t) * pitch + 8 * j + g;
      const std::uint32_t b0 = load2_column(v_col, pitch), b1 = load2_column(v_col + 8 * pitch, pitch);
#pragma unroll
      for (int i = 0; i < Acc<ROWS, D>::kRowTiles; ++i) mma_16816<T>(o.x[i][j], a[i], b0, b1);
    }
  }
}

// [introduced:04b] P in registers, fragments by ldmatrix
/// Two floats rounded to T (nearest even) and packed into one register, @p lo in the low half.
template <typename T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, vendor::bf16_t>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
}

/// The A fragment of P for k-step @p kk (keys 16 kk to 16 kk + 15) of row tile @p i, rounded
/// to T: the accumulator of S's atoms 2 kk and 2 kk + 1 is already laid out as that fragment
/// (FlashAttention-2, section 3.3), so it is only packed, two elements per register.
template <typename T, int ROWS, int KEYS>
__device__ __forceinline__ void p_fragment(std::uint32_t (&a)[4], const Acc<ROWS, KEYS>& p, int i, int kk) {
  a[0] = pack2<T>(p.x[i][2 * kk][0], p.x[i][2 * kk][1]);
  a[1] = pack2<T>(p.x[i][2 * kk][2], p.x[i][2 * kk][3]);
  a[2] = pack2<T>(p.x[i][2 * kk + 1][0], p.x[i][2 * kk + 1][1]);
  a[3] = pack2<T>(p.x[i][2 * kk + 1][2], p.x[i][2 * kk + 1][3]);
}

/// S = A B^T for one warp, A's and B's fragments read by ldmatrix from where @p a_addr(i, k) and
/// @p b_addr(j, k) say: the lane's shared-space address for rows 16 i to 16 i + 15 of A, or
/// 16 j to 16 j + 15 of B, columns k to k + 15 of D.
template <int D, typename T, int ROWS, int COLS, typename AAddr, typename BAddr>
__device__ __forceinline__ void mma_ABt_at(Acc<ROWS, COLS>& s, AAddr a_addr, BAddr b_addr) {
  s.zero();
#pragma unroll
  for (int k = 0; k < D; k += 16) {
    std::uint32_t a[Acc<ROWS, COLS>::kRowTiles][4];
#pragma unroll
    for (int i = 0; i < Acc<ROWS, COLS>::kRowTiles; ++i) ldmatrix_x4(a[i], a_addr(i, k));
#pragma unroll
    for (int j = 0; j < COLS / 16; ++j) {
      std::uint32_t b[4];  // b0, b1 of atom 2j, then of atom 2j + 1
      ldmatrix_x4(b, b_addr(j, k));
#pragma unroll
      for (int i = 0; i < Acc<ROWS, COLS>::kRowTiles; ++i) {
        mma_16816<T>(s.x[i][2 * j], a[i], b[0], b[1]);
        mma_16816<T>(s.x[i][2 * j + 1], a[i], b[2], b[3]);
      }
    }
  }
}

/// S = A B^T for one warp: A is the warp's ROWS x D rows of shared memory at @p sA, B the
/// COLS x D rows at @p sB (both with pitch smem_pitch(D)). Per 16 columns of D: one
/// ldmatrix.x4 per 16 rows of A, one per 16 rows of B (two n8 atoms), then kRowTiles x 2 mma
/// per B load. Addresses are one register plus compile-time offsets (immediates in LDSM).
template <int D, typename T, int ROWS, int COLS>
__device__ __forceinline__ void mma_ABt(Acc<ROWS, COLS>& s, const T* sA, const T* sB) {
  constexpr int pitch = smem_pitch(D);
  const int lane = threadIdx.x % 32;
  const std::uint32_t a_base = smem_addr(sA + FLASHSTEPS_LDMATRIX_A_ROW(lane) * pitch + FLASHSTEPS_LDMATRIX_A_COL(lane));
  const std::uint32_t b_base = smem_addr(sB + FLASHSTEPS_LDMATRIX_B_ROW(lane) * pitch + FLASHSTEPS_LDMATRIX_B_COL(lane));
  mma_ABt_at<D, T>(s, [&](int i, int k) { return a_base + 2 * (16 * i * pitch + k); },
                   [&](int j, int k) { return b_base + 2 * (16 * j * pitch + k); });
}

/// O += P V for one warp, V's fragments read transposed by ldmatrix from where @p v_addr(kk, j)
/// says: the lane's shared-space address for keys 16 kk to 16 kk + 15, columns 16 j to 16 j + 15.
/// P is the accumulator of S (rounded to T here), or anything else p_fragment() takes apart.
template <int D, typename T, int KEYS, int ROWS, typename P, typename VAddr>
__device__ __forceinline__ void mma_AB_at(Acc<ROWS, D>& o, const P& p, VAddr v_addr) {
#pragma unroll
  for (int kk = 0; kk < KEYS / 16; ++kk) {
    std::uint32_t a[ROWS / 16][4];
#pragma unroll
    for (int i = 0; i < ROWS / 16; ++i) p_fragment<T>(a[i], p, i, kk);
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
      std::uint32_t b[4];  // b0, b1 of output atom 2j, then of atom 2j + 1
      ldmatrix_x4_trans(b, v_addr(kk, j));
#pragma unroll
      for (int i = 0; i < ROWS / 16; ++i) {
        mma_16816<T>(o.x[i][2 * j], a[i], b[0], b[1]);
        mma_16816<T>(o.x[i][2 * j + 1], a[i], b[2], b[3]);
      }
    }
  }
}

/// O += P V for one warp: P is the accumulator of S after the softmax (rounded to T here, in
/// registers), V the KEYS x D rows at @p sV (pitch smem_pitch(D)), read transposed by ldmatrix.
template <int D, typename T, int ROWS, int KEYS>
__device__ __forceinline__ void mma_AB(Acc<ROWS, D>& o, const Acc<ROWS, KEYS>& p, const T* sV) {
  constexpr int pitch = smem_pitch(D);
  const int lane = threadIdx.x % 32;
  const std::uint32_t v_base =
      smem_addr(sV + FLASHSTEPS_LDMATRIX_TRANS_B_ROW(lane) * pitch + FLASHSTEPS_LDMATRIX_TRANS_B_COL(lane));
  mma_AB_at<D, T, KEYS>(o, p, [&](int kk, int j) { return v_base + 2 * (16 * kk * pitch + 16 * j); });
}

// [introduced:06] P packed once
/// P of one warp rounded to T and packed, as the A fragments of every k-step of O += P V
/// (p_fragment() of each): two 16-bit values per register, KEYS / 4 registers per row tile
/// and lane instead of the accumulator's KEYS / 2. FlashAttention-2 converts P so, right after
/// the softmax; packed before the rescale of O, the float accumulator of S is dead by then.
template <typename T, int ROWS, int KEYS>
struct PackedP {
  std::uint32_t a[ROWS / 16][KEYS / 16][4];  ///< the A fragment of row tile i, k-step kk
};
/// The A fragment of k-step @p kk of row tile @p i of a packed P, for mma_AB_at(): made already.
template <typename T, int ROWS, int KEYS>
__device__ __forceinline__ void p_fragment(std::uint32_t (&a)[4], const PackedP<T, ROWS, KEYS>& p, int i, int kk) {
#pragma unroll
  for (int r = 0; r < 4; ++r) a[r] = p.a[i][kk][r];
}
/// P of the accumulator @p p rounded to T (nearest even) and packed.
template <typename T, int ROWS, int KEYS>
__device__ __forceinline__ PackedP<T, ROWS, KEYS> pack_p(const Acc<ROWS, KEYS>& p) {
  PackedP<T, ROWS, KEYS> out;
#pragma unroll
  for (int i = 0; i < ROWS / 16; ++i)
#pragma unroll
    for (int kk = 0; kk < KEYS / 16; ++kk) p_fragment<T>(out.a[i][kk], p, i, kk);
  return out;
}
/// O += P V as mma_AB(), with P already packed (pack_p()): the same ldmatrix loads and
/// products in the same order, so the same result.
template <int D, typename T, int ROWS, int KEYS>
__device__ __forceinline__ void mma_AB(Acc<ROWS, D>& o, const PackedP<T, ROWS, KEYS>& p, const T* sV) {
  constexpr int pitch = smem_pitch(D);
  const int lane = threadIdx.x % 32;
  const std::uint32_t v_base =
      smem_addr(sV + FLASHSTEPS_LDMATRIX_TRANS_B_ROW(lane) * pitch + FLASHSTEPS_LDMATRIX_TRANS_B_COL(lane));
  mma_AB_at<D, T, KEYS>(o, p, [&](int kk, int j) { return v_base + 2 * (16 * kk * pitch + 16 * j); });
}

// [introduced:06] the epilogue: a warp's barrier, reciprocal and logarithm
/// Orders every lane's shared-memory writes before the shared-memory reads that follow on any
/// lane of the same warp: a barrier for one warp, not the block.
/// Source: CUDA C++ Programming Guide, "Synchronization Functions" (`__syncwarp`).
__device__ __forceinline__ void sync_warp() { __syncwarp(); }

/// 1 / x in one instruction (`rcp.approx.ftz.f32`: MUFU.RCP, at most 1 ulp off; +inf at 0).
/// 1.0f / x is correctly rounded and branches to a slow path for very large or very small x,
/// a branch per row that keeps the rows of the epilogue from running side by side.
/// Source: PTX ISA, "Floating Point Instructions: rcp.approx.ftz.f32".
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/// log2(x) in one instruction (`lg2.approx.ftz.f32`: MUFU.LG2, absolute error at most 2^-22
/// on (0.5, 2), relative error 2^-22 elsewhere; -inf at 0, subnormal inputs read as 0).
/// Source: PTX ISA, "Floating Point Instructions: lg2".
__device__ __forceinline__ float log2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// [introduced:10] the swizzled layout
/// mma_ABt() on tiles in the Swizzled layout (tile.h): A is the warp's ROWS x D rows at @p sA,
/// B the COLS x D rows at @p sB, both written with Swizzled::offset<D> (rows D elements apart,
/// D a multiple of 64), each pointer at a row that is a multiple of 8 of its tile, on a 128-byte
/// boundary. The same ldmatrix loads and products as mma_ABt(), each lane's address XORed with
/// its row % 8 (a multiple of 16 rows or columns added to a lane's row or column leaves that
/// XOR unchanged).
template <int D, typename T, int ROWS, int COLS>
__device__ __forceinline__ void mma_ABt(Acc<ROWS, COLS>& s, const T* sA, const T* sB, Swizzled) {
  const int lane = threadIdx.x % 32;
  const int a_row = FLASHSTEPS_LDMATRIX_A_ROW(lane), a_col = FLASHSTEPS_LDMATRIX_A_COL(lane);
  const int b_row = FLASHSTEPS_LDMATRIX_B_ROW(lane), b_col = FLASHSTEPS_LDMATRIX_B_COL(lane);
  const int a_xor = a_row % 8 * kChunk, b_xor = b_row % 8 * kChunk;
  const std::uint32_t a_base = smem_addr(sA + a_row * D), b_base = smem_addr(sB + b_row * D);
  mma_ABt_at<D, T>(s, [&](int i, int k) { return a_base + 2 * (16 * i * D + ((k + a_col) ^ a_xor)); },
                   [&](int j, int k) { return b_base + 2 * (16 * j * D + ((k + b_col) ^ b_xor)); });
}

/// mma_AB() with V in the Swizzled layout (tile.h): the KEYS x D rows at @p sV, written with
/// Swizzled::offset<D>, @p sV at a row that is a multiple of 8, on a 128-byte boundary; read
/// transposed by ldmatrix.
template <int D, typename T, int ROWS, int KEYS>
__device__ __forceinline__ void mma_AB(Acc<ROWS, D>& o, const Acc<ROWS, KEYS>& p, const T* sV, Swizzled) {
  const int lane = threadIdx.x % 32;
  const int v_row = FLASHSTEPS_LDMATRIX_TRANS_B_ROW(lane), v_col = FLASHSTEPS_LDMATRIX_TRANS_B_COL(lane);
  const int v_xor = v_row % 8 * kChunk;
  const std::uint32_t v_base = smem_addr(sV + v_row * D);
  mma_AB_at<D, T, KEYS>(o, p, [&](int kk, int j) { return v_base + 2 * (16 * kk * D + ((16 * j + v_col) ^ v_xor)); });
}

// [introduced:04a] the end of the namespace
}  // namespace flashsteps::tile
