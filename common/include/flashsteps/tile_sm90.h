// SPDX-License-Identifier: Apache-2.0
/// @file tile_sm90.h
/// @brief The warpgroup vocabulary of the Hopper steps (07 on; NVIDIA sm_90a only): the
/// 128-byte swizzle and the shared-memory matrix descriptors of `wgmma`, the `wgmma` wrappers
/// (fence / commit_group / wait_group and the MMAs themselves), mbarrier waits, TMA tile loads
/// and stores (step 09's epilogue),
/// register reallocation and named barriers (warp specialisation, step 08), and the host-side
/// encoding of TMA tensor maps.
///
/// A warpgroup is 4 consecutive warps (128 threads, the first warp's index a multiple of 4).
/// `wgmma.mma_async` is issued by all 128 threads together and computes D (64 x N, fp32, in
/// the registers of the warpgroup) += A (64 x 16) * B (16 x N), with B, and optionally A, read
/// straight from shared memory: no ldmatrix, no per-warp fragments to load. It is
/// asynchronous: the instruction returns at once, the tensor cores run on, and the registers
/// of D may be touched only after `wgmma.wait_group`. The contract (PTX ISA 9.7.15.7):
///   wgmma_fence()          before the first wgmma of a batch whose D (or A) registers were
///                          written by ordinary instructions (the softmax, the rescale of O)
///   wgmma_*(...)           the MMAs of the batch, chained on the same D
///   wgmma_commit()         closes the batch into one "wgmma-group"
///   wgmma_wait<N>()        blocks until at most N groups are still running
/// Between issue and wait the compiler must not read or move D: fence_registers() pins them.
///
/// Shared-memory tiles are written by TMA (`cp.async.bulk.tensor`) in the 128-byte swizzled
/// layout that wgmma reads (PTX ISA 9.7.15.5.1.2), in chunks of 64 16-bit columns (128 bytes):
/// a ROWS x COLS tile is COLS / 64 chunks of [ROWS][64], each row 128 bytes. Inside a chunk,
/// the 16-byte unit u of row r sits at unit u ^ (r % 8) (swizzle_128b() below):
///
///     row r:  unit 0   1   2   3   4   5   6   7       (unit = 8 elements = 16 bytes)
///       0      0   1   2   3   4   5   6   7
///       1      1   0   3   2   5   4   7   6
///       2      2   3   0   1   6   7   4   5
///       ...                                            (unit u stored at u ^ r)
///       7      7   6   5   4   3   2   1   0
///       8      0   1   2   3   4   5   6   7           (repeats every 8 rows = 1024 bytes)
///
/// so the 8 rows an MMA reads at one column land in 8 different 16-byte bank groups.
///
/// Sources: NVIDIA PTX ISA 9.1 (section numbers of that release; they move between releases),
/// 9.7.15 "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
/// Instructions" (descriptors, fragment layouts, wgmma), 9.7.9.25.5.2 "cp.async.bulk.tensor", 9.7.13.15 "mbarrier"; CUDA Driver API
/// `cuTensorMapEncodeTiled`; FlashAttention-3 (Shah et al. 2024), section 3.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only: the entry point comes from the runtime)
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "flashsteps/attention.h"
#include "flashsteps/swizzle.h"
#include "flashsteps/vendor.h"

#if defined(__CUDACC__)
#include <cuda/ptx>
#endif

namespace flashsteps::sm90 {

/// Threads of one warpgroup.
inline constexpr int kWarpgroupThreads = 128;


// [start:descriptors]
/// The 64-bit shared-memory matrix descriptor of wgmma (PTX ISA 9.7.15.5.1.2.2):
///   bits  0-13  start address >> 4        bits 16-29  leading-dimension byte offset >> 4
///   bits 32-45  stride-dimension byte offset >> 4      bits 62-63  swizzle (1 = 128-byte)
/// (base offset, bits 49-51, is 0: every tile starts on a 1024-byte boundary).
__host__ __device__ constexpr std::uint64_t make_smem_desc(std::uint32_t smem_addr, std::uint32_t leading_bytes,
                                                           std::uint32_t stride_bytes) {
  return (static_cast<std::uint64_t>((smem_addr & 0x3FFFF) >> 4)) |
         (static_cast<std::uint64_t>((leading_bytes & 0x3FFFF) >> 4) << 16) |
         (static_cast<std::uint64_t>((stride_bytes & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

/// Descriptor of a K-major operand (the reduction dimension contiguous: Q and K, rows of
/// head_dim) in the swizzled layout: 8-row groups 1024 bytes apart (stride offset), the
/// leading offset unused with swizzling (1 by convention). @p smem_addr points at the
/// 16-element column slice the MMA reads: chunk base + row0 * 128 + (k % 64) * 2 bytes.
__host__ __device__ constexpr std::uint64_t desc_k_major(std::uint32_t smem_addr) {
  return make_smem_desc(smem_addr, 16, 1024);
}

/// Descriptor of an MN-major operand (the output dimension contiguous: V as the B operand of
/// P V, whose reduction dimension is the key index): 64-column chunks @p chunk_bytes apart
/// (leading offset), 8-key groups 1024 bytes apart (stride offset).
__host__ __device__ constexpr std::uint64_t desc_mn_major(std::uint32_t smem_addr, std::uint32_t chunk_bytes) {
  return make_smem_desc(smem_addr, chunk_bytes, 1024);
}

/// @p desc moved @p bytes further into shared memory: the start-address field (bits 0-13,
/// address >> 4) grows by bytes >> 4, everything else stays. Exact as long as the address
/// stays inside the 256 KiB shared window (the field cannot carry into bit 14), so a loop
/// over k-steps builds each descriptor with one 64-bit add of a constant instead of
/// re-encoding the address (@p bytes a multiple of 16).
__host__ __device__ constexpr std::uint64_t desc_advance(std::uint64_t desc, std::uint32_t bytes) {
  return desc + (bytes >> 4);
}
// [end:descriptors]

#if defined(__CUDACC__)

/// The shared-memory address (32-bit, .shared window) of a generic pointer.
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------------------------------
// wgmma: fence, commit, wait, and the register pinning that keeps it asynchronous.

// [start:wgmma_contract]
/// `wgmma.fence.sync.aligned`: orders earlier register writes of D / A before the next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
/// `wgmma.commit_group.sync.aligned`: the wgmmas issued since the last commit form one group.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/// `wgmma.wait_group.sync.aligned N`: waits until at most N committed groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Pins the registers of @p r at this point of the program: the compiler may neither read
/// them earlier nor write them later than here. Called on D before issuing and after waiting,
/// so no instruction the compiler schedules touches D while the tensor cores own it (without
/// it ptxas may serialize the wgmmas, and warns that it did).
template <int N>
__device__ __forceinline__ void fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
/// Pins a 64-bit value (a descriptor) to this point of the program: it is computed before
/// whatever follows, e.g. before a barrier, rather than wherever the compiler would sink it.
__device__ __forceinline__ void fence_value(std::uint64_t& v) { asm volatile("" : "+l"(v)::"memory"); }
/// As fence_registers() above, for 32-bit registers (the packed P fragments).
template <int N>
__device__ __forceinline__ void fence_registers(std::uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}
// [end:wgmma_contract]

/// @cond FLASHSTEPS_INTERNAL
// The accumulator operand lists of the wgmma wrappers: "{%0, ..., %K}" and the matching "+f"
// constraints (implementation detail of wgmma_ss / wgmma_rs, hidden from the API reference).
#define FLASHSTEPS_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                         "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define FLASHSTEPS_D32 FLASHSTEPS_D8(0), FLASHSTEPS_D8(8), FLASHSTEPS_D8(16), FLASHSTEPS_D8(24)
#define FLASHSTEPS_D64 FLASHSTEPS_D32, FLASHSTEPS_D8(32), FLASHSTEPS_D8(40), FLASHSTEPS_D8(48), FLASHSTEPS_D8(56)
#define FLASHSTEPS_D80 FLASHSTEPS_D64, FLASHSTEPS_D8(64), FLASHSTEPS_D8(72)
#define FLASHSTEPS_D88 FLASHSTEPS_D80, FLASHSTEPS_D8(80)
#define FLASHSTEPS_R32                                                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, " \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FLASHSTEPS_R64                                                                                  \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "    \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, " \
  "%41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, " \
  "%61, %62, %63}"
#define FLASHSTEPS_R80                                                                                    \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "      \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, "  \
  "%41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, "  \
  "%61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}"
#define FLASHSTEPS_R88                                                                                  \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "    \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, " \
  "%41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, " \
  "%61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, " \
  "%81, %82, %83, %84, %85, %86, %87}"

/// True when T is bf16 (wgmma type suffix .bf16), false for fp16 (.f16).
template <typename T>
inline constexpr bool kIsBf16 = std::is_same_v<T, vendor::bf16_t>;

// One wgmma instruction: SHAPE (e.g. "m64n128k16"), TY ("bf16" / "f16"), the accumulator
// registers REGS / OPS (OPS in parentheses, so that its commas pass through FLASHSTEPS_WGMMA_T),
// the A operand text A ("%64" for a descriptor, "{%64, %65, %66, %67}" for registers), the
// operand numbers of B's descriptor and of the accumulate flag, the trailing immediates
// (scale-a, scale-b[, trans-a], trans-b), then the input constraints.
// The accumulate flag becomes the predicate scale-d: D = A B + (scale-d ? D : 0).
#define FLASHSTEPS_EXPAND(...) __VA_ARGS__
#define FLASHSTEPS_WGMMA(SHAPE, TY, REGS, OPS, A, B, FLAG, IMM, ...)                                     \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #FLAG ", 0;\n"                                      \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY " " REGS ", " A ", %" #B ", p, " \
               IMM ";\n}\n"                                                                             \
               : FLASHSTEPS_EXPAND OPS                                                                  \
               : __VA_ARGS__)
// The same, with TY taken from the element type T of the enclosing template (bf16 or f16).
#define FLASHSTEPS_WGMMA_T(SHAPE, REGS, OPS, A, B, FLAG, IMM, ...)             \
  {                                                                          \
    if constexpr (kIsBf16<T>)                                                \
      FLASHSTEPS_WGMMA(SHAPE, "bf16", REGS, OPS, A, B, FLAG, IMM, __VA_ARGS__); \
    else                                                                     \
      FLASHSTEPS_WGMMA(SHAPE, "f16", REGS, OPS, A, B, FLAG, IMM, __VA_ARGS__);  \
  }
/// @endcond

/// D (64 x N, fp32) = A B + (accumulate ? D : 0), A (64 x 16) and B (16 x N) both in shared
/// memory, both K-major: `wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16` (or `.f16.f16`) with
/// imm-trans-a = imm-trans-b = 0 (PTX ISA 9.7.15.5.2). Thread t of the warpgroup holds
/// d[i] = D[16 (t / 32) + (t % 32) / 4 + 8 ((i / 2) % 2)][8 (i / 4) + 2 (t % 4) + i % 2].
template <int N, typename T>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b, bool accumulate) {
  static_assert(N == 64 || N == 128 || N == 160 || N == 176, "wgmma_ss is instantiated for N = 64, 128, 160 and 176");
  const int acc = accumulate ? 1 : 0;
  if constexpr (N == 64)
    FLASHSTEPS_WGMMA_T("m64n64k16", FLASHSTEPS_R32, (FLASHSTEPS_D32), "%32", 33, 34, "1, 1, 0, 0",
                       "l"(desc_a), "l"(desc_b), "r"(acc));
  if constexpr (N == 128)
    FLASHSTEPS_WGMMA_T("m64n128k16", FLASHSTEPS_R64, (FLASHSTEPS_D64), "%64", 65, 66, "1, 1, 0, 0",
                       "l"(desc_a), "l"(desc_b), "r"(acc));
  if constexpr (N == 160)  // step 09's wide key tiles (wgmma takes any N = 8 k up to 256)
    FLASHSTEPS_WGMMA_T("m64n160k16", FLASHSTEPS_R80, (FLASHSTEPS_D80), "%80", 81, 82, "1, 1, 0, 0",
                       "l"(desc_a), "l"(desc_b), "r"(acc));
  if constexpr (N == 176)
    FLASHSTEPS_WGMMA_T("m64n176k16", FLASHSTEPS_R88, (FLASHSTEPS_D88), "%88", 89, 90, "1, 1, 0, 0",
                       "l"(desc_a), "l"(desc_b), "r"(acc));
}

// [start:wgmma_rs]
/// D (64 x N, fp32) = A B + (accumulate ? D : 0) with A (64 x 16) in registers and B (16 x N)
/// in shared memory, MN-major (imm-trans-b = 1: B's N dimension is contiguous, as V's
/// head_dim is). A's fragment (PTX ISA 9.7.15.5.1.1.1): thread t holds rows
/// r = 16 (t / 32) + (t % 32) / 4 and r + 8, columns c = 2 (t % 4) and c + 8, two 16-bit
/// values per register:
///   a[0] = A[r][c, c+1]  a[1] = A[r+8][c, c+1]  a[2] = A[r][c+8, c+9]  a[3] = A[r+8][c+8, c+9]
/// which is, value for value, the accumulator layout of two adjacent 8-column blocks of S:
/// the scores a warpgroup computed become the A operand of P V without leaving its registers.
template <int N, typename T>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                         bool accumulate) {
  static_assert(N == 64 || N == 128, "wgmma_rs is instantiated for N = 64 and 128");
  const int acc = accumulate ? 1 : 0;
  if constexpr (N == 64)
    FLASHSTEPS_WGMMA_T("m64n64k16", FLASHSTEPS_R32, (FLASHSTEPS_D32), "{%32, %33, %34, %35}", 36, 37, "1, 1, 1",
                       "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(acc));
  if constexpr (N == 128)
    FLASHSTEPS_WGMMA_T("m64n128k16", FLASHSTEPS_R64, (FLASHSTEPS_D64), "{%64, %65, %66, %67}", 68, 69, "1, 1, 1",
                       "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(acc));
}
// [end:wgmma_rs]
#undef FLASHSTEPS_WGMMA
#undef FLASHSTEPS_WGMMA_T
#undef FLASHSTEPS_EXPAND

// [start:reduce_rows]
/// @cond FLASHSTEPS_INTERNAL
// One level of reduce_rows' tree over the first COUNT values of each row: element k takes in
// element k + HALF (HALF = COUNT / 2 rounded up, so an odd count keeps its middle value).
template <int COUNT, int M, class Op>
__device__ __forceinline__ void reduce_tree(float (&v)[2][M], Op op) {
  constexpr int HALF = (COUNT + 1) / 2;
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int k = 0; k < COUNT - HALF; ++k) v[r][k] = op(v[r][k], v[r][k + HALF]);
  if constexpr (HALF > 1) reduce_tree<HALF>(v, op);
}
/// @endcond
/// The two rows a thread holds of a 64 x N wgmma accumulator (rows r0 and r0 + 8, N / 4
/// values each, see wgmma_ss()), each reduced by @p op to one value as a balanced tree:
/// ceil(log2(N / 4)) dependent steps instead of a chain of N / 4 - 1. @p out[0] is row r0's, @p
/// out[1] row r0 + 8's; a row's other three threads (lanes 4g .. 4g + 3) hold the rest.
template <int N, class Op>
__device__ __forceinline__ void reduce_rows(const float (&d)[N / 2], float (&out)[2], Op op) {
  float v[2][N / 4];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) v[(i / 2) % 2][(i / 4) * 2 + i % 2] = d[i];
  reduce_tree<N / 4>(v, op);
  out[0] = v[0][0], out[1] = v[1][0];
}
// [end:reduce_rows]

// ---------------------------------------------------------------------------------------
// mbarriers and TMA (CCCL's cuda::ptx wrappers of PTX ISA 9.7.13.15 and 9.7.9.25).

/// Initialises the mbarrier at @p bar for @p arrivals arrivals per phase (one thread).
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned arrivals) {
  cuda::ptx::mbarrier_init(bar, arrivals);
}
/// Makes the initialisations visible to the other threads and to the async proxy (TMA).
__device__ __forceinline__ void mbarrier_init_fence() {
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}
/// One arrival that also announces @p bytes the TMA copies of this phase will deliver.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, bar,
                                       bytes);
}
/// One plain arrival (a consumer releasing a buffer).
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) { (void)cuda::ptx::mbarrier_arrive(bar); }

// [start:mbarrier_wait]
/// Waits until the phase of parity @p parity of @p bar has completed. Phases alternate 0, 1,
/// 0, ...: the n-th use (from 0) of a barrier waits for parity n % 2. With
/// FLASHSTEPS_MBARRIER_TIMEOUT defined (CMake option FLASHSTEPS_MBARRIER_TIMEOUT), a wait
/// that has not completed after ~2^31 cycles (about a second) prints which barrier and traps,
/// instead of hanging the GPU: a wrong phase or transaction count shows up as an error. The
/// printf is a function call, which makes ptxas serialize the kernel's wgmmas: a debug build.
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, std::uint32_t parity, const char* what) {
#ifdef FLASHSTEPS_MBARRIER_TIMEOUT
  const long long start = clock64();
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
    if (clock64() - start > (1ll << 31)) {
      printf("flashsteps: mbarrier wait on %s (parity %u) never completed: block %d thread %d\n", what, parity,
             blockIdx.x, threadIdx.x);
      __trap();
    }
  }
#else
  (void)what;
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
#endif
}
// [end:mbarrier_wait]

// [start:tma_load]
/// One TMA tile copy global -> shared (`cp.async.bulk.tensor.4d...mbarrier::complete_tx`):
/// the box of @p map at coordinates {c0, c1, c2, c3} (innermost first) lands at @p dst and its
/// bytes count against the transaction of @p bar. Elements outside the tensor arrive as 0.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            std::uint64_t* bar) {
  const std::int32_t coords[4] = {c0, c1, c2, c3};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_shared, cuda::ptx::space_global, dst, map, coords, bar);
}
// [end:tma_load]

// [start:tma_store]
/// One TMA tile copy shared -> global (`cp.async.bulk.tensor.4d.global.shared` from the CTA's shared memory, tile mode, bulk group;
/// PTX ISA 9.7.9.25.5.2): the box of @p map at coordinates {c0, c1, c2, c3} (innermost
/// first, in elements: column, row, head, batch) is written from @p src (1024-byte aligned,
/// the period of the 128-byte swizzle), in the same swizzled layout as tma_load_4d() reads; elements of the box outside the
/// tensor are not written, so a ragged last tile clips itself. It runs asynchronously, in bulk
/// groups: tma_store_commit() closes the group of the stores issued so far and
/// tma_store_wait_read() waits until every group has read its shared memory (which may then be
/// written again). The shared memory was written by ordinary stores (the generic proxy) and is
/// read by TMA (the async proxy): every writing thread calls fence_proxy_async_smem() and then
/// the writers meet at a barrier before one thread issues the store.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, const void* src, int c0, int c1, int c2, int c3) {
  const std::int32_t coords[4] = {c0, c1, c2, c3};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, map, coords, src);
}
/// `cp.async.bulk.commit_group`: the TMA stores issued since the last commit form one bulk group.
__device__ __forceinline__ void tma_store_commit() { cuda::ptx::cp_async_bulk_commit_group(); }
/// `cp.async.bulk.wait_group.read 0`: waits until every committed bulk group has read its source.
__device__ __forceinline__ void tma_store_wait_read() { cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{}); }
/// `fence.proxy.async.shared::cta`: this thread's earlier shared-memory writes become visible
/// to the async proxy (TMA) (PTX ISA 9.7.13.4.18, "membar/fence", proxy fences).
__device__ __forceinline__ void fence_proxy_async_smem() { cuda::ptx::fence_proxy_async(cuda::ptx::space_shared); }
/// `stmatrix.sync.aligned.m8n8.x4.shared.b16` (PTX ISA 9.7.14.5.16, sm_90): the warp writes
/// four 8 x 8 matrices of 16-bit elements to shared memory. Register @p x[m] of lane l holds
/// row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix m (the layout of an mma / wgmma
/// accumulator pair, packed by tile::pack2); lane l gives in @p addr the shared address
/// (16-byte aligned, state space shared::cta) of row l % 8 of matrix l / 8. CCCL's cuda::ptx
/// has no wrapper for it (CUDA 13.0), hence the inline PTX.
__device__ __forceinline__ void stmatrix_x4(std::uint32_t addr, const std::uint32_t (&x)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(x[0]), "r"(x[1]),
               "r"(x[2]), "r"(x[3])
               : "memory");
}
// [end:tma_store]

// ---------------------------------------------------------------------------------------
// Warp specialisation (step 08 on): register reallocation and named barriers.

// [start:warp_specialisation]
/// `setmaxnreg.dec.sync.aligned.u32 N` (PTX ISA, "setmaxnreg"): the executing warpgroup
/// gives its registers above @p N per thread back to the block's pool. Executed by all 128
/// threads of a warpgroup. A producer warpgroup, which only issues TMA copies, keeps a few.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
/// `setmaxnreg.inc.sync.aligned.u32 N`: the executing warpgroup takes registers from the pool
/// until it has @p N per thread; it blocks until the pool holds enough (the other warpgroups'
/// setmaxnreg_dec()). The kernel's register count at entry must be known to ptxas
/// (`__launch_bounds__` with a block size), or it ignores the instruction and says so.
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
/// `bar.sync id, threads` (PTX ISA, "bar, barrier"): waits until @p threads threads (a
/// multiple of 32, counting those that only arrive) have reached named barrier @p id (1-15;
/// 0 is __syncthreads()'s). Executed by whole warps.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/// `bar.arrive id, threads`: counts the calling warp towards named barrier @p id without
/// waiting for it: how one warpgroup tells another "your turn".
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// [end:warp_specialisation]

#endif  // __CUDACC__

// ---------------------------------------------------------------------------------------
// Host side.

/// The TMA tensor map of one of Q, K, V (read) or O (written, step 09): a 4-D tiled view
/// `{head_dim, seqlen, heads, batch}` (innermost first) with byte strides from @p t, copied in
/// boxes of 64 columns x @p box_rows rows x 1 x 1, 128-byte swizzled; out-of-range elements
/// arrive as zeros on loads and are not written on stores. Every coordinate stays within its
/// own dimension, which the caller keeps at most 2^31 - 1 (the steps check seqlen, batch and
/// heads), and the strides are 64-bit, so tensors of more than 2^31 elements need no special
/// care. Encoded through the runtime's driver entry
/// point (cudaGetDriverEntryPointByVersion), so nothing links libcuda directly.
/// @throws Unsupported naming the field TMA cannot express (a stride of 0 over a dimension of
/// more than one element, or of 2^40 bytes or more);
/// @throws DeviceError when the driver rejects the map.
CUtensorMap make_tensor_map(const TensorView& t, const char* name, int box_rows);

/// "sm_XY" of the current device; throws Unsupported naming it unless it is sm_90 (the
/// wgmma and TMA code of the Hopper steps is compiled for sm_90a, which runs on nothing else).
void require_sm90(const char* step_name);

}  // namespace flashsteps::sm90
