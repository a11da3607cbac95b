// SPDX-License-Identifier: Apache-2.0
/// @file types.h
/// @brief The vocabulary every layer shares: the element types and the three errors.
///
/// A header of its own so that the vendor layer (vendor.h) and the attention contract
/// (attention.h) both build on it without one depending on the other.
#pragma once

#include <cstddef>
#include <stdexcept>

namespace flashsteps {

/// Element types for Q, K, V and O. Accumulation is always float32.
enum class DType {
  f32,   ///< IEEE binary32
  f16,   ///< IEEE binary16
  bf16,  ///< bfloat16 (8-bit exponent, 7-bit mantissa)
};

/// Size of one element of @p dtype in bytes (4 or 2).
std::size_t dtype_size(DType dtype);
/// Short lower-case name used in benchmark names and messages: "fp32", "fp16", "bf16".
const char* dtype_name(DType dtype);

/// Thrown for inputs that break the contract. The message names the offending field,
/// e.g. "k.shape[1] (heads_kv = 3) must divide q.shape[1] (heads_q = 8)".
class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Thrown for inputs the contract allows but one step does not implement (a head_dim or
/// dtype outside the step's compiled set). The message names the field and the step.
class Unsupported : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

/// Thrown when a GPU runtime call or kernel launch fails; the message carries the call,
/// the file and line, and the runtime's error string.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace flashsteps
