// SPDX-License-Identifier: Apache-2.0
/// @file tile.h
/// @brief The tile vocabulary of the tensor-core steps (04 on): one interface, one
/// implementation per vendor (tile_cuda.h: `mma.sync` m16n8k16; tile_hip.h: MFMA 16x16x16).
///
/// A warp (NVIDIA, 32 lanes) or wavefront (AMD, 64 lanes) owns WARP_M query rows of a block.
/// Its scores S and its output O live in registers as an accumulator, `tile::Acc<ROWS, COLS>`:
/// ROWS x COLS float32 values spread over the lanes in the layout the matrix instruction
/// produces. Each lane holds a few whole-row *slots* (Acc::kSlots rows, the same rows for S and
/// for O), so per-row statistics (the running max m_i and sum l_i of the online softmax) are
/// plain per-lane arrays `float m_i[Acc::kSlots]`, combined across the lanes of a row by
/// row_allreduce_max() / row_allreduce_sum().
///
/// The vocabulary, and the plain loop each word stands for (row r, column c, k summed over):
///
///     mma_ABt(S, sQ, sK)      S[r][c]  = sum_k Q[r][k] * K[c][k]         (S = Q K^T)
///     mma_AB(O, P, sV)        O[r][c] += sum_k P[r][k] * V[k][c]         (O += P V, P rounded to T)
///     pack_p<T>(P)            P rounded to T once, as mma_AB's operand; mma_AB(O, packed P, sV)
///     mma_ABt_plain, mma_AB_plain: the same products with the operands read by plain
///                             shared-memory loads, and P read from shared memory (step 04a)
///     row_max(S, m)           m[r]     = max(m[r], max_c S[r][c])
///     row_sum(S, l)           l[r]    += sum_c S[r][c]                    (this lane's part only)
///     exp2_rows(S, m, a)      S[r][c]  = 2^((S[r][c] - m[r]) * a)     (exp2_approx)
///     mul_row(O, alpha)       O[r][c] *= alpha[r]
///     Acc::for_each(f)        f(slot, r, c, S[r][c]) for the elements this lane holds
///     Acc::at(s, k), col(k)   element k of this lane's row slot s, and its column c
///
/// Shared-memory tiles hold 16-bit elements row-major with a pitch of COLS + 8 elements
/// (smem_pitch(); step 10's decode tile uses the unpadded, swizzled layout of tile::Swizzled
/// instead): the 16 extra bytes per row shift consecutive rows across the banks, so the
/// 16-byte fragment loads of eight consecutive rows hit eight different bank groups. From step
/// 04 on they are filled by load_tile_async(), 16 bytes per copy (NVIDIA: `cp.async`, which
/// bypasses the registers and lets the loads run under the arithmetic; AMD: a register round
/// trip); steps 04a and 04b stage them through registers.
///
/// Each part of the tile headers is marked with the step that introduces it: a line
/// `// [introduced:04a]` and a few words, up to the next such line (lines before the first
/// marker belong to every step). The book shows each step the diff of what it introduces
/// (tools/book/tile_views.py), and a test checks that no step uses a word introduced after it.
///
/// Sources: the tensor-core formulation of FlashAttention-2 (Dao 2023, section 3.3: P stays
/// in registers as the A operand of the second GEMM); NVIDIA PTX ISA, "Warp-level matrix
/// multiply-accumulate instructions" (m16n8k16 fragment layouts, ldmatrix, cp.async);
/// AMD CDNA3 ISA, section 7 "Matrix Arithmetic Instructions" (v_mfma_f32_16x16x16 layouts).
#pragma once

#include <cstdint>
#include <type_traits>

#include "flashsteps/vendor.h"

namespace flashsteps::tile {

// [introduced:04a] the row pitch, 16-byte chunks
/// Row pitch, in elements, of a shared-memory tile with @p cols columns (16 bytes of padding).
constexpr int smem_pitch(int cols) { return cols + 8; }

/// Elements per 16-byte copy of a 16-bit tile.
inline constexpr int kChunk = 8;

// [introduced:10] the swizzled layout
/// Where element (row, col) of a shared-memory tile of COLS 16-bit columns sits, in elements
/// from the tile's first element. Padded, the layout of steps 04-06: rows smem_pitch(COLS)
/// apart, as described above.
struct Padded {
  /// Elements from one row to the next.
  template <int COLS>
  static constexpr int row_elems() { return smem_pitch(COLS); }
  /// Element offset of (@p row, @p col), 0 <= col < COLS.
  template <int COLS>
  static constexpr int offset(int row, int col) { return row * smem_pitch(COLS) + col; }
};
/// Swizzled (step 10; COLS a multiple of 64): rows COLS apart with no padding, and the 16-byte
/// unit u of row r stored at unit u XOR (r % 8) of its 128 bytes. Eight consecutive rows still
/// put any one unit on eight different bank groups, so ldmatrix reads them without the 8-way
/// conflicts of unpadded rows, and every 128 bytes of a row fill one aligned 128-byte line of
/// shared memory, which the 16-byte copies of eight lanes write in one pass. Seven padded rows
/// of every eight (144 bytes at COLS = 64) straddle two such lines: Nsight Compute then counts
/// 9.7 shared-memory passes and 10.5 L2 requests per warp-wide cp.async instead of 4 and 4,
/// partial-line requests (chapter 10). Row numbers count from a pointer at a row that is a
/// multiple of 8, on a 128-byte boundary. The XOR is that of the Hopper steps' 128-byte
/// swizzle (swizzle.h), on whole rows. NVIDIA only: tile_hip.h has no swizzled products.
struct Swizzled {
  /// Elements from one row to the next: COLS, no padding.
  template <int COLS>
  static constexpr int row_elems() {
    static_assert(COLS % 64 == 0, "the swizzled layout needs rows of whole 128-byte lines");
    return COLS;
  }
  /// Element offset of (@p row, @p col), 0 <= col < COLS: the 16-byte unit col / 8 XOR row % 8.
  template <int COLS>
  static constexpr int offset(int row, int col) {
    return row * row_elems<COLS>() + (col ^ (row % 8 * kChunk));
  }
};

// [introduced:04a] the vendor header

}  // namespace flashsteps::tile

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#if FLASHSTEPS_VENDOR_HIP
#include "flashsteps/tile_hip.h"
#else
#include "flashsteps/tile_cuda.h"
#endif

namespace flashsteps::tile {

// [introduced:04] asynchronous tile copies
/// Copies a ROWS x COLS tile of 16-bit elements from global memory (rows @p row_stride
/// elements apart, 16-byte aligned) to shared memory (pitch @p pitch), 16 bytes per copy, with
/// THREADS threads. Rows at or past @p valid_rows and columns at or past @p valid_cols (a
/// multiple of 8) are zero-filled instead of read. Asynchronous on NVIDIA: see commit() and
/// wait_pending(). L2_LINE: see copy_16B_async() (step 10's K/V streams set it).
template <int ROWS, int COLS, int THREADS, bool L2_LINE = false, typename T>
__device__ __forceinline__ void load_tile_async(T* smem, int pitch, const T* gmem, std::int64_t row_stride,
                                                std::int64_t valid_rows, int valid_cols) {
  constexpr int kChunksPerRow = COLS / kChunk;
  static_assert(COLS % kChunk == 0, "a tile row must be a whole number of 16-byte chunks");
  if constexpr (THREADS % kChunksPerRow != 0) {  // e.g. D = 96: 12 chunks per row
    constexpr int kChunks = ROWS * kChunksPerRow, kPerThread = (kChunks + THREADS - 1) / THREADS;
#pragma unroll
    for (int it = 0; it < kPerThread; ++it) {
      const int e = threadIdx.x + it * THREADS;
      if (kChunks % THREADS != 0 && e >= kChunks) break;
      const int r = e / kChunksPerRow, c = (e % kChunksPerRow) * kChunk;
      const bool in_bounds = r < valid_rows && c < valid_cols;
      copy_16B_async<L2_LINE>(smem + r * pitch + c, in_bounds ? gmem + r * row_stride + c : gmem, in_bounds);
    }
    return;
  }
  // Each thread copies one fixed 16-byte column of every (THREADS / kChunksPerRow)-th row, so
  // its addresses advance by a constant: no 64-bit multiply per copy.
  constexpr int kRowStep = THREADS / kChunksPerRow > 0 ? THREADS / kChunksPerRow : 1;
  constexpr int kPerThread = (ROWS + kRowStep - 1) / kRowStep;
  const int r0 = threadIdx.x / kChunksPerRow, c = (threadIdx.x % kChunksPerRow) * kChunk;
  const T* src = gmem + r0 * row_stride + c;
  T* dst = smem + r0 * pitch + c;
#pragma unroll
  for (int it = 0; it < kPerThread; ++it) {
    const int r = r0 + it * kRowStep;
    if (ROWS % kRowStep != 0 && r >= ROWS) break;
    const bool in_bounds = r < valid_rows && c < valid_cols;
    copy_16B_async<L2_LINE>(dst, in_bounds ? src : gmem, in_bounds);
    src += kRowStep * row_stride;
    dst += kRowStep * pitch;
  }
}

// [introduced:10] the swizzled layout
/// The copy and the two products with the layout named by a tag, so that a step names its
/// layout once: Padded calls the functions above, Swizzled the overloads below (and, for the
/// products, those of tile_cuda.h; NVIDIA only).
template <int ROWS, int COLS, int THREADS, bool L2_LINE = false, typename T>
__device__ __forceinline__ void load_tile_async(T* smem, const T* gmem, std::int64_t row_stride,
                                                std::int64_t valid_rows, int valid_cols, Padded) {
  load_tile_async<ROWS, COLS, THREADS, L2_LINE>(smem, smem_pitch(COLS), gmem, row_stride, valid_rows, valid_cols);
}
/// mma_ABt() on tiles in the Padded layout (the function of that name without a tag).
template <int D, typename T, int ROWS, int COLS>
__device__ __forceinline__ void mma_ABt(Acc<ROWS, COLS>& s, const T* sA, const T* sB, Padded) {
  mma_ABt<D>(s, sA, sB);
}
/// mma_AB() with V in the Padded layout (the function of that name without a tag).
template <int D, typename T, int ROWS, int KEYS>
__device__ __forceinline__ void mma_AB(Acc<ROWS, D>& o, const Acc<ROWS, KEYS>& p, const T* sV, Padded) {
  mma_AB<D, T>(o, p, sV);
}

/// load_tile_async() into a tile in the Swizzled layout: the same copies, each landing at
/// Swizzled::offset() of its row and column.
template <int ROWS, int COLS, int THREADS, bool L2_LINE = false, typename T>
__device__ __forceinline__ void load_tile_async(T* smem, const T* gmem, std::int64_t row_stride,
                                                std::int64_t valid_rows, int valid_cols, Swizzled) {
  constexpr int kChunksPerRow = COLS / kChunk;
  static_assert(THREADS % kChunksPerRow == 0 && ROWS % (THREADS / kChunksPerRow) == 0,
                "the threads must cover whole rows, and the rows whole rounds of the threads");
  constexpr int kRowStep = THREADS / kChunksPerRow;
  const int r0 = threadIdx.x / kChunksPerRow, c = (threadIdx.x % kChunksPerRow) * kChunk;
  const T* src = gmem + r0 * row_stride + c;
#pragma unroll
  for (int r = r0; r < ROWS; r += kRowStep) {  // ROWS / kRowStep rounds: every thread's r0 < kRowStep
    const bool in_bounds = r < valid_rows && c < valid_cols;
    copy_16B_async<L2_LINE>(smem + Swizzled::offset<COLS>(r, c), in_bounds ? src : gmem, in_bounds);
    src += kRowStep * row_stride;
  }
}

// [introduced:04b] tile stores
/// Copies a ROWS x COLS tile of 16-bit elements from shared memory (pitch @p pitch) to global
/// memory (rows @p row_stride elements apart, 16-byte aligned), 16 bytes per store, by the
/// THREADS threads numbered @p thread (0 .. THREADS - 1). Rows at or past @p valid_rows and
/// columns at or past @p valid_cols (a multiple of 8) are not written.
template <int ROWS, int COLS, int THREADS, typename T>
__device__ __forceinline__ void store_tile(T* gmem, std::int64_t row_stride, std::int64_t valid_rows, int valid_cols,
                                           const T* smem, int pitch, int thread) {
  constexpr int kChunksPerRow = COLS / kChunk, kChunks = ROWS * kChunksPerRow;
#pragma unroll
  for (int it = 0; it < (kChunks + THREADS - 1) / THREADS; ++it) {
    const int e = thread + it * THREADS;
    const int r = e / kChunksPerRow, c = (e % kChunksPerRow) * kChunk;
    if (e < kChunks && r < valid_rows && c < valid_cols)
      *reinterpret_cast<uint4*>(gmem + r * row_stride + c) = *reinterpret_cast<const uint4*>(smem + r * pitch + c);
  }
}

// [introduced:04b] row statistics
/// m[s] = max(m[s], largest element of row slot s), over every lane of the row.
template <int ROWS, int COLS>
__device__ __forceinline__ void row_max(const Acc<ROWS, COLS>& s, float (&m)[Acc<ROWS, COLS>::kSlots]) {
  float tile_max[Acc<ROWS, COLS>::kSlots];
#pragma unroll
  for (int i = 0; i < Acc<ROWS, COLS>::kSlots; ++i) tile_max[i] = m[i];
  s.for_each([&](int slot, int, int, float x) { tile_max[slot] = fmaxf(tile_max[slot], x); });
#pragma unroll
  for (int i = 0; i < Acc<ROWS, COLS>::kSlots; ++i) m[i] = row_allreduce_max(tile_max[i]);
}

/// l[s] += sum of this lane's elements of row slot s (call row_allreduce_sum() once at the end).
template <int ROWS, int COLS>
__device__ __forceinline__ void row_sum(const Acc<ROWS, COLS>& s, float (&l)[Acc<ROWS, COLS>::kSlots]) {
  s.for_each([&](int slot, int, int, float x) { l[slot] += x; });
}

// [introduced:04] exponentials of a whole tile
/// x = exp2((x - m[s]) * scale) for every element of row slot s (FADD, FMUL and one exp2).
/// The subtraction comes first, on purpose. The shorter exp2(x * scale - m * scale) (one FFMA)
/// subtracts m * scale rounded to float32, which is off by up to half an ulp of itself: at a
/// scaled logit of 2^31 that is 128, and 2^128 overflows. x - m is exact for the scores near
/// the maximum (Sterbenz), so the row's largest term is exactly 2^0 = 1 at any magnitude.
template <int ROWS, int COLS>
__device__ __forceinline__ void exp2_rows(Acc<ROWS, COLS>& s, const float (&m)[Acc<ROWS, COLS>::kSlots], float scale) {
  s.for_each([&](int slot, int, int, float& x) { x = exp2_approx((x - m[slot]) * scale); });
}

// [introduced:04b] rescaling; the end of the namespace
/// x *= alpha[s] for every element of row slot s.
template <int ROWS, int COLS>
__device__ __forceinline__ void mul_row(Acc<ROWS, COLS>& o, const float (&alpha)[Acc<ROWS, COLS>::kSlots]) {
  o.for_each([&](int slot, int, int, float& x) { x *= alpha[slot]; });
}

}  // namespace flashsteps::tile
#endif
