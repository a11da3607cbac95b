// SPDX-License-Identifier: Apache-2.0
// The launch plumbing of dispatch.h that is not a template: the message of a limit exceeded
// and the checks of the tensor-core steps.
#include "flashsteps/dispatch.h"

#include <cstdint>
#include <iterator>
#include <string>
#include <utility>

namespace flashsteps {

Unsupported exceeds_limit(const char* step_name, const std::string& quantity, std::int64_t value,
                          const std::string& limit, std::int64_t max) {
  return Unsupported(std::string(step_name) + ": " + quantity + " = " + std::to_string(value) + " exceeds " + limit +
                     " (" + std::to_string(max) + ")");
}

// The extra requirements of the 16-byte copies of steps 04 on.
void check_tensor_core_args(const AttentionArgs& a, const char* step_name) {
  const std::string step = step_name;
  if (a.q.dtype == DType::f32)
    throw Unsupported("q.dtype (fp32): " + step + " multiplies on tensor cores, which take fp16 or bf16");
  if (a.head_dim() % 8 != 0)
    throw Unsupported("q.shape[3] (head_dim = " + std::to_string(a.head_dim()) + "): " + step +
                      " needs a multiple of 8 (rows are copied 16 bytes at a time)");
  constexpr int kMaxHeadDim = kTensorCoreHeadDims[std::size(kTensorCoreHeadDims) - 1];
  if (a.head_dim() > kMaxHeadDim)
    throw exceeds_limit(step_name, "q.shape[3] (head_dim)", a.head_dim(), "the largest compiled head dim", kMaxHeadDim);
  const std::pair<const char*, const TensorView*> views[] = {{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"o", &a.o}};
  for (const auto& [name, t] : views) {
    if (t->empty()) continue;  // no keys: never read, so no alignment or stride rule
    if (reinterpret_cast<std::uintptr_t>(t->data) % 16 != 0)
      throw Unsupported(std::string(name) + ".data: " + step + " needs 16-byte aligned tensors");
    for (int d = 0; d < 3; ++d)
      if (t->stride[d] % 8 != 0)
        throw Unsupported(std::string(name) + ".stride[" + std::to_string(d) + "] (" + std::to_string(t->stride[d]) +
                          "): " + step + " needs strides that are multiples of 8 elements (16 bytes)");
  }
}

}  // namespace flashsteps
