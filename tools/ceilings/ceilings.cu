// SPDX-License-Identifier: Apache-2.0
// Measures two ceilings of the current GPU, for the roofline and for "percent of peak":
//   - the fp32 CUDA-core FMA rate: every thread runs 8 independent FMA chains (enough to
//     hide the 4-cycle FMA latency), on enough blocks to fill every SM several times;
//   - device-memory bandwidth: a large device-to-device copy, counting bytes read + written.
// Each is timed with GPU events: 3 warm-up runs, then the median of 20.
// Usage: ceilings [output.json]   (the JSON always goes to standard output too)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
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
  CLI::App app{"Measures the GPU's fp32 FMA rate and device-memory copy bandwidth (tools/ceilings/README.md)"};
  std::string out_path;
  app.add_option("output", out_path, "also write the JSON to this file");
  CLI11_PARSE(app, argc, argv);
  if (vendor::device_count() == 0) {
    std::printf("No GPU found: ceilings not measured.\n");
    return 0;
  }
  std::ofstream out;  // opened before the measurement, so that a bad path fails at once
  if (!out_path.empty()) {
    out.open(out_path);
    if (!out) {
      std::fprintf(stderr, "output: cannot open %s for writing\n", out_path.c_str());
      return 2;
    }
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
  const nlohmann::ordered_json json = {
      {"date", date},
      {"git_commit", FLASHSTEPS_GIT_COMMIT},
      {"driver_cuda_api", info.driver},
      {"gpu_name", info.name},
      {"gpu_arch", info.arch},
      {"sm_count", info.sm_count},
      {"max_clock_mhz", info.max_clock_mhz},
      {"fp32_fma_tflops", std::round(fma_tflops * 100) / 100},
      {"fp32_fma_method", std::to_string(blocks) + " blocks x " + std::to_string(kThreads) + " threads x " +
                              std::to_string(kChains) + " chains x " + std::to_string(kIters) +
                              " FMAs, median of 20 after 3 warm-ups"},
      {"copy_gbps", std::round(copy_gbps * 10) / 10},
      {"copy_method", "device-to-device copy of " + std::to_string(bytes) +
                          " bytes, read + written, median of 20 after 3 warm-ups"},
  };
  std::printf("%s\n", json.dump(2).c_str());
  if (out.is_open()) out << json.dump(2) << "\n";
  return 0;
}
