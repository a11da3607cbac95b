// SPDX-License-Identifier: Apache-2.0
#include "flashsteps/problem.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <sstream>

#include "flashsteps/host_dtype.h"
#include "flashsteps/random.h"

namespace flashsteps {

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::bhsd: return "bhsd";
    case Layout::bshd: return "bshd";
    case Layout::packed_qkv: return "packed_qkv";
  }
  return "?";
}

std::string Problem::name() const {
  std::ostringstream s;
  s << "b" << batch << "_hq" << heads_q << "_hkv" << heads_kv << "_nq" << seqlen_q << "_nk"
    << seqlen_k << "_d" << head_dim << "_" << dtype_name(dtype) << "_" << mask_name(mask) << "_"
    << layout_name(layout);
  if (softmax_scale) s << "_scale" << *softmax_scale;
  if (!with_lse) s << "_nolse";
  return s.str();
}

namespace {

// Strides of a contiguous [B, H, N, D] tensor stored as [B, N, H, D] (or BHSD).
void set_strides(Placement& pl, Layout layout, std::int64_t H, std::int64_t N, std::int64_t D,
                 std::int64_t row_pitch) {
  if (layout == Layout::bhsd) {
    pl.stride[0] = H * N * D;
    pl.stride[1] = N * D;
    pl.stride[2] = D;
  } else {  // token-major: row_pitch elements between consecutive tokens
    pl.stride[0] = N * row_pitch;
    pl.stride[1] = D;
    pl.stride[2] = row_pitch;
  }
  pl.stride[3] = 1;
}

}  // namespace

ProblemLayout make_layout(const Problem& p) {
  if (p.batch < 0 || p.heads_q < 0 || p.heads_kv < 0 || p.seqlen_q < 0 || p.seqlen_k < 0 ||
      p.head_dim < 0)
    throw InvalidArgument("problem " + p.name() + ": sizes must be non-negative");
  ProblemLayout l;
  const std::int64_t B = p.batch, Hq = p.heads_q, Hkv = p.heads_kv, D = p.head_dim;
  const std::int64_t Nq = p.seqlen_q, Nk = p.seqlen_k;
  if (p.layout == Layout::packed_qkv) {
    if (Hq != Hkv || Nq != Nk)
      throw InvalidArgument("layout packed_qkv needs heads_q == heads_kv and seqlen_q == seqlen_k");
    const std::int64_t pitch = 3 * Hq * D;  // one token holds q, k, v of every head
    for (int t = 0; t < 3; ++t) {
      Placement& pl = t == 0 ? l.q : t == 1 ? l.k : l.v;
      pl.buffer = 0;
      pl.offset = t * Hq * D;
      set_strides(pl, Layout::bshd, Hq, Nq, D, pitch);
    }
    l.buffer_elems[0] = B * Nq * pitch;
  } else {
    const std::int64_t heads[3] = {Hq, Hkv, Hkv}, lens[3] = {Nq, Nk, Nk};
    for (int t = 0; t < 3; ++t) {
      Placement& pl = t == 0 ? l.q : t == 1 ? l.k : l.v;
      pl.buffer = t;
      set_strides(pl, p.layout, heads[t], lens[t], D, heads[t] * D);
      l.buffer_elems[t] = B * heads[t] * lens[t] * D;
    }
  }
  set_strides(l.o, p.layout == Layout::bhsd ? Layout::bhsd : Layout::bshd, Hq, Nq, D, Hq * D);
  l.o_elems = B * Hq * Nq * D;
  return l;
}

TensorView make_view(const Problem& p, const ProblemLayout& layout, char which, void* base) {
  const Placement& pl = which == 'q' ? layout.q : which == 'k' ? layout.k : which == 'v' ? layout.v : layout.o;
  const bool is_q_like = which == 'q' || which == 'o';
  TensorView t;
  t.dtype = p.dtype;
  t.data = static_cast<unsigned char*>(base) + pl.offset * static_cast<std::int64_t>(dtype_size(p.dtype));
  t.shape[0] = p.batch;
  t.shape[1] = is_q_like ? p.heads_q : p.heads_kv;
  t.shape[2] = is_q_like ? p.seqlen_q : p.seqlen_k;
  t.shape[3] = p.head_dim;
  for (int d = 0; d < 4; ++d) t.stride[d] = pl.stride[d];
  return t;
}

float read_element(const void* buffer, const Placement& pl, DType dtype, std::int64_t b,
                   std::int64_t h, std::int64_t n, std::int64_t d) {
  const std::int64_t e = pl.offset + b * pl.stride[0] + h * pl.stride[1] + n * pl.stride[2] + d;
  return load_element(static_cast<const unsigned char*>(buffer) + e * static_cast<std::int64_t>(dtype_size(dtype)), dtype);
}

namespace {

// Runs fn(begin, end) over [0, n) on every hardware thread.
template <typename Fn>
void parallel_ranges(std::int64_t n, Fn fn) {
  const std::int64_t workers = std::max<std::int64_t>(1, std::min<std::int64_t>(std::thread::hardware_concurrency(), n / 65536 + 1));
  std::vector<std::thread> pool;
  for (std::int64_t w = 0; w < workers; ++w) pool.emplace_back(fn, n * w / workers, n * (w + 1) / workers);
  for (std::thread& t : pool) t.join();
}

}  // namespace

HostInputs make_inputs(const Problem& p, const InputValue& value) {
  HostInputs in;
  in.problem = p;
  in.layout = make_layout(p);
  const std::int64_t esize = static_cast<std::int64_t>(dtype_size(p.dtype));
  for (int b = 0; b < 3; ++b) in.buffers[b].assign(static_cast<std::size_t>(in.layout.buffer_elems[b] * esize), 0);
  const std::int64_t B = p.batch, D = p.head_dim;
  struct Target {
    std::vector<double>* canon;
    const Placement* pl;
    std::int64_t H, N;
  } targets[3] = {{&in.q, &in.layout.q, p.heads_q, p.seqlen_q},
                  {&in.k, &in.layout.k, p.heads_kv, p.seqlen_k},
                  {&in.v, &in.layout.v, p.heads_kv, p.seqlen_k}};
  for (int t = 0; t < 3; ++t) {
    const Target& tg = targets[t];
    const std::int64_t n = B * tg.H * tg.N * D;
    tg.canon->resize(static_cast<std::size_t>(n));
    unsigned char* buf = in.buffers[tg.pl->buffer].data();
    // Element c of the canonical [B, H, N, D] order goes to its strided place in the buffer.
    parallel_ranges(n, [&, t, n](std::int64_t begin, std::int64_t end) {
      for (std::int64_t c = begin; c < end && c < n; ++c) {
        const std::int64_t d = c % D, row = c / D, s = row % tg.N, h = row / tg.N % tg.H, b = row / (tg.N * tg.H);
        const float x = round_to(value(t, c), p.dtype);
        const std::int64_t e = tg.pl->offset + b * tg.pl->stride[0] + h * tg.pl->stride[1] + s * tg.pl->stride[2] + d;
        store_element(buf + e * esize, x, p.dtype);
        (*tg.canon)[static_cast<std::size_t>(c)] = x;
      }
    });
  }
  return in;
}

HostInputs make_random_inputs(const Problem& p, std::uint64_t seed) {
  const std::uint64_t streams[3] = {random::input_stream(seed, 0), random::input_stream(seed, 1),
                                    random::input_stream(seed, 2)};
  return make_inputs(p, [&](int t, std::int64_t c) {
    return random::input_value(streams[t], t, static_cast<std::uint64_t>(c));
  });
}

Problem slice_problem(const Problem& p) {
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0)
    throw InvalidArgument("slice_problem: heads_kv must divide heads_q in " + p.name());
  Problem slice = p;
  slice.batch = 1, slice.heads_q = p.heads_q / p.heads_kv, slice.heads_kv = 1, slice.layout = Layout::bhsd;
  return slice;
}

HostInputs make_random_slice(const Problem& p, std::uint64_t seed, std::int64_t batch, std::int64_t head_kv) {
  if (batch < 0 || batch >= p.batch || head_kv < 0 || head_kv >= p.heads_kv)
    throw InvalidArgument("make_random_slice: (batch " + std::to_string(batch) + ", KV head " + std::to_string(head_kv) +
                          ") is outside " + p.name());
  const std::int64_t G = p.heads_q / p.heads_kv;
  const Problem slice = slice_problem(p);
  // In canonical [B, H, N, D] order the slice's heads are consecutive in the whole problem:
  // its element c is element first[t] + c there.
  const std::int64_t first[3] = {(batch * p.heads_q + head_kv * G) * p.seqlen_q * p.head_dim,
                                 (batch * p.heads_kv + head_kv) * p.seqlen_k * p.head_dim,
                                 (batch * p.heads_kv + head_kv) * p.seqlen_k * p.head_dim};
  const std::uint64_t streams[3] = {random::input_stream(seed, 0), random::input_stream(seed, 1),
                                    random::input_stream(seed, 2)};
  return make_inputs(slice, [&](int t, std::int64_t c) {
    return random::input_value(streams[t], t, static_cast<std::uint64_t>(first[t] + c));
  });
}

std::vector<std::int64_t> query_rows(const std::vector<std::int64_t>& rows, std::int64_t seqlen_q) {
  if (!rows.empty()) return rows;
  std::vector<std::int64_t> all(static_cast<std::size_t>(std::max<std::int64_t>(seqlen_q, 0)));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  return all;
}

std::uint64_t seed_from_name(const std::string& name) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::vector<Problem> standard_problems(DType dtype) {
  std::vector<Problem> set;
  for (std::int64_t D : {64, 128})
    for (bool causal : {false, true})
      for (std::int64_t N : {512, 1024, 2048, 4096, 8192, 16384}) {
        Problem p;
        p.batch = 16384 / N;
        p.heads_q = p.heads_kv = 2048 / D;
        p.seqlen_q = p.seqlen_k = N;
        p.head_dim = D;
        p.dtype = dtype;
        p.mask = causal ? Mask::causal_bottom_right : Mask::none;
        p.layout = Layout::bshd;
        p.with_lse = true;
        set.push_back(p);
      }
  return set;
}

std::vector<Problem> decode_problems(DType dtype) {
  std::vector<Problem> set;
  auto add = [&](std::int64_t D, std::int64_t Hkv, std::int64_t B, std::int64_t Nq, std::int64_t Nk, Mask mask) {
    Problem p;
    p.batch = B, p.heads_q = 32, p.heads_kv = Hkv, p.seqlen_q = Nq, p.seqlen_k = Nk, p.head_dim = D;
    p.dtype = dtype, p.mask = mask, p.layout = Layout::bshd, p.with_lse = true;
    set.push_back(p);
  };
  for (std::int64_t D : {128, 64})
    for (std::int64_t Hkv : {8, 32}) {
      for (std::int64_t B : {1, 8, 32})
        for (std::int64_t Nk : {1024, 4096, 16384, 65536}) add(D, Hkv, B, 1, Nk, Mask::none);
      add(D, Hkv, 1, 128, 8192, Mask::causal_bottom_right);  // chunked prefill
    }
  return set;
}

std::string standard_name(const Problem& p) {
  return std::string("attention/") + dtype_name(p.dtype) + "/hd" + std::to_string(p.head_dim) + "/n" +
         std::to_string(p.seqlen_q) + (p.mask == Mask::none ? "/full" : "/causal");
}

std::vector<std::int64_t> spot_check_rows(const Problem& p) {
  if (p.batch * p.heads_q * p.seqlen_q * p.seqlen_k <= (1 << 22)) return {};
  const std::int64_t n = p.seqlen_q;
  std::vector<std::int64_t> rows = {0, std::min<std::int64_t>(1, n - 1), n / 3, std::min(2 * n / 3 + 1, n - 1), n - 1};
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

std::string decode_name(const Problem& p) {
  std::ostringstream s;
  s << "decode/" << dtype_name(p.dtype) << "/hd" << p.head_dim << "/b" << p.batch << "/hq" << p.heads_q << "/hkv"
    << p.heads_kv << "/nq" << p.seqlen_q << "/nk" << p.seqlen_k << (p.mask == Mask::none ? "/full" : "/causal");
  return s.str();
}

}  // namespace flashsteps
