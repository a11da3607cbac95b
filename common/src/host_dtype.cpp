// SPDX-License-Identifier: Apache-2.0
#include "flashsteps/host_dtype.h"

#include <cstring>

#define IMATH_HALF_NO_LOOKUP_TABLE  // header-only conversions; no libImath at run time
#include <Imath/half.h>

namespace flashsteps {

namespace {
std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float bits_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
}  // namespace

std::uint32_t float_to_bits(float x, DType dtype) {
  switch (dtype) {
    case DType::f32: return float_bits(x);
    case DType::f16: return imath_float_to_half(x);
    case DType::bf16: {
      const std::uint32_t u = float_bits(x);
      if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // NaN stays a quiet NaN
      const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);     // ties to even
      return (u + rounding) >> 16;
    }
  }
  return 0;
}

float bits_to_float(std::uint32_t bits, DType dtype) {
  switch (dtype) {
    case DType::f32: return bits_float(bits);
    case DType::f16: return imath_half_to_float(static_cast<imath_half_bits_t>(bits));
    case DType::bf16: return bits_float(bits << 16);
  }
  return 0.0f;
}

void store_element(void* dst, float x, DType dtype) {
  const std::uint32_t bits = float_to_bits(x, dtype);
  if (dtype == DType::f32) {
    std::memcpy(dst, &bits, 4);
  } else {
    const auto b16 = static_cast<std::uint16_t>(bits);
    std::memcpy(dst, &b16, 2);
  }
}

float load_element(const void* src, DType dtype) {
  if (dtype == DType::f32) {
    std::uint32_t bits;
    std::memcpy(&bits, src, 4);
    return bits_to_float(bits, dtype);
  }
  std::uint16_t b16;
  std::memcpy(&b16, src, 2);
  return bits_to_float(b16, dtype);
}

}  // namespace flashsteps
