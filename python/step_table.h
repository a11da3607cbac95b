// SPDX-License-Identifier: Apache-2.0
// The steps this module was built with, as plain function pointers: the binding
// (module.cpp) includes this header and never the vendor runtime's, so it compiles as plain
// C++; step_table.cu, compiled as CUDA or HIP, fills it in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flashsteps/attention.h"

namespace flashsteps::python {

/// One built step: its StepInfo, copied field by field, and its two entry points.
struct StepEntry {
  int index;                         ///< StepInfo::index
  const char* slug;                  ///< StepInfo::slug
  const char* summary;               ///< StepInfo::summary
  std::int64_t bench_max_seqlen;     ///< StepInfo::bench_max_seqlen
  std::int64_t max_head_dim;         ///< StepInfo::max_head_dim
  bool accepts_fp32;                 ///< StepInfo::accepts_fp32
  std::int64_t head_dim_multiple;    ///< StepInfo::head_dim_multiple
  std::int64_t alignment_elems;      ///< StepInfo::alignment_elems
  /// flashsteps::stepNN::attention_forward, the stream passed as the runtime's handle.
  void (*attention_forward)(const AttentionArgs& args, void* stream);
  /// flashsteps::stepNN::workspace_bytes.
  std::size_t (*workspace_bytes)(const AttentionArgs& args);
};

/// Every step built into the module, in registry order.
const std::vector<StepEntry>& built_steps();

/// "CUDA" or "HIP": the runtime the steps were compiled for.
const char* backend_name();

/// The DLPack device type of that runtime's memory: 2 (kDLCUDA) or 10 (kDLROCM).
int dlpack_device_type();

/// Number of visible devices (0 without a device or driver; never throws).
int device_count();

/// Sets the calling thread's current device to @p device for its lifetime, then restores
/// the previous one (the steps launch on the current device).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace flashsteps::python
