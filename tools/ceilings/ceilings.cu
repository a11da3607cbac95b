// SPDX-License-Identifier: Apache-2.0
// Measures two ceilings of the current GPU, for the roofline and for "percent of peak":
//   - the fp32 CUDA-core FMA rate: every thread runs 8 independent FMA chains (enough to
//     hide the 4-cycle FMA latency), on enough blocks to fill every SM several times;
//   - device-memory bandwidth: a large device-to-device copy, counting bytes read + written.
// Each is timed with GPU events: 3 warm-up runs, then the median of 20.
// Usage: ceilings [output.json]
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <string>
#include <vector>

#include "flashsteps/commit.h"
#include "flashsteps/harness.h"

namespace {

constexpr int kChains = 8, kIters = 4096, kThreads = 256;

__global__ void fma_kernel(float* out, float a, float b) {
  float x[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) x[c] = threadIdx.x + c;
  for (int it = 0; it < kIters; ++it)
#pragma unroll
    for (int c = 0; c < kChains; ++c) x[c] = fmaf(x[c], a, b);  // a ~ 1 keeps values bounded
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) sum += x[c];
  if (sum == 12345.0f) out[0] = sum;  // never true in practice; keeps the work alive
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flashsteps;
  if (vendor::device_count() == 0) {
    std::printf("No GPU found: ceilings not measured.\n");
    return 0;
  }
  const DeviceInfo info = device_info();
  float* sink = static_cast<float*>(vendor::malloc_device(sizeof(float)));
  const int blocks = info.sm_count * 16;
  const std::vector<float> fma_ms = time_with_events(
      [&] {
        fma_kernel<<<blocks, kThreads>>>(sink, 0.9999f, 0.0001f);
        FLASHSTEPS_CHECK_LAUNCH("fma_kernel");
      },
      3, 20);
  const double fma_flops = 2.0 * kChains * kIters * double(kThreads) * blocks;
  const double fma_tflops = fma_flops / (median(fma_ms) / 1e3) / 1e12;

  const std::size_t bytes = std::size_t(4) << 30;  // 4 GiB each way: far beyond L2
  void* src = vendor::malloc_device(bytes);
  void* dst = vendor::malloc_device(bytes);
  vendor::memset_device(src, 1, bytes);
  const std::vector<float> copy_ms = time_with_events(
      [&] {
#if FLASHSTEPS_VENDOR_HIP
        FLASHSTEPS_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, nullptr));
#else
        FLASHSTEPS_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr));
#endif
      },
      3, 20);
  const double copy_gbps = 2.0 * double(bytes) / (median(copy_ms) / 1e3) / 1e9;
  vendor::free_device(src);
  vendor::free_device(dst);
  vendor::free_device(sink);

  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  char json[1024];
  std::snprintf(json, sizeof json,
                "{\n  \"date\": \"%s\",\n  \"git_commit\": \"%s\",\n  \"driver_cuda_api\": \"%s\",\n  \"gpu_name\": \"%s\",\n  \"gpu_arch\": \"%s\",\n  \"sm_count\": %d,\n  \"max_clock_mhz\": %d,\n"
                "  \"fp32_fma_tflops\": %.2f,\n  \"fp32_fma_method\": \"%d blocks x %d threads x %d chains x %d FMAs, median of 20 after 3 warm-ups\",\n"
                "  \"copy_gbps\": %.1f,\n  \"copy_method\": \"device-to-device copy of %zu bytes, read + written, median of 20 after 3 warm-ups\"\n}\n",
                date, FLASHSTEPS_GIT_COMMIT, info.driver.c_str(), info.name.c_str(), info.arch.c_str(), info.sm_count, info.max_clock_mhz, fma_tflops, blocks, kThreads,
                kChains, kIters, copy_gbps, bytes);
  std::fputs(json, stdout);
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    if (f == nullptr) return 1;
    std::fputs(json, f);
    std::fclose(f);
  }
  return 0;
}
