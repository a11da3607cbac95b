// SPDX-License-Identifier: Apache-2.0
/// @file random.h
/// @brief The random inputs' generator, written once for the host and the device: element c
/// of tensor t is a function of (seed, t, c) alone, so make_random_inputs() on the host and
/// DeviceCase's device-side draw (harness.h) produce the same bits, and any slice of a problem
/// (make_random_slice()) can be drawn without the rest.
///
/// Plain integer and IEEE arithmetic only (no transcendental functions, no FMA-contractible
/// expression whose rounding could differ), so the host compiler and nvcc or hipcc agree bit
/// for bit; tests/conformance_test.cu checks the device draw against the host's.
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
/// Callable from host and device code when compiled as CUDA or HIP; plain inline otherwise.
#define FLASHSTEPS_HOST_DEVICE __host__ __device__ inline
#else
/// Callable from host and device code when compiled as CUDA or HIP; plain inline otherwise.
#define FLASHSTEPS_HOST_DEVICE inline
#endif

namespace flashsteps::random {

/// splitmix64 (Steele, Lea, Flood 2014): a 64-bit mixing function, the step of a
/// counter-based generator when applied to (seed ^ hash(counter)).
FLASHSTEPS_HOST_DEVICE std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// An approximately standard normal draw for element @p e of stream @p stream: the sum of
/// four 16-bit uniforms from one 64-bit hash (Irwin-Hall), centred and scaled to variance 1
/// (tails end at +-3.46). No transcendental functions, so 100 M elements take milliseconds.
FLASHSTEPS_HOST_DEVICE float normal_at(std::uint64_t stream, std::uint64_t e) {
  const std::uint64_t r = splitmix64(stream ^ splitmix64(e));
  const double sum = static_cast<double>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
  const double centred = sum / 65536.0 - 2.0;  // exact: a power-of-two scale of an integer below 2^18
  return static_cast<float>(centred * 1.7320508075688772);  // Var(U) = 1/12, 4 of them
}

/// The stream of tensor @p tensor (0 = Q, 1 = K, 2 = V) of the inputs drawn from @p seed.
FLASHSTEPS_HOST_DEVICE std::uint64_t input_stream(std::uint64_t seed, int tensor) {
  return splitmix64(seed + static_cast<std::uint64_t>(tensor));
}

/// The value of element @p c (canonical `[B, H, N, D]` index) of tensor @p tensor drawn from
/// the stream @p stream (input_stream()), before rounding to the dtype: Q, K ~ N(0, 1) and
/// V ~ N(0.5, 1) (the offset keeps O away from zero, so relative errors mean something).
FLASHSTEPS_HOST_DEVICE float input_value(std::uint64_t stream, int tensor, std::uint64_t c) {
  return normal_at(stream, c) + (tensor == 2 ? 0.5f : 0.0f);
}

}  // namespace flashsteps::random
