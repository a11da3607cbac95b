// SPDX-License-Identifier: Apache-2.0
/// @file trace_sm90.h
/// @brief Timelines of one block of a Hopper step (08 on): each warpgroup's leader marks
/// where its phases begin (a TMA issue, a wait, the GEMM issue, the softmax, ...) with the
/// SM's cycle counter, for one chosen block. Compiled in only where FLASHSTEPS_TRACE is
/// defined; elsewhere every call is empty and the kernel's code is what it was without them.
///
/// FLASHSTEPS_TRACE is defined for one translation unit per step: `trace_stepNN`
/// (tools/timeline/trace_main.cu), built when CMake is configured with
/// `-DFLASHSTEPS_TRACE=ON` and registered by the step's step.cmake
/// (flashsteps_add_trace_tool()). It compiles the step's own step.cu with the trace calls
/// switched on, so the step's library, tests and benchmark stay uninstrumented in every build.
///
/// What is recorded. A step makes one Tracer per thread at kernel entry; in the traced block,
/// thread 0 of each warpgroup (the producer's thread 0 is its issuing thread) is the lane's
/// leader, and only leaders record. `trace(phase, tile)` is a mark: from this point on the
/// warpgroup is in @p phase, working on key/value tile @p tile, until its next mark (so one
/// store per phase change, not two); `trace.stop()` ends the lane's last phase. Warps other
/// than the leader's are not timed: a warpgroup's four warps pass the same barriers, and the
/// leader's warp stands for them.
///
/// The clock. Marks carry `%clock64`, the SM's cycle counter: cycle resolution (0.5 ns at
/// 1980 MHz), where `%globaltimer` ticks in steps of 32 ns or more on recent GPUs, longer than
/// a GEMM issue (about 100 cycles) or a satisfied mbarrier wait. Every warpgroup of a block
/// runs on one SM, so their counters agree; counters of different SMs do not, which is one
/// reason a trace covers a single block. The SM clock under load is not the maximum boost
/// clock, so each leader also reads `%globaltimer` (nanoseconds) when it starts and stops:
/// over a block of 100 us or more, cycles / nanoseconds gives the clock the SM ran at to
/// within a percent or two, and the tools convert cycles to microseconds with it.
///
/// Cost when compiled in: per mark, one compare, one read of the clock and one predicated
/// 16-byte store (no atomic: each lane has its own slots and its own count in a register);
/// threads outside the traced block or not leaders skip the store. Records past
/// kTraceCapacity are counted and dropped, never written out of bounds.
///
/// The buffer (TraceBuffer, a `__device__` variable of the traced translation unit, read
/// back with cudaMemcpyFromSymbol): a header (the traced block, grid, block size, dynamic
/// shared memory, tile configuration), one TraceLane per warpgroup (its mark count, start and
/// stop in cycles and nanoseconds, the SM), then kTraceCapacity TraceRecord slots per lane.
#pragma once

#include <cstddef>  // offsetof
#include <cstdint>

#include "flashsteps/tile_sm90.h"  // kWarpgroupThreads

namespace flashsteps::sm90 {

/// The phase a warpgroup enters at a mark: what it does until its next mark.
enum class TracePhase : std::uint16_t {
  none = 0,      ///< not a phase: the phase field of an end record (Tracer::stop())
  setup,         ///< kernel entry to the first mark (implicit: the lane's start): barrier setup, setmaxnreg
  // The producer (warpgroup 0, its issuing thread).
  q_load,        ///< issues Q's TMA copies (arrive.expect_tx, one copy per 64-column chunk)
  k_empty_wait,  ///< waits until the consumers have released the K buffer tile j goes to (k_empty)
  k_load,        ///< issues tile j's K copies
  v_empty_wait,  ///< waits until the V buffer of tile j is released (v_empty)
  v_load,        ///< issues tile j's V copies
  // The consumers (warpgroups 1, 2, ...).
  q_wait,        ///< waits for Q (q_full)
  k_wait,        ///< waits for tile j's K (k_full)
  v_wait,        ///< waits for tile j's V (v_full), before the batch that holds its P V
  turn,          ///< waits for its turn on the tensor cores (named barrier: ping-pong)
  issue,         ///< issues its GEMM batch (S = Q K^T of tile j, O += P V of the one before) and passes the turn on
  s_wait,        ///< waits for S of tile j (wgmma.wait_group 1)
  softmax,       ///< masks, row max, exponentials, row sum of tile j
  pv_wait,       ///< waits for the P V it issued with tile j's S (wgmma.wait_group 0)
  rescale,       ///< releases V, rescales O, packs P of tile j as the next batch's A operand
  epilogue,      ///< divides O by l, writes LSE and O (where a step marks no finer phase of it)
  // The epilogue in finer phases (step 09 marks them after `epilogue`, which then covers the
  // row sums, 1 / l and the LSE only).
  o_buffer_wait,  ///< waits until the previous tile's TMA store has read the O buffer, and for its warpgroup
  o_write,        ///< writes O / l into the O buffer (shared memory, swizzled as TMA reads it)
  o_fence,        ///< proxy fence (the writes, then TMA's reads) and its warpgroup's barrier
  o_store,        ///< issues O's TMA stores
  next_tile,      ///< from the end of the epilogue to the next work tile's first mark (step 09
                  ///< before d878171: the next tile's indices and accumulators; since: the loop's back edge)
  count_          ///< number of values (not a phase)
};

/// The name of @p phase as the JSON of the trace tools writes it ("k_load", "softmax", ...).
__host__ __device__ constexpr const char* trace_phase_name(TracePhase phase) {
  constexpr const char* kNames[] = {"none",   "setup",  "q_load", "k_empty_wait", "k_load",  "v_empty_wait",
                                    "v_load", "q_wait", "k_wait", "v_wait",       "turn",    "issue",
                                    "s_wait", "softmax", "pv_wait", "rescale",    "epilogue",
                                    "o_buffer_wait", "o_write", "o_fence", "o_store", "next_tile"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<int>(TracePhase::count_), "a name per phase");
  return static_cast<int>(phase) < static_cast<int>(TracePhase::count_) ? kNames[static_cast<int>(phase)] : "?";
}

/// TraceRecord::edge of a mark: a phase begins (and the previous one of its lane ends).
inline constexpr std::uint16_t kTraceBegin = 0;
/// TraceRecord::edge of Tracer::stop(): the lane's open phase ends and no other begins.
inline constexpr std::uint16_t kTraceEnd = 1;
/// Lanes a trace holds: warpgroups 0 .. 3 of the block (the producer and up to three consumers).
inline constexpr int kTraceLanes = 4;
/// Record slots per lane. Step 08 makes 8 marks per key/value tile in a consumer and 4 in the
/// producer: N = 16384 keys in 128-key tiles take about 1,050 in a consumer.
inline constexpr std::uint32_t kTraceCapacity = 16384;
/// TraceBuffer's requested block (set by the host): the middle block of the grid, gridDim.x / 2.
inline constexpr std::int32_t kTraceMiddleBlock = -1;
/// TraceBuffer's requested block (set by the host): no block records (the default).
inline constexpr std::int32_t kTraceNoBlock = -2;

/// One mark, 16 bytes, stored with one vector store.
struct alignas(16) TraceRecord {
  std::uint64_t cycles;  ///< `%clock64` of the SM when the mark was made (cycles)
  std::uint16_t phase;   ///< the TracePhase that begins here (TracePhase::none in an end record)
  std::uint16_t edge;    ///< kTraceBegin or kTraceEnd
  std::int32_t tile;     ///< the key/value tile index j the phase works on (0 for Q's phases, -1 for none)
};
static_assert(sizeof(TraceRecord) == 16 && offsetof(TraceRecord, phase) == 8 && offsetof(TraceRecord, edge) == 10 &&
                  offsetof(TraceRecord, tile) == 12,
              "a record is one 16-byte store: the cycles, then phase | edge << 16 | tile << 32 (little-endian)");

/// What one lane's leader writes besides its records (all zero for a lane that did not record).
struct TraceLane {
  std::uint32_t count;         ///< marks made, end record included: min(count, kTraceCapacity) are in the
                               ///< records, count - kTraceCapacity were dropped when it is larger
  std::uint32_t smid;          ///< `%smid`: the SM the block ran on
  std::uint64_t start_cycles;  ///< `%clock64` when the leader made its Tracer (kernel entry)
  std::uint64_t start_ns;      ///< `%globaltimer` (ns) at the same point
  std::uint64_t stop_cycles;   ///< `%clock64` at Tracer::stop() (0: the lane never stopped)
  std::uint64_t stop_ns;       ///< `%globaltimer` (ns) at Tracer::stop()
};

/// The whole trace of one launch, as the traced translation unit's `__device__` variable holds
/// it. The header fields are written by thread 0 of the traced block.
struct TraceBuffer {
  std::int32_t block;         ///< blockIdx.x of the traced block (the tool sets -1 before a launch)
  std::uint32_t grid;         ///< gridDim.x
  std::uint32_t threads;      ///< blockDim.x (kWarpgroupThreads per warpgroup)
  std::uint32_t smem_bytes;   ///< dynamic shared memory of the launch (`%dynamic_smem_size`)
  std::uint32_t block_m;      ///< query rows per block (as the kernel passed them to Tracer)
  std::uint32_t block_n;      ///< keys per key/value tile
  std::uint32_t stages;       ///< K/V buffers of the ring
  std::uint32_t reserved;     ///< 0 (keeps the lanes 8-byte aligned)
  TraceLane lanes[kTraceLanes];                        ///< one per warpgroup, by warpgroup index
  TraceRecord records[kTraceLanes][kTraceCapacity];    ///< each lane's marks, in the order made
};

#if defined(__CUDACC__)

#if defined(FLASHSTEPS_TRACE)
/// @cond FLASHSTEPS_INTERNAL
namespace {  // one trace per translation unit: the traced step's own
// The block to trace (kTraceMiddleBlock, kTraceNoBlock or an index), set by the host.
__device__ std::int32_t g_trace_request = kTraceNoBlock;
// Where it goes. Zero at load; the host clears the lanes before a traced launch.
__device__ TraceBuffer g_trace;
}  // namespace
/// @endcond
#endif

/// The trace calls of a kernel (see the file comment): made once per thread at kernel entry,
/// then `trace(phase, tile)` at each phase change and `trace.stop()` where a warpgroup's work
/// ends. Without FLASHSTEPS_TRACE it holds nothing and every member is empty.
class Tracer {
 public:
  /// Starts the lane of a leader of the traced block (its start time, and for thread 0 the
  /// launch's header: @p block_m, @p block_n and @p stages describe the kernel's tiles).
  __device__ __forceinline__ Tracer(int block_m, int block_n, int stages) {
#if defined(FLASHSTEPS_TRACE)
    const std::int32_t request = g_trace_request;
    const std::int64_t traced = request == kTraceMiddleBlock ? static_cast<std::int64_t>(gridDim.x / 2) : request;
    const unsigned wg = threadIdx.x / kWarpgroupThreads;
    n_ = kIdle;
    records_ = g_trace.records[0];
    if (static_cast<std::int64_t>(blockIdx.x) != traced || threadIdx.x % kWarpgroupThreads != 0 || wg >= kTraceLanes)
      return;
    n_ = 0;
    records_ = g_trace.records[wg];
    TraceLane& lane = g_trace.lanes[wg];
    lane.start_cycles = clock();
    lane.start_ns = globaltimer();
    asm volatile("mov.u32 %0, %%smid;" : "=r"(lane.smid));
    if (wg == 0) {
      g_trace.block = static_cast<std::int32_t>(blockIdx.x);
      g_trace.grid = gridDim.x;
      g_trace.threads = blockDim.x;
      asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(g_trace.smem_bytes));
      g_trace.block_m = static_cast<std::uint32_t>(block_m);
      g_trace.block_n = static_cast<std::uint32_t>(block_n);
      g_trace.stages = static_cast<std::uint32_t>(stages);
    }
#else
    (void)block_m, (void)block_n, (void)stages;
#endif
  }

  /// A mark: this warpgroup now enters @p phase on key/value tile @p tile (its previous phase
  /// ends here). One predicated 16-byte store in a leader of the traced block.
  __device__ __forceinline__ void operator()(TracePhase phase, std::int64_t tile) {
#if defined(FLASHSTEPS_TRACE)
    record(static_cast<std::uint16_t>(phase), kTraceBegin, tile);
#else
    (void)phase, (void)tile;
#endif
  }

  /// Ends the lane: its open phase ends here (an end record), and the lane's count and stop
  /// time are written. Called once, where the warpgroup's work ends.
  __device__ __forceinline__ void stop() {
#if defined(FLASHSTEPS_TRACE)
    if (n_ >= kIdle) return;
    record(static_cast<std::uint16_t>(TracePhase::none), kTraceEnd, -1);
    TraceLane& lane = g_trace.lanes[threadIdx.x / kWarpgroupThreads];
    lane.stop_cycles = clock();
    lane.stop_ns = globaltimer();
    lane.count = n_;
#endif
  }

#if defined(FLASHSTEPS_TRACE)
 private:
  // n_ of threads that do not record: far above any capacity, so their compare always fails.
  static constexpr std::uint32_t kIdle = 0x80000000u;
  static __device__ __forceinline__ std::uint64_t clock() {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
    return t;
  }
  static __device__ __forceinline__ std::uint64_t globaltimer() {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  // [start:trace_mark]
  // The record as two 64-bit words: the cycles, then phase | edge << 16 | tile << 32.
  __device__ __forceinline__ void record(std::uint16_t phase, std::uint16_t edge, std::int64_t tile) {
    const std::uint64_t t = clock();
    if (n_ < kTraceCapacity) {
      const std::uint64_t word = phase | (static_cast<std::uint64_t>(edge) << 16) |
                                 (static_cast<std::uint64_t>(static_cast<std::uint32_t>(tile)) << 32);
      *reinterpret_cast<ulonglong2*>(records_ + n_) = make_ulonglong2(t, word);
    }
    ++n_;
  }
  // [end:trace_mark]
  TraceRecord* records_;  // this lane's slots
  std::uint32_t n_;       // marks made (kIdle and up: this thread does not record)
#endif
};

#endif  // __CUDACC__

}  // namespace flashsteps::sm90
