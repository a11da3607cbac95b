// SPDX-License-Identifier: Apache-2.0
/// @file step.h
/// @brief The one entry point every step implements.
///
/// Each step lives in its own namespace, `flashsteps::stepNN`, and defines the three
/// functions declared here. The build compiles a step's library, tests and benchmark with
/// `FLASHSTEPS_STEP_NS=stepNN`, so the harness (written once, in common/) calls
/// `flashsteps::step::attention_forward` and gets that step. Step 01 is always declared as
/// well: it is the baseline of the FlashAttention error rule (Dao et al. 2022, section 4).
#pragma once

#include <cstddef>

#include "flashsteps/attention.h"
#include "flashsteps/vendor.h"

#ifndef FLASHSTEPS_STEP_NS
#error "FLASHSTEPS_STEP_NS (e.g. step01) is set by add_step() in CMake"
#endif

namespace flashsteps {

/// What the harness prints about a step.
struct StepInfo {
  int index;            ///< 1, 2, 3, ...
  const char* slug;     ///< "naive", "tiled", ...
  const char* summary;  ///< one line: what this step adds
  /// Longest standard-set seqlen the benchmark times for this step (0: no cap). Only step 01
  /// caps it: its S/P round trip makes the longest problems take seconds per call.
  std::int64_t bench_max_seqlen = 0;
  /// Largest head_dim the step accepts (every head_dim from 1 to this). The conformance
  /// suite fails, rather than skips, a case within it that the step rejects as Unsupported.
  std::int64_t max_head_dim = 256;
  /// Whether fp32 inputs are accepted (the tensor-core steps take fp16 and bf16 only).
  bool accepts_fp32 = true;
  /// head_dim must be a multiple of this (8 for the tensor-core steps: 16-byte row copies).
  std::int64_t head_dim_multiple = 1;
  /// Data pointers must be aligned to, and batch/head/seq strides be multiples of, this many
  /// elements (8, i.e. 16 bytes, for the tensor-core steps).
  std::int64_t alignment_elems = 1;
};

/// True when @p info declares that the step implements a problem of this dtype and head_dim
/// (with aligned strides): the conformance suite fails a case it then rejects as Unsupported.
inline bool declares_support(const StepInfo& info, DType dtype, std::int64_t head_dim) {
  return head_dim <= info.max_head_dim && (dtype != DType::f32 || info.accepts_fp32) &&
         head_dim % info.head_dim_multiple == 0;
}

/// Declares a step's three entry points in namespace flashsteps::ns (written once, here).
#define FLASHSTEPS_DECLARE_STEP(ns)                                                       \
  namespace ns {                                                                          \
  /** Computes O (and LSE when args.lse != nullptr) on @p stream, asynchronously.      */ \
  /** Validates first (see validate()); returns without a launch when is_empty(args). */ \
  /** @throws InvalidArgument when @p args break the contract                         */ \
  /** @throws Unsupported when this step does not implement the case                  */ \
  /** @throws DeviceError when a runtime call or launch fails                         */ \
  void attention_forward(const AttentionArgs& args, vendor::Stream stream);               \
  /** Device scratch bytes attention_forward needs for @p args (0 for most steps). A   */ \
  /** call attention_forward refuses may get 0 here; the call throws its own error.    */ \
  /** @throws Unsupported past int64 byte counts (step 01: B Hq Nq Nk floats)          */ \
  std::size_t workspace_bytes(const AttentionArgs& args);                                 \
  /** Index, name and one-line summary of the step.                                    */ \
  StepInfo info();                                                                        \
  }

FLASHSTEPS_DECLARE_STEP(step01)
FLASHSTEPS_DECLARE_STEP(FLASHSTEPS_STEP_NS)

/// Helper of FLASHSTEPS_STRINGIFY (expands its argument first).
#define FLASHSTEPS_STRINGIFY_(x) #x
/// "stepNN" of the step this translation unit was built for.
#define FLASHSTEPS_STRINGIFY(x) FLASHSTEPS_STRINGIFY_(x)

/// The step this translation unit was built for.
namespace step = FLASHSTEPS_STEP_NS;

}  // namespace flashsteps
