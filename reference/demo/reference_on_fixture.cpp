// SPDX-License-Identifier: Apache-2.0
// Runs the float64 reference on the real-activation fixture (all-MiniLM-L6-v2, every layer and
// head) and prints, per layer, the mean LSE (log N would be all-zero scores) and the rms of O. This is what the
// main job shows on a machine without a GPU; with one, ./bench checks every step against it.
//   reference_on_fixture [path/to/minilm_qkv.json]
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

#include "flashsteps/fixture.h"
#include "flashsteps/reference.h"

int main(int argc, char** argv) {
  using namespace flashsteps;
  const std::string first = argc > 1 ? argv[1] : "";
  if (argc > 2 || first == "-h" || first == "--help") {
    std::fprintf(argc > 2 ? stderr : stdout,
                 "usage: reference_on_fixture [path/to/minilm_qkv.json]\n"
                 "Runs the float64 reference on the fixture (default: %s) and prints each layer's mean LSE and "
                 "rms(O).\n",
                 default_fixture_path().c_str());
    return argc > 2 ? 2 : 0;
  }
  try {
    reference::Runtime runtime;
    const QkvFixture fixture = load_qkv_fixture(argc > 1 ? argv[1] : default_fixture_path());
    const HostInputs in = fixture_inputs(fixture, DType::f16);
    const reference::Result r = reference::run(in);
    std::printf("float64 reference on %s: %lld layers x %lld heads, seqlen %lld, head_dim %lld\n",
                fixture.model.c_str(), static_cast<long long>(fixture.layers), static_cast<long long>(fixture.heads),
                static_cast<long long>(fixture.seqlen), static_cast<long long>(fixture.head_dim));
    std::printf("%5s  %10s  %10s  %12s\n", "layer", "mean LSE", "log(N)", "rms(O)");
    const std::int64_t rows = fixture.heads * fixture.seqlen, D = fixture.head_dim;
    for (std::int64_t layer = 0; layer < fixture.layers; ++layer) {
      double lse = 0.0, o2 = 0.0;
      for (std::int64_t r0 = 0; r0 < rows; ++r0) lse += r.lse[static_cast<std::size_t>(layer * rows + r0)];
      for (std::int64_t e = 0; e < rows * D; ++e) {
        const double x = r.o[static_cast<std::size_t>(layer * rows * D + e)];
        o2 += x * x;
      }
      std::printf("%5lld  %10.4f  %10.4f  %12.6f\n", static_cast<long long>(layer), lse / double(rows),
                  std::log(double(fixture.seqlen)), std::sqrt(o2 / double(rows * D)));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reference_on_fixture: %s\n", e.what());
    return 1;
  }
  return 0;
}
