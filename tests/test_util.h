// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the CPU and GPU test suites.
#pragma once

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>

#include "flashsteps/attention.h"
#include "flashsteps/problem.h"

namespace flashsteps::testing {

/// GoogleTest parameter names allow letters, digits and '_' only.
inline std::string test_name(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

/// A Problem of the given sizes, dtype, mask and layout (other fields at their defaults).
inline Problem make(std::int64_t B, std::int64_t Hq, std::int64_t Hkv, std::int64_t Nq, std::int64_t Nk,
                    std::int64_t D, DType dtype, Mask mask, Layout layout = Layout::bhsd) {
  Problem p;
  p.batch = B, p.heads_q = Hq, p.heads_kv = Hkv, p.seqlen_q = Nq, p.seqlen_k = Nk, p.head_dim = D;
  p.dtype = dtype, p.mask = mask, p.layout = layout;
  return p;
}

/// A full (unmasked) bf16 BHSD call of 1 x 2 heads x 16 rows of @p head_dim on made-up,
/// aligned addresses, for checks that refuse a call before any launch: the pointers are never
/// read.
inline AttentionArgs made_up_args(std::int64_t head_dim = 128) {
  AttentionArgs a;
  std::uintptr_t address = 0x1000000;
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) {
    t->data = reinterpret_cast<void*>(address += 0x1000000);
    t->dtype = DType::bf16;
    t->shape[0] = 1, t->shape[1] = 2, t->shape[2] = 16, t->shape[3] = head_dim;
    t->stride[0] = 2 * 16 * head_dim, t->stride[1] = 16 * head_dim, t->stride[2] = head_dim, t->stride[3] = 1;
  }
  return a;
}

/// made_up_args() shaped as a problem of tuning key @p key (a tuning::TuneKey): its dtype,
/// head dim and mask, and seqlen_bucket rows and keys (a bucket is a seqlen of its own bucket).
template <class TuneKey>
AttentionArgs made_up_args_of(const TuneKey& key) {
  AttentionArgs a = made_up_args(key.head_dim);
  const std::int64_t n = key.seqlen_bucket, d = key.head_dim;
  for (TensorView* t : {&a.q, &a.k, &a.v, &a.o}) {
    t->dtype = key.dtype;
    t->shape[2] = n, t->stride[2] = d, t->stride[1] = n * d, t->stride[0] = 2 * n * d;
  }
  a.mask = key.causal ? Mask::causal_bottom_right : Mask::none;
  return a;
}

// Sets an environment variable for one scope and restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace flashsteps::testing

namespace flashsteps {
/// GoogleTest prints a Problem parameter by its name.
inline void PrintTo(const Problem& p, std::ostream* os) { *os << p.name(); }
}  // namespace flashsteps
