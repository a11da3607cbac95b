// SPDX-License-Identifier: Apache-2.0
/// @file harness.h
/// @brief Device side of the harness: guarded buffers, a problem resident on the device,
/// GPU-event timing and the device's description. Written once; every step's tests and
/// benchmark use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "flashsteps/attention.h"
#include "flashsteps/problem.h"
#include "flashsteps/vendor.h"

namespace flashsteps {

/// Bytes of guard on each side of a DeviceBuffer (also keeps data 256-byte aligned).
inline constexpr std::size_t kGuardBytes = 4096;

/// RAII device memory with guard regions before and after the data, filled with a known
/// byte pattern; guards_intact() reads them back, so an out-of-bounds write is caught.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// Allocates @p bytes of data plus the guards. @throws DeviceError on failure
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;             ///< takes over @p other's memory
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;  ///< frees ours, takes over @p other's
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return base_ == nullptr ? nullptr : base_ + kGuardBytes; }  ///< first data byte
  std::size_t size() const { return bytes_; }                                     ///< data bytes
  void upload(const std::vector<unsigned char>& host);  ///< host -> data (sizes must match)
  std::vector<unsigned char> download() const;          ///< data -> host
  /// True when both guard regions still hold the pattern written at allocation.
  bool guards_intact() const;

 private:
  unsigned char* base_ = nullptr;
  std::size_t bytes_ = 0;
};

/// What the benchmark records about the device, and the peak it reports percentages of.
struct DeviceInfo {
  std::string vendor;       ///< "nvidia" or "amd"
  std::string name;         ///< e.g. "NVIDIA H200"
  std::string arch;         ///< e.g. "sm_90", "gfx90a"
  int sm_count = 0;         ///< SMs (NVIDIA) or CUs (AMD)
  int max_clock_mhz = 0;    ///< peak SM clock from the runtime
  int mem_clock_mhz = 0;    ///< peak memory clock from the runtime
  std::size_t l2_bytes = 0; ///< L2 cache size
  std::string driver;       ///< driver version as the runtime reports it
  std::string runtime;      ///< "CUDA 13.0" / "HIP 5.2"
  /// Dense fp16/bf16 tensor-core clock peak at maximum boost, in TFLOP/s: SMs x max clock x
  /// per-SM rate from a per-architecture table (sm_80: 2048, sm_90: 4096 FLOP/clk/SM;
  /// gfx90a: 1024, gfx940: 2048 FLOP/clk/CU), 0 when the architecture is not in the table.
  /// Not the datasheet figure (an H200: 132 x 1980 MHz x 4096 = 1070, the datasheet's 989
  /// assumes a lower clock); an upper bound: real clocks under load are lower (see
  /// results/ for measured ceilings). The benchmark's pct_peak counter is relative to it.
  double peak_tc_tflops = 0.0;
};

/// Describes the current device. @throws DeviceError when there is none.
DeviceInfo device_info();

/// One problem resident on the device: inputs uploaded into guarded buffers, O (and LSE)
/// poisoned with NaN before each run, views and args built for the step.
class DeviceCase {
 public:
  /// Uploads @p inputs. @throws DeviceError on failure
  explicit DeviceCase(const HostInputs& inputs);
  /// Draws the inputs of @p problem on the device: the values of make_random_inputs(@p problem,
  /// @p seed), bit for bit (random.h's generator, rounded to nearest even), in the problem's
  /// layout, with no host copy. What the benchmark uses for problems whose K/V caches are
  /// too large to draw on the host in good time (the decode set); make_random_slice() gives
  /// the host the values of any (batch, KV head) of it, for the float64 check.
  /// @throws InvalidArgument for a problem make_layout() refuses, DeviceError on failure
  DeviceCase(const Problem& problem, std::uint64_t seed);
  /// Args for one forward call (views into this case's buffers, workspace included).
  const AttentionArgs& args() const { return args_; }
  /// Input buffer @p buffer (0..2, ProblemLayout::buffer_elems), e.g. to read the inputs back.
  const DeviceBuffer& input(int buffer) const { return inputs_[buffer]; }
  /// Makes sure the workspace holds at least @p bytes (steps report it via workspace_bytes).
  void reserve_workspace(std::size_t bytes);
  /// Fills O and LSE with NaN, so an element the step never writes stays NaN.
  void poison_outputs();

  /// What came back from one run.
  struct Output {
    std::vector<double> o;       ///< canonical `[B, Hq, Nq, D]`
    std::vector<double> lse;     ///< `[B, Hq, Nq]` (empty without LSE)
    std::int64_t unwritten = 0;  ///< O/LSE elements still NaN from the poison
    bool guards_intact = true;   ///< no write outside any buffer
  };
  /// Synchronises, copies O and LSE back and checks guards and poison (over every element).
  /// Converts query rows @p rows of every (batch, head) to float64, or all rows when empty;
  /// rows not converted hold NaN in Output::o.
  Output download(const std::vector<std::int64_t>& rows = {}) const;

 private:
  void allocate();  // the output buffers and the views, once inputs_ hold the inputs

  Problem problem_;
  ProblemLayout layout_;
  DeviceBuffer inputs_[3];
  DeviceBuffer o_, lse_, workspace_;
  AttentionArgs args_;
};

/// A step's two entry points, as the harness calls them.
struct StepFns {
  void (*attention_forward)(const AttentionArgs&, vendor::Stream);  ///< the step's attention_forward
  std::size_t (*workspace_bytes)(const AttentionArgs&);             ///< the step's workspace_bytes
};

/// One checked run: reserves the step's workspace, poisons the outputs, calls the step on
/// the default stream, and downloads @p rows (which synchronises and checks guards and poison).
/// @throws whatever the step throws (InvalidArgument, Unsupported, DeviceError).
DeviceCase::Output run_once(DeviceCase& device_case, const StepFns& step, const std::vector<std::int64_t>& rows = {});

/// Times device work with events: @p warmup untimed calls, then @p reps timed calls of
/// @p fn, each bracketed by its own pair of events; returns the milliseconds of each call.
template <typename Fn>
std::vector<float> time_with_events(Fn&& fn, int warmup, int reps, vendor::Stream stream = nullptr) {
  for (int i = 0; i < warmup; ++i) fn();
  vendor::Event start = vendor::event_create(), stop = vendor::event_create();
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    vendor::event_record(start, stream);
    fn();
    vendor::event_record(stop, stream);
    ms.push_back(vendor::event_elapsed_ms(start, stop));
  }
  vendor::event_destroy(start);
  vendor::event_destroy(stop);
  return ms;
}

}  // namespace flashsteps
