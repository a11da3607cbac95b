// SPDX-License-Identifier: Apache-2.0
/// @file vendor.h
/// @brief The thin vendor layer: the only place that says "CUDA" or "HIP".
///
/// One header picks the runtime and gives a handful of neutral names: an error check,
/// streams and events, allocation and copies, the dynamic shared-memory limit, the warp
/// size, a shuffle, and the 16-bit element types with their float conversions. Kernels
/// otherwise use the built-ins both compilers accept as written (`__global__`,
/// `__shared__`, `threadIdx`, `__syncthreads()`, `expf`, ...). The tensor-core tile
/// (from step 04 on) is the one other per-vendor piece of device code.
#pragma once

#include <cstddef>
#include <string>

#if defined(__HIP__) || defined(__HIP_PLATFORM_AMD__) || defined(FLASHSTEPS_HIP)
/// Defined (to 1) when the sources are compiled for HIP (AMD).
#define FLASHSTEPS_VENDOR_HIP 1
#include <hip/hip_bfloat16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
/// Defined (to 1) when the sources are compiled for CUDA (NVIDIA).
#define FLASHSTEPS_VENDOR_CUDA 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

#include "flashsteps/types.h"  // DType (dispatch_dtype), DeviceError (check)

namespace flashsteps::vendor {

#if FLASHSTEPS_VENDOR_HIP
using Stream = hipStream_t;  ///< an ordered queue of device work
using Event = hipEvent_t;    ///< a timestamp recorded on a stream
using Error = hipError_t;    ///< a runtime status code
using half_t = __half;       ///< IEEE binary16 element
using bf16_t = hip_bfloat16; ///< bfloat16 element
inline constexpr Error kSuccess = hipSuccess;  ///< the status of a call that succeeded
inline constexpr const char* kName = "HIP";    ///< the runtime's name, for messages
#else
using Stream = cudaStream_t;   ///< an ordered queue of device work
using Event = cudaEvent_t;     ///< a timestamp recorded on a stream
using Error = cudaError_t;     ///< a runtime status code
using half_t = __half;         ///< IEEE binary16 element
using bf16_t = __nv_bfloat16;  ///< bfloat16 element
inline constexpr Error kSuccess = cudaSuccess;  ///< the status of a call that succeeded
inline constexpr const char* kName = "CUDA";    ///< the runtime's name, for messages
#endif

/// Threads per warp (NVIDIA) or wavefront (AMD Instinct): 32 or 64. Compile-time, for
/// device code. (HIP defines warpSize as a run-time value; gfx9 Instinct GPUs use 64.)
#if FLASHSTEPS_VENDOR_HIP
inline constexpr int kWarpSize = 64;
#else
inline constexpr int kWarpSize = 32;
#endif

/// Largest gridDim.x for blocks of @p threads_per_block threads: 2^31 - 1 on CUDA; on HIP
/// the grid's total thread count must stay below 2^32.
constexpr long long max_grid_blocks(int threads_per_block) {
#if FLASHSTEPS_VENDOR_HIP
  return ((1LL << 32) - 1) / threads_per_block;
#else
  return (void)threads_per_block, (1LL << 31) - 1;
#endif
}

/// The runtime's text for @p error.
const char* error_string(Error error);

/// Throws DeviceError("<what> failed at <file>:<line>: <runtime message>") unless ok.
void check(Error error, const char* what, const char* file, int line);

/// Checks the launch just issued (configuration errors) without synchronising.
void check_launch(const char* kernel, const char* file, int line);

/// Number of visible devices; 0 when there is no device or no driver (never throws).
int device_count();

/// The calling thread's current device (the runtime's device index).
/// @throws DeviceError when there is no device.
int current_device();

/// Makes @p device the calling thread's current device.
/// @throws DeviceError when it does not exist.
void set_device(int device);

/// Raises the dynamic shared-memory limit of @p kernel to @p bytes (above 48 KiB needs it).
void set_max_dynamic_smem(const void* kernel, std::size_t bytes);

/// The largest dynamic shared memory one block may opt in to, in bytes.
std::size_t max_dynamic_smem();

/// Number of multiprocessors (NVIDIA SMs / AMD CUs) of the current device.
int multiprocessor_count();

/// Whether launch_dependent() asks the current device for a programmatic dependent launch of
/// @p kernel: on NVIDIA devices of compute capability 9.0 and up, when the code the device runs
/// for @p kernel was compiled from compute_90 or later PTX (`cudaFuncGetAttributes`: ptxVersion
/// at least 90), so that its griddepcontrol instructions are there; never on AMD. (An H200
/// running an `80`-only build, or a GPU newer than Hopper running the compute_80 PTX of an
/// `80;90a` build, gets an ordinary launch: that code's wait_for_prior_grid() is empty and could
/// not wait for the kernel ahead.) False, and not remembered, when the device has no code for
/// @p kernel (the launch then fails as an ordinary one would). Asked once per device and kernel
/// and remembered. Source: CUDA C++ Programming Guide, "Programmatic Dependent Launch and
/// Synchronization"; CUDA Runtime API, `cudaFuncAttributes::ptxVersion`.
/// @throws DeviceError when the runtime cannot be queried (no device)
bool dependent_launch_supported(const void* kernel);

/// Name of the current device as the runtime reports it, e.g. "NVIDIA H200".
/// @throws DeviceError when there is no device.
std::string device_name();

// Allocation, copies and events: thin wrappers that throw DeviceError on failure. The first
// comment of the group is shared by all its members (DISTRIBUTE_GROUP_DOC).
///@{
/// Thin wrapper of the runtime call of the same meaning; throws DeviceError on failure.
void* malloc_device(std::size_t bytes);
void free_device(void* ptr) noexcept;
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void memset_device(void* dst, int value, std::size_t bytes);
/// Stream-ordered memset (runs after the work queued on @p stream before it).
void memset_device_async(void* dst, int value, std::size_t bytes, Stream stream);
void synchronize();
Event event_create();
void event_destroy(Event event) noexcept;
void event_record(Event event, Stream stream);
///@}
/// Milliseconds between two recorded events (waits for @p stop).
float event_elapsed_ms(Event start, Event stop);
/// Bytes of device memory free on the current device now (the runtime's MemGetInfo).
/// @throws DeviceError on failure
std::size_t free_device_bytes();

}  // namespace flashsteps::vendor

/// Wraps a runtime call: FLASHSTEPS_CHECK(cudaMemcpy(...)) throws DeviceError on failure.
#define FLASHSTEPS_CHECK(call) ::flashsteps::vendor::check((call), #call, __FILE__, __LINE__)
/// After every kernel launch: FLASHSTEPS_CHECK_LAUNCH("qk_kernel").
#define FLASHSTEPS_CHECK_LAUNCH(name) ::flashsteps::vendor::check_launch((name), __FILE__, __LINE__)

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
namespace flashsteps::vendor {

/// Butterfly shuffle within a warp: lane i receives @p value from lane i ^ @p lane_mask.
/// CUDA takes a participation mask, HIP does not; all lanes take part here.
template <typename T>
__device__ __forceinline__ T shfl_xor(T value, int lane_mask) {
#if FLASHSTEPS_VENDOR_HIP
  return __shfl_xor(value, lane_mask, kWarpSize);
#else
  return __shfl_xor_sync(0xffffffffu, value, lane_mask, kWarpSize);
#endif
}

// Programmatic dependent launch (NVIDIA, compute capability 9.0 and up): a kernel started by
// launch_dependent() may run while the kernel ahead of it finishes, so its launch and prologue
// hide behind that kernel's tail. Both device calls compile to nothing on AMD and for
// architectures before sm_90.

/// In the kernel ahead: permits the next kernel on the stream, if it was started with
/// launch_dependent(), to launch once every block of this grid has called this or exited (a
/// permission: it may still launch later). No effect when the next kernel was launched the
/// ordinary way. It says nothing about this kernel's writes; see wait_for_prior_grid().
/// Source: PTX ISA, "Parallel Synchronization and Communication Instructions: griddepcontrol"
/// (`griddepcontrol.launch_dependents`).
__device__ __forceinline__ void allow_dependent_launch() {
#if FLASHSTEPS_VENDOR_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/// In the dependent kernel: waits until every grid it depends on (the kernel ahead) has
/// completed and its writes are visible; returns at once in a kernel launched the ordinary way.
/// Call it before reading anything that kernel writes or writing anything it reads.
/// Source: PTX ISA, "Parallel Synchronization and Communication Instructions: griddepcontrol"
/// (`griddepcontrol.wait`).
__device__ __forceinline__ void wait_for_prior_grid() {
#if FLASHSTEPS_VENDOR_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/// kernel<<<grid, block, smem_bytes, stream>>>(args...) (a 1-D grid and block, @p smem_bytes
/// bytes of dynamic shared memory: above 48 KiB call set_max_dynamic_smem() first), allowed to
/// start before the kernel ahead of it on @p stream has completed when
/// dependent_launch_supported(kernel): as soon as every block of that kernel has called
/// allow_dependent_launch() or exited. The kernel must call wait_for_prior_grid() before it
/// reads anything the kernel ahead writes or writes anything it reads; a kernel that calls it
/// unconditionally also orders everything after it behind everything before it (waiting for
/// it waits for what it waited for). On AMD: an ordinary launch.
/// A refused launch is reported as for <<<...>>>: the runtime keeps its error, and the
/// caller's FLASHSTEPS_CHECK_LAUNCH after this call throws it (and clears it).
/// Source: CUDA C++ Programming Guide, "Programmatic Dependent Launch and Synchronization"
/// (`cudaLaunchKernelEx`, `cudaLaunchAttributeProgrammaticStreamSerialization`).
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), unsigned grid, unsigned block, std::size_t smem_bytes, Stream stream,
                      Args... args) {
#if FLASHSTEPS_VENDOR_HIP
  kernel<<<grid, block, smem_bytes, stream>>>(args...);
#else
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1] = {};
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed =
      dependent_launch_supported(reinterpret_cast<const void*>(kernel)) ? 1 : 0;
  config.attrs = attribute;
  config.numAttrs = 1;
  // Its status is also the runtime's last error, which FLASHSTEPS_CHECK_LAUNCH reads.
  static_cast<void>(cudaLaunchKernelEx(&config, kernel, args...));
#endif
}

///@{
/// Element to float32, exactly.
__host__ __device__ __forceinline__ float to_float(float x) { return x; }
__host__ __device__ __forceinline__ float to_float(half_t x) { return __half2float(x); }
__host__ __device__ __forceinline__ float to_float(bf16_t x) {
#if FLASHSTEPS_VENDOR_HIP
  return static_cast<float>(x);
#else
  return __bfloat162float(x);
#endif
}
///@}

///@{
/// float32 to element, rounding to nearest even.
template <typename T>
__host__ __device__ __forceinline__ T from_float(float x);
template <>
__host__ __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__host__ __device__ __forceinline__ half_t from_float<half_t>(float x) { return __float2half_rn(x); }
template <>
__host__ __device__ __forceinline__ bf16_t from_float<bf16_t>(float x) {
#if FLASHSTEPS_VENDOR_HIP
  return bf16_t(x);
#else
  return __float2bfloat16_rn(x);
#endif
}
///@}

}  // namespace flashsteps::vendor
#endif

namespace flashsteps::vendor {

/// A value that carries a type: what dispatch_dtype() passes to its callback.
template <typename T>
struct TypeTag {
  using type = T;  ///< the element type
};

/// Calls @p fn with TypeTag<float>, TypeTag<half_t> or TypeTag<bf16_t> for @p dtype, so a
/// launcher instantiates its kernel once per element type:
/// @code
/// dispatch_dtype(args.q.dtype, [&](auto tag) { using T = typename decltype(tag)::type; ... });
/// @endcode
template <typename Fn>
decltype(auto) dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f16: return fn(TypeTag<half_t>{});
    case DType::bf16: return fn(TypeTag<bf16_t>{});
    case DType::f32: break;
  }
  return fn(TypeTag<float>{});
}

}  // namespace flashsteps::vendor
