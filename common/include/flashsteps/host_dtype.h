// SPDX-License-Identifier: Apache-2.0
/// @file host_dtype.h
/// @brief Host-side conversions between float and the stored bits of fp16/bf16 elements.
///
/// fp16 uses Imath's half (the OpenEXR library; round to nearest even). bf16 is the top
/// 16 bits of a float32 with round-to-nearest-even on the dropped 16 bits (NaN kept quiet).
#pragma once

#include <cstdint>

#include "flashsteps/attention.h"

namespace flashsteps {

/// Bits of @p x rounded to @p dtype, zero-extended to 32 bits (fp32: the float's own bits).
std::uint32_t float_to_bits(float x, DType dtype);
/// The float value of @p bits stored as @p dtype (exact).
float bits_to_float(std::uint32_t bits, DType dtype);
/// @p x rounded to @p dtype and back: the value a device buffer of that dtype would hold.
inline float round_to(float x, DType dtype) { return bits_to_float(float_to_bits(x, dtype), dtype); }

/// Writes @p x as one element of @p dtype at @p dst (2 or 4 bytes).
void store_element(void* dst, float x, DType dtype);
/// Reads one element of @p dtype at @p src as float.
float load_element(const void* src, DType dtype);

}  // namespace flashsteps
