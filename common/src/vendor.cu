// SPDX-License-Identifier: Apache-2.0
// The vendor layer's host functions: each is one runtime call, spelled for CUDA or HIP.
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "flashsteps/vendor.h"

#if FLASHSTEPS_VENDOR_HIP
#define FS_RT(name) hip##name
#else
#define FS_RT(name) cuda##name
#endif

namespace flashsteps::vendor {

const char* error_string(Error error) { return FS_RT(GetErrorString)(error); }

void check(Error error, const char* what, const char* file, int line) {
  if (error == kSuccess) return;
  throw DeviceError(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    error_string(error));
}

void check_launch(const char* kernel, const char* file, int line) {
  const Error error = FS_RT(GetLastError)();
  if (error == kSuccess) return;
  throw DeviceError(std::string("launch of ") + kernel + " failed at " + file + ":" +
                    std::to_string(line) + ": " + error_string(error));
}

int device_count() {
  int count = 0;
  if (FS_RT(GetDeviceCount)(&count) != kSuccess) {
    (void)FS_RT(GetLastError)();  // clear the sticky "no device" status
    return 0;
  }
  return count;
}

int current_device() {
  int device = 0;
  FLASHSTEPS_CHECK(FS_RT(GetDevice)(&device));
  return device;
}

void set_device(int device) { FLASHSTEPS_CHECK(FS_RT(SetDevice)(device)); }

void set_max_dynamic_smem(const void* kernel, std::size_t bytes) {
#if FLASHSTEPS_VENDOR_HIP
  FLASHSTEPS_CHECK(hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
#else
  FLASHSTEPS_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
#endif
}

std::size_t max_dynamic_smem() {
  int device = 0, bytes = 0;
  FLASHSTEPS_CHECK(FS_RT(GetDevice)(&device));
#if FLASHSTEPS_VENDOR_HIP
  FLASHSTEPS_CHECK(hipDeviceGetAttribute(&bytes, hipDeviceAttributeMaxSharedMemoryPerBlock, device));
#else
  FLASHSTEPS_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
#endif
  return static_cast<std::size_t>(bytes);
}

bool dependent_launch_supported(const void* kernel) {
#if FLASHSTEPS_VENDOR_HIP
  static_cast<void>(kernel);
  return false;
#else
  // Asked on every launch_dependent(): the answer per (device, kernel) is kept.
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, bool> known;
  int device = 0;
  FLASHSTEPS_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = known.find({device, kernel});
  if (found != known.end()) return found->second;
  int major = 0;
  FLASHSTEPS_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  // The code the device runs for the kernel must have been compiled for sm_90 or later: code
  // compiled from compute_80 PTX (a newer GPU running an 80;90a build) has no griddepcontrol
  // instructions, so it would not wait for the kernel ahead.
  // (ptxVersion >= 90 implies the other two; they are checked all the same.)
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) {
    // No code for this device: the launch will be refused, and the caller's
    // FLASHSTEPS_CHECK_LAUNCH reports it with the kernel's name. Not remembered.
    static_cast<void>(cudaGetLastError());
    return false;
  }
  const bool supported = major >= 9 && attributes.ptxVersion >= 90 && attributes.binaryVersion >= 90;
  known.emplace(std::make_pair(device, kernel), supported);
  return supported;
#endif
}

int multiprocessor_count() {
  int device = 0, count = 0;
  FLASHSTEPS_CHECK(FS_RT(GetDevice)(&device));
#if FLASHSTEPS_VENDOR_HIP
  FLASHSTEPS_CHECK(hipDeviceGetAttribute(&count, hipDeviceAttributeMultiprocessorCount, device));
#else
  FLASHSTEPS_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
#endif
  return count;
}

std::string device_name() {
  int device = 0;
  FLASHSTEPS_CHECK(FS_RT(GetDevice)(&device));
#if FLASHSTEPS_VENDOR_HIP
  hipDeviceProp_t prop;
  FLASHSTEPS_CHECK(hipGetDeviceProperties(&prop, device));
#else
  cudaDeviceProp prop;
  FLASHSTEPS_CHECK(cudaGetDeviceProperties(&prop, device));
#endif
  return prop.name;
}

void* malloc_device(std::size_t bytes) {
  void* ptr = nullptr;
  if (bytes > 0) FLASHSTEPS_CHECK(FS_RT(Malloc)(&ptr, bytes));
  return ptr;
}

void free_device(void* ptr) noexcept {
  if (ptr != nullptr) (void)FS_RT(Free)(ptr);
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) FLASHSTEPS_CHECK(FS_RT(Memcpy)(dst, src, bytes, FS_RT(MemcpyHostToDevice)));
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) FLASHSTEPS_CHECK(FS_RT(Memcpy)(dst, src, bytes, FS_RT(MemcpyDeviceToHost)));
}

void memset_device(void* dst, int value, std::size_t bytes) {
  if (bytes > 0) FLASHSTEPS_CHECK(FS_RT(Memset)(dst, value, bytes));
}

void memset_device_async(void* dst, int value, std::size_t bytes, Stream stream) {
  if (bytes > 0) FLASHSTEPS_CHECK(FS_RT(MemsetAsync)(dst, value, bytes, stream));
}

void synchronize() { FLASHSTEPS_CHECK(FS_RT(DeviceSynchronize)()); }

Event event_create() {
  Event event;
  FLASHSTEPS_CHECK(FS_RT(EventCreate)(&event));
  return event;
}

void event_destroy(Event event) noexcept { (void)FS_RT(EventDestroy)(event); }

void event_record(Event event, Stream stream) { FLASHSTEPS_CHECK(FS_RT(EventRecord)(event, stream)); }

float event_elapsed_ms(Event start, Event stop) {
  FLASHSTEPS_CHECK(FS_RT(EventSynchronize)(stop));
  float ms = 0.0f;
  FLASHSTEPS_CHECK(FS_RT(EventElapsedTime)(&ms, start, stop));
  return ms;
}

std::size_t free_device_bytes() {
  std::size_t free = 0, total = 0;
  FLASHSTEPS_CHECK(FS_RT(MemGetInfo)(&free, &total));
  return free;
}

}  // namespace flashsteps::vendor
