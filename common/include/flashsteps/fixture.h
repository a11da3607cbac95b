// SPDX-License-Identifier: Apache-2.0
/// @file fixture.h
/// @brief Reader of the real-activation fixture: Q, K, V of every layer and head of a small
/// sentence-embedding model (all-MiniLM-L6-v2) on a public-domain text. Provenance is in
/// tests/data/README.md and in the fixture's JSON header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashsteps/problem.h"

namespace flashsteps {

/// A fixture as stored: three fp16 tensors `[layers, heads, seqlen, head_dim]` (Q, K, V).
struct QkvFixture {
  std::string json_path;     ///< the header that was read
  std::string model;         ///< provenance: model name
  std::int64_t layers = 0;   ///< L (becomes the batch dimension of the problem)
  std::int64_t heads = 0;    ///< H
  std::int64_t seqlen = 0;   ///< N (queries and keys)
  std::int64_t head_dim = 0; ///< D
  float softmax_scale = 0.0f;  ///< the model's own scale, 1/sqrt(D)
  bool causal = false;         ///< whether the model attends causally
  std::vector<std::uint16_t> q;  ///< Q as fp16 bits, `[L, H, N, D]` contiguous
  std::vector<std::uint16_t> k;  ///< K as fp16 bits, `[L, H, N, D]` contiguous
  std::vector<std::uint16_t> v;  ///< V as fp16 bits, `[L, H, N, D]` contiguous
};

/// Reads the header at @p json_path (format "flashsteps-qkv-v1") and its binary beside it.
/// @throws InvalidArgument naming the field or the file that is wrong (missing file,
/// unknown format or dtype, a size that does not match the shape).
QkvFixture load_qkv_fixture(const std::string& json_path);

/// Where the MiniLM fixture is: $FLASHSTEPS_FIXTURE if set, else tests/data/minilm_qkv.json
/// in the source tree this was built from, else in the current folder or one above it.
/// @throws InvalidArgument when none exists.
std::string default_fixture_path();

/// The fixture as a problem: batch = layers, BHSD, fp16 as stored (or rounded to @p dtype),
/// the model's scale and mask, with LSE. Its float64 copies hold the exact fp16 values.
HostInputs fixture_inputs(const QkvFixture& fixture, DType dtype = DType::f16);

}  // namespace flashsteps
