// SPDX-License-Identifier: Apache-2.0
// FlashSteps step 01 of the series — naive three-pass attention.   previous: none · next: 02_tiled
//
// What it does: the textbook definition, one kernel per line of the math.
//   1. s_kernel:       S = scale * Q K^T, masked entries = -inf, written to global memory in fp32
//   2. softmax_kernel: three passes over each row of S (row max m_i, l_i = sum exp(S - m_i),
//                      normalise), P written over S in place; LSE_i = m_i + log(l_i)
//   3. pv_kernel:      O = P V, rounded to the output dtype
// One thread per output element (per row for the softmax), 64-bit indices, grid-stride loops.
//
// Why it is slow: S and P make a round trip through global memory. Per head it writes S
// (4 Nq Nk bytes), reads and writes it in the softmax (three reads, one write) and reads P
// once more: about 24 Nq Nk bytes against 4 Nq Nk D FLOPs, i.e. D / 6 FLOP per byte, and
// O(N^2) memory (at N = 16384 the S matrix of 16 heads is 17 GB). The loads are not tiled:
// each thread of s_kernel reads a whole row of Q and of K from L2/DRAM for one dot product.
// Measured on an NVIDIA H200 (bf16, D = 128, N = 4096, B = 4, H = 16, non-causal): 0.85 TFLOP/s,
// about 1.5% of the fp32 FMA ceiling (results/nvidia-h200/step01.json; book/steps/01_naive.md).
//
// Limits: head_dim <= 256 (the only cap; any D in 1..256 works), every dtype, mask and
// stride of the contract. Needs workspace_bytes(args) of device scratch for S/P.
// Chapter: book/steps/01_naive.md
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "flashsteps/step.h"

namespace flashsteps::step01 {

namespace {

constexpr int kThreadsPerBlock = 256;
constexpr std::int64_t kMaxBlocks = 1 << 20;  // grid-stride loops cover the rest
constexpr std::int64_t kMaxHeadDim = 256;

// [start:params]
// Pointers and sizes of one call, in the form the kernels read them.
// Strides are in elements; the head_dim stride is 1 by contract.
template <typename T>
struct Params {
  const T* q;  // [B, Hq, Nq, D] strided
  const T* k;  // [B, Hkv, Nk, D] strided
  const T* v;  // [B, Hkv, Nk, D] strided
  T* o;        // [B, Hq, Nq, D] strided
  float* lse;  // [B, Hq, Nq] contiguous, or nullptr
  float* s;    // [B, Hq, Nq, Nk] contiguous fp32 workspace: S, then P in place
  std::int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];  // batch, head, seq
  std::int64_t B, Hq, Hkv, Nq, Nk, D;
  float scale;
  Mask mask;
};
// [end:params]

// [start:s_kernel]
// One thread per (b, h, i, j): S_ij = scale * sum_d Q_id K_jd, or -inf when key j is masked.
template <typename T>
__global__ void s_kernel(Params<T> p) {
  const std::int64_t total = p.B * p.Hq * p.Nq * p.Nk;
  const std::int64_t group = p.Hq / p.Hkv;  // GQA: query heads per KV head
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t j = idx % p.Nk;
    const std::int64_t i = idx / p.Nk % p.Nq;
    const std::int64_t h = idx / (p.Nk * p.Nq) % p.Hq;
    const std::int64_t b = idx / (p.Nk * p.Nq * p.Hq);
    float s = -INFINITY;
    if (j <= last_visible_key(p.mask, i, p.Nq, p.Nk)) {
      const T* q_row = p.q + b * p.q_stride[0] + h * p.q_stride[1] + i * p.q_stride[2];
      const T* k_row = p.k + b * p.k_stride[0] + (h / group) * p.k_stride[1] + j * p.k_stride[2];
      float acc = 0.0f;
      for (std::int64_t d = 0; d < p.D; ++d) acc += vendor::to_float(q_row[d]) * vendor::to_float(k_row[d]);
      s = p.scale * acc;
    }
    p.s[idx] = s;
  }
}
// [end:s_kernel]

// [start:softmax_kernel]
// One thread per row (b, h, i): the three passes of the softmax over S_i, written as P_i.
// A row with no visible key has m_i = -inf: it gets P_i = 0 and LSE_i = -inf.
template <typename T>
__global__ void softmax_kernel(Params<T> p) {
  const std::int64_t rows = p.B * p.Hq * p.Nq;
  for (std::int64_t row = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; row < rows;
       row += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float* s = p.s + row * p.Nk;
    float m = -INFINITY;  // pass 1: m_i = max_j S_ij
    for (std::int64_t j = 0; j < p.Nk; ++j) m = fmaxf(m, s[j]);
    float l = 0.0f;  // pass 2: l_i = sum_j exp(S_ij - m_i)
    if (m != -INFINITY)
      for (std::int64_t j = 0; j < p.Nk; ++j) l += expf(s[j] - m);
    for (std::int64_t j = 0; j < p.Nk; ++j)  // pass 3: P_ij = exp(S_ij - m_i) / l_i
      s[j] = m == -INFINITY ? 0.0f : expf(s[j] - m) / l;
    if (p.lse != nullptr) p.lse[row] = m == -INFINITY ? -INFINITY : m + logf(l);
  }
}
// [end:softmax_kernel]

// [start:pv_kernel]
// One thread per (b, h, i, d): O_id = sum_j P_ij V_jd, rounded once to the output dtype.
template <typename T>
__global__ void pv_kernel(Params<T> p) {
  const std::int64_t total = p.B * p.Hq * p.Nq * p.D;
  const std::int64_t group = p.Hq / p.Hkv;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t d = idx % p.D;
    const std::int64_t i = idx / p.D % p.Nq;
    const std::int64_t h = idx / (p.D * p.Nq) % p.Hq;
    const std::int64_t b = idx / (p.D * p.Nq * p.Hq);
    const float* p_row = p.s + ((b * p.Hq + h) * p.Nq + i) * p.Nk;
    const T* v_col = p.v + b * p.v_stride[0] + (h / group) * p.v_stride[1] + d;
    float acc = 0.0f;
    for (std::int64_t j = 0; j < p.Nk; ++j) acc += p_row[j] * vendor::to_float(v_col[j * p.v_stride[2]]);
    p.o[b * p.o_stride[0] + h * p.o_stride[1] + i * p.o_stride[2] + d] = vendor::from_float<T>(acc);
  }
}
// [end:pv_kernel]

std::int64_t blocks_for(std::int64_t work) {
  const std::int64_t blocks = (work + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return blocks < kMaxBlocks ? blocks : kMaxBlocks;
}

void copy_strides(std::int64_t (&dst)[3], const TensorView& t) {
  for (int d = 0; d < 3; ++d) dst[d] = t.stride[d];
}

}  // namespace

// S/P: B * Hq * Nq * Nk floats. A call attention_forward() refuses (its head_dim) needs none
// here, so a caller that allocates this before the call gets the call's own error, not a size;
// a byte count past int64 is refused here (it would wrap around to a small size).
std::size_t workspace_bytes(const AttentionArgs& args) {
  if (args.head_dim() > kMaxHeadDim) return 0;
  // Empty, or no key: nothing to score (validate() refuses a negative size).
  if (std::min({args.batch(), args.heads_q(), args.seqlen_q(), args.seqlen_k()}) <= 0) return 0;
  const std::optional<std::int64_t> elems =
      checked_product({args.batch(), args.heads_q(), args.seqlen_q(), args.seqlen_k()},
                      std::numeric_limits<std::int64_t>::max() / std::int64_t{sizeof(float)});
  if (!elems)
    throw Unsupported("step 01: its S/P matrix of B * Hq * Nq * Nk = " + std::to_string(args.batch()) + " * " +
                      std::to_string(args.heads_q()) + " * " + std::to_string(args.seqlen_q()) + " * " +
                      std::to_string(args.seqlen_k()) + " floats exceeds int64 byte counts");
  return static_cast<std::size_t>(*elems) * sizeof(float);
}

StepInfo info() { return {1, "naive", "three kernels; S and P round-trip through global memory", 8192}; }

// [start:launcher]
void attention_forward(const AttentionArgs& args, vendor::Stream stream) {
  validate(args);
  if (args.head_dim() > kMaxHeadDim)
    throw Unsupported("q.shape[3] (head_dim = " + std::to_string(args.head_dim()) +
                      ") exceeds step 01's maximum of " + std::to_string(kMaxHeadDim));
  if (is_empty(args)) return;
  const std::size_t needed = workspace_bytes(args);
  if (args.workspace_size < needed || (needed > 0 && args.workspace == nullptr))
    throw InvalidArgument("workspace_size = " + std::to_string(args.workspace_size) + " bytes: step 01 needs " +
                          std::to_string(needed) + " bytes for S/P (see workspace_bytes)");
  vendor::dispatch_dtype(args.q.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    Params<T> p;
    p.q = static_cast<const T*>(args.q.data);
    p.k = static_cast<const T*>(args.k.data);
    p.v = static_cast<const T*>(args.v.data);
    p.o = static_cast<T*>(args.o.data);
    p.lse = args.lse;
    p.s = static_cast<float*>(args.workspace);
    copy_strides(p.q_stride, args.q);
    copy_strides(p.k_stride, args.k);
    copy_strides(p.v_stride, args.v);
    copy_strides(p.o_stride, args.o);
    p.B = args.batch(), p.Hq = args.heads_q(), p.Hkv = args.heads_kv();
    p.Nq = args.seqlen_q(), p.Nk = args.seqlen_k(), p.D = args.head_dim();
    p.scale = args.scale();
    p.mask = args.mask;
    const std::int64_t s_elems = p.B * p.Hq * p.Nq * p.Nk;
    if (s_elems > 0) {  // Nk == 0: nothing to score, every row is fully masked
      s_kernel<T><<<blocks_for(s_elems), kThreadsPerBlock, 0, stream>>>(p);
      FLASHSTEPS_CHECK_LAUNCH("step01::s_kernel");
    }
    softmax_kernel<T><<<blocks_for(p.B * p.Hq * p.Nq), kThreadsPerBlock, 0, stream>>>(p);
    FLASHSTEPS_CHECK_LAUNCH("step01::softmax_kernel");
    pv_kernel<T><<<blocks_for(p.B * p.Hq * p.Nq * p.D), kThreadsPerBlock, 0, stream>>>(p);
    FLASHSTEPS_CHECK_LAUNCH("step01::pv_kernel");
  });
}
// [end:launcher]

}  // namespace flashsteps::step01
