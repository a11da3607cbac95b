// SPDX-License-Identifier: Apache-2.0
/// @file tile_hip.h
/// @brief AMD implementation of the tile vocabulary (see tile.h): wave64
/// `v_mfma_f32_16x16x16f16` / `v_mfma_f32_16x16x16bf16_1k` (gfx90a, gfx940 and later CDNA).
/// Included by tile.h only; tile.h explains the `[introduced:NN]` markers.
///
/// Operand layouts of the 16x16x16 MFMA (CDNA3 ISA, section 7.1; the index maps are
/// fragment_layout.h's, shared with the host test and the book's figure), lane = 16 q + r
/// (r = 0..15, q = 0..3), four 16-bit values per operand register pair:
///  - A (16 x 16): A[r][4q .. 4q+3];
///  - B (16 x 16): B[4q .. 4q+3][r];
///  - D (16 x 16, fp32): D[4q .. 4q+3][r].
/// The kernels compute the transposed products, S^T = K Q^T and O^T += V^T P^T. Then the
/// output of the first, S^T, is in lane 16 q + r the scores of query r with keys 4q .. 4q+3:
/// exactly the B operand P^T of the second. P stays in registers (as on NVIDIA), and every
/// lane holds whole rows of S and O for query r, so a row's statistics combine over the four
/// lanes r, r + 16, r + 32, r + 48.
#pragma once

#include <cstdint>
#include <type_traits>

#include "flashsteps/fragment_layout.h"
#include "flashsteps/vendor.h"

namespace flashsteps::tile {

// [introduced:04a] the accumulator, row reductions
/// Rows of one matrix-instruction tile; WARP_M is a multiple of it.
inline constexpr int kAtomM = 16;
/// Columns of one accumulator atom (16x16 MFMA).
inline constexpr int kAtomN = 16;

using floatx4 = float __attribute__((ext_vector_type(4)));          ///< MFMA accumulator
using halfx4 = _Float16 __attribute__((ext_vector_type(4)));        ///< four fp16 operands
using bf16x4 = short __attribute__((ext_vector_type(4)));           ///< four bf16 operands (bits)

/// ROWS x COLS fp32 accumulator of one wavefront: kRowTiles x kColTiles 16x16 atoms.
/// Element (i, j, e) of lane 16 q + r is row 16 i + r, column 16 j + 4 q + e: element e of the
/// MFMA's D = S^T, transposed.
template <int ROWS, int COLS>
struct Acc {
  static_assert(ROWS % 16 == 0, "accumulator rows (WARP_M) must be a multiple of 16");
  static_assert(COLS % 16 == 0, "accumulator columns (BLOCK_N, head dim) must be a multiple of 16");
  static constexpr int kRowTiles = ROWS / 16;  ///< 16-row atoms down
  static constexpr int kColTiles = COLS / 16;  ///< 16-column atoms across
  /// Rows this lane holds: row r of every 16-row tile.
  static constexpr int kSlots = kRowTiles;
  float x[kRowTiles][kColTiles][4];  ///< the four D values of every atom

  /// Row (within the accumulator) of this lane's slot @p s.
  __device__ __forceinline__ static int slot_row(int s) { return FLASHSTEPS_MFMA_D_COL(16 * s, threadIdx.x); }
  /// Elements of one row slot that this lane holds: four columns of every 16x16 atom.
  static constexpr int kRowElems = 4 * kColTiles;
  /// Element @p k (0 .. kRowElems - 1) of this lane's row slot @p s: element k % 4 of atom
  /// (s, k / 4), the same element for_each() passes with slot s and column col(k).
  __device__ __forceinline__ float& at(int s, int k) { return x[s][k / 4][k % 4]; }
  /// As at(), read-only.
  __device__ __forceinline__ float at(int s, int k) const { return x[s][k / 4][k % 4]; }
  /// Column (within the accumulator) of element @p k of a row slot of this lane.
  __device__ __forceinline__ static int col(int k) { return FLASHSTEPS_MFMA_D_ROW(16 * (k / 4), threadIdx.x % 64, k % 4); }
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
    const int lane = threadIdx.x % 64;
#pragma unroll
    for (int i = 0; i < kRowTiles; ++i)
#pragma unroll
      for (int j = 0; j < kColTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) f(i, FLASHSTEPS_MFMA_D_COL(16 * i, lane), FLASHSTEPS_MFMA_D_ROW(16 * j, lane, e), x[i][j][e]);
  }
  /// As for_each(), read-only.
  template <typename F>
  __device__ __forceinline__ void for_each(F&& f) const {
    const int lane = threadIdx.x % 64;
#pragma unroll
    for (int i = 0; i < kRowTiles; ++i)
#pragma unroll
      for (int j = 0; j < kColTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) f(i, FLASHSTEPS_MFMA_D_COL(16 * i, lane), FLASHSTEPS_MFMA_D_ROW(16 * j, lane, e), x[i][j][e]);
  }
};

/// Max over the 4 lanes (r, r + 16, r + 32, r + 48) that hold the same row.
__device__ __forceinline__ float row_allreduce_max(float v) {
  v = fmaxf(v, vendor::shfl_xor(v, 16));
  return fmaxf(v, vendor::shfl_xor(v, 32));
}
/// Sum over the 4 lanes (r, r + 16, r + 32, r + 48) that hold the same row.
__device__ __forceinline__ float row_allreduce_sum(float v) {
  v += vendor::shfl_xor(v, 16);
  return v + vendor::shfl_xor(v, 32);
}

// [introduced:04] exp2, wavefront vote, copies
/// 2^x (v_exp_f32).
__device__ __forceinline__ float exp2_approx(float x) { return exp2f(x); }

/// True on every lane when @p p is true on any lane of the wavefront.
__device__ __forceinline__ bool warp_any(bool p) { return __any(p); }

/// 16 bytes global -> LDS (through registers: the copy completes before this returns);
/// zeros instead when @p in_bounds is false. L2_LINE (NVIDIA's whole-line L2 fetch) has no
/// counterpart here and changes nothing.
template <bool L2_LINE = false, typename T>
__device__ __forceinline__ void copy_16B_async(T* smem, const T* gmem, bool in_bounds) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (in_bounds) v = *reinterpret_cast<const uint4*>(gmem);
  *reinterpret_cast<uint4*>(smem) = v;
}
/// Nothing to do on AMD: copies are synchronous (see copy_16B_async).
__device__ __forceinline__ void commit() {}
/// Nothing to do on AMD: copies are synchronous (see copy_16B_async).
template <int N>
__device__ __forceinline__ void wait_pending() {}

// [introduced:04a] operand loads
/// The MFMA operand type of T: four fp16 or four bf16 (as raw bits).
template <typename T>
using operand4 = std::conditional_t<std::is_same_v<T, vendor::bf16_t>, bf16x4, halfx4>;

/// Four consecutive 16-bit elements of shared memory (one 8-byte LDS read).
template <typename T>
__device__ __forceinline__ operand4<T> load4(const T* p) {
  return *reinterpret_cast<const operand4<T>*>(p);
}

/// Four 16-bit elements @p pitch apart (a column of a row-major tile: four LDS reads).
template <typename T>
__device__ __forceinline__ operand4<T> load4_column(const T* p, int pitch) {
  const unsigned short* b = reinterpret_cast<const unsigned short*>(p);
  operand4<T> v;
  if constexpr (std::is_same_v<T, vendor::bf16_t>) {
    v[0] = static_cast<short>(b[0]), v[1] = static_cast<short>(b[pitch]);
    v[2] = static_cast<short>(b[2 * pitch]), v[3] = static_cast<short>(b[3 * pitch]);
  } else {
    const _Float16* h = reinterpret_cast<const _Float16*>(p);
    v[0] = h[0], v[1] = h[pitch], v[2] = h[2 * pitch], v[3] = h[3 * pitch];
  }
  return v;
}

// [introduced:04b] P's conversion in registers
/// float -> bf16 bits, round to nearest even (P is finite, in [0, 1]).
__device__ __forceinline__ short bf16_bits(float f) {
  const std::uint32_t u = __float_as_uint(f);
  return static_cast<short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// Four floats rounded to T, as an MFMA operand.
template <typename T>
__device__ __forceinline__ operand4<T> convert4(const float (&x)[4]) {
  operand4<T> v;
  if constexpr (std::is_same_v<T, vendor::bf16_t>) {
    v[0] = bf16_bits(x[0]), v[1] = bf16_bits(x[1]), v[2] = bf16_bits(x[2]), v[3] = bf16_bits(x[3]);
  } else {
    v[0] = static_cast<_Float16>(x[0]), v[1] = static_cast<_Float16>(x[1]);
    v[2] = static_cast<_Float16>(x[2]), v[3] = static_cast<_Float16>(x[3]);
  }
  return v;
}

// [introduced:04a] MFMA, operands by plain loads
/// c += a b for one 16x16x16 atom; T picks the instruction.
template <typename T>
__device__ __forceinline__ void mfma_16x16x16(float (&c)[4], operand4<T> a, operand4<T> b) {
  floatx4 acc = {c[0], c[1], c[2], c[3]};
  if constexpr (std::is_same_v<T, vendor::bf16_t>)
    acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, acc, 0, 0, 0);
  else
    acc = __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, acc, 0, 0, 0);
  c[0] = acc[0], c[1] = acc[1], c[2] = acc[2], c[3] = acc[3];
}

/// S = A B^T for one wavefront (tiles with pitch smem_pitch(D)), computed as S^T = B A^T: atom
/// (i, j) takes rows 16 j.. of B (keys) as the MFMA's A operand and rows 16 i.. of A (queries)
/// as its B operand, both read as 4 consecutive elements per lane: one plain 8-byte LDS read
/// per operand register pair.
template <int D, typename T, int ROWS, int COLS>
__device__ __forceinline__ void mma_ABt_plain(Acc<ROWS, COLS>& s, const T* sA, const T* sB) {
  constexpr int pitch = smem_pitch(D);
  const int lane = threadIdx.x % 64, r = FLASHSTEPS_MFMA_LANE_R(lane), q = FLASHSTEPS_MFMA_LANE_Q(lane);
  s.zero();
#pragma unroll
  for (int k = 0; k < D; k += 16) {
    operand4<T> a[Acc<ROWS, COLS>::kRowTiles];
#pragma unroll
    for (int i = 0; i < Acc<ROWS, COLS>::kRowTiles; ++i) a[i] = load4(sA + (16 * i + r) * pitch + k + 4 * q);
#pragma unroll
    for (int j = 0; j < Acc<ROWS, COLS>::kColTiles; ++j) {
      const operand4<T> b = load4(sB + (16 * j + r) * pitch + k + 4 * q);
#pragma unroll
      for (int i = 0; i < Acc<ROWS, COLS>::kRowTiles; ++i) mfma_16x16x16<T>(s.x[i][j], b, a[i]);
    }
  }
}

/// O += P V for one wavefront, computed as O^T += V^T P^T, with P read from shared memory:
/// the warp's ROWS x KEYS rows at @p sP (16-bit, pitch smem_pitch(KEYS)). P^T's B operand of
/// atom (kk, i) is row 16 i + r of P at keys 16 kk + 4 q .. + 3 (one 8-byte read); V^T's A
/// operand is a column of 4 keys per lane (four 2-byte reads).
template <int D, int KEYS, typename T, int ROWS>
__device__ __forceinline__ void mma_AB_plain(Acc<ROWS, D>& o, const T* sP, const T* sV) {
  constexpr int pitch = smem_pitch(D), p_pitch = smem_pitch(KEYS);
  const int lane = threadIdx.x % 64, r = FLASHSTEPS_MFMA_LANE_R(lane), q = FLASHSTEPS_MFMA_LANE_Q(lane);
#pragma unroll
  for (int kk = 0; kk < KEYS / 16; ++kk) {
    operand4<T> pt[Acc<ROWS, D>::kRowTiles];
#pragma unroll
    for (int i = 0; i < Acc<ROWS, D>::kRowTiles; ++i) pt[i] = load4(sP + (16 * i + r) * p_pitch + 16 * kk + 4 * q);
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
      const operand4<T> vt = load4_column(sV + (16 * kk + 4 * q) * pitch + 16 * j + r, pitch);
#pragma unroll
      for (int i = 0; i < Acc<ROWS, D>::kRowTiles; ++i) mfma_16x16x16<T>(o.x[i][j], vt, pt[i]);
    }
  }
}

// [introduced:04b] P in registers
/// S = A B^T for one wavefront. AMD has no ldmatrix: the 8-byte LDS reads of mma_ABt_plain()
/// already give each lane a whole operand register pair in one instruction, so this is it.
template <int D, typename T, int ROWS, int COLS>
__device__ __forceinline__ void mma_ABt(Acc<ROWS, COLS>& s, const T* sA, const T* sB) {
  mma_ABt_plain<D>(s, sA, sB);
}

/// O += P V for one wavefront, computed as O^T += V^T P^T: P's accumulator is already the
/// B operand (rounded to T here); V^T's A operand is a column of 4 keys per lane.
template <int D, typename T, int ROWS, int KEYS>
__device__ __forceinline__ void mma_AB(Acc<ROWS, D>& o, const Acc<ROWS, KEYS>& p, const T* sV) {
  constexpr int pitch = smem_pitch(D);
  const int lane = threadIdx.x % 64;
#pragma unroll
  for (int kk = 0; kk < KEYS / 16; ++kk) {
    operand4<T> pt[Acc<ROWS, KEYS>::kRowTiles];
#pragma unroll
    for (int i = 0; i < Acc<ROWS, KEYS>::kRowTiles; ++i) pt[i] = convert4<T>(p.x[i][kk]);
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
      const operand4<T> vt =
          load4_column(sV + FLASHSTEPS_MFMA_A_COL(16 * kk, lane, 0) * pitch + 16 * j + FLASHSTEPS_MFMA_A_ROW(0, lane), pitch);
#pragma unroll
      for (int i = 0; i < Acc<ROWS, KEYS>::kRowTiles; ++i) mfma_16x16x16<T>(o.x[i][j], vt, pt[i]);
    }
  }
}

// [introduced:06] P packed once
/// P of one wavefront rounded to T, as the B operands of every k-step of O^T += V^T P^T (what
/// mma_AB() converts per k-step), all at once: half the registers of the accumulator.
template <typename T, int ROWS, int KEYS>
struct PackedP {
  operand4<T> a[ROWS / 16][KEYS / 16];  ///< the operand of row tile i, k-step kk
};
/// P of the accumulator @p p rounded to T and packed.
template <typename T, int ROWS, int KEYS>
__device__ __forceinline__ PackedP<T, ROWS, KEYS> pack_p(const Acc<ROWS, KEYS>& p) {
  PackedP<T, ROWS, KEYS> out;
#pragma unroll
  for (int i = 0; i < ROWS / 16; ++i)
#pragma unroll
    for (int kk = 0; kk < KEYS / 16; ++kk) out.a[i][kk] = convert4<T>(p.x[i][kk]);
  return out;
}
/// O += P V as mma_AB(), with P already packed (pack_p()).
template <int D, typename T, int ROWS, int KEYS>
__device__ __forceinline__ void mma_AB(Acc<ROWS, D>& o, const PackedP<T, ROWS, KEYS>& p, const T* sV) {
  constexpr int pitch = smem_pitch(D);
  const int lane = threadIdx.x % 64;
#pragma unroll
  for (int kk = 0; kk < KEYS / 16; ++kk)
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
      const operand4<T> vt =
          load4_column(sV + FLASHSTEPS_MFMA_A_COL(16 * kk, lane, 0) * pitch + 16 * j + FLASHSTEPS_MFMA_A_ROW(0, lane), pitch);
#pragma unroll
      for (int i = 0; i < ROWS / 16; ++i) mfma_16x16x16<T>(o.x[i][j], vt, p.a[i][kk]);
    }
}

// [introduced:06] the epilogue: a wavefront's barrier, reciprocal and logarithm
/// Orders every lane's LDS writes before the LDS reads that follow on any lane of the same
/// wavefront: wavefront-scope release and acquire fences around a wavefront barrier (ROCm 5.2
/// has no __syncwarp).
/// Source: LLVM, "User Guide for AMDGPU Backend", "Memory Scopes" (`wavefront`).
__device__ __forceinline__ void sync_warp() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}

/// 1 / x in one instruction (v_rcp_f32, 1 ulp).
__device__ __forceinline__ float rcp_approx(float x) { return __builtin_amdgcn_rcpf(x); }

/// log2(x) (v_log_f32 with the device library's handling of subnormal inputs).
__device__ __forceinline__ float log2_approx(float x) { return __log2f(x); }

// [introduced:04a] the end of the namespace
}  // namespace flashsteps::tile
