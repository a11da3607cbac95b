// SPDX-License-Identifier: Apache-2.0
#include "flashsteps/reference.h"
#include "flashsteps/reference_kokkos.h"

#include <cmath>
#include <limits>
#include <string>

namespace flashsteps::reference {

Runtime::Runtime() { Kokkos::initialize(); }
Runtime::~Runtime() { Kokkos::finalize(); }

void attention(const View4& q, const View4& k, const View4& v, const Options& options,
               const View4& o, const View3& lse, const std::vector<std::int64_t>& rows) {
  const std::int64_t B = q.extent(0), Hq = q.extent(1), Nq = q.extent(2), D = q.extent(3);
  const std::int64_t Hkv = k.extent(1), Nk = k.extent(2);
  auto same = [](std::int64_t a, std::int64_t b, const char* what) {
    if (a != b) throw InvalidArgument(std::string("reference: extents disagree: ") + what);
  };
  same(k.extent(0), B, "k batch");
  same(k.extent(3), D, "k head_dim");
  for (int d = 0; d < 4; ++d) same(v.extent(d), k.extent(d), "v vs k");
  for (int d = 0; d < 4; ++d) same(o.extent(d), q.extent(d), "o vs q");
  for (int d = 0; d < 3; ++d) same(lse.extent(d), q.extent(d), "lse vs q");
  if (Hq > 0 && (Hkv == 0 || Hq % Hkv != 0)) throw InvalidArgument("reference: heads_kv must divide heads_q");
  const std::vector<std::int64_t> row_list = query_rows(rows, Nq);
  for (std::int64_t i : row_list)
    if (i < 0 || i >= Nq) throw InvalidArgument("reference: row " + std::to_string(i) + " out of range");
  if (Hq == 0) return;
  const std::int64_t group = Hq / Hkv;
  const std::int64_t R = static_cast<std::int64_t>(row_list.size());
  const std::int64_t* row_ptr = row_list.data();
  const double scale = options.scale;
  const Mask mask = options.mask;

  // One work item per (b, h, row); each makes three passes over the visible keys.
  Kokkos::parallel_for(
      "flashsteps::reference::attention",
      Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, B * Hq * R), [=](std::int64_t idx) {
        const std::int64_t b = idx / (Hq * R), h = (idx / R) % Hq, i = row_ptr[idx % R];
        const std::int64_t hk = h / group;
        const std::int64_t last = last_visible_key(mask, i, Nq, Nk);
        auto score = [&](std::int64_t j) {
          double s = 0.0;
          for (std::int64_t d = 0; d < D; ++d) s += q(b, h, i, d) * k(b, hk, j, d);
          return scale * s;
        };
        // Pass 1: row max m_i.
        double m = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j <= last; ++j) m = std::fmax(m, score(j));
        // Pass 2: l_i = sum_j exp(S_ij - m_i).
        double l = 0.0;
        for (std::int64_t j = 0; j <= last; ++j) l += std::exp(score(j) - m);
        // Pass 3: O_i = sum_j P_ij V_j with P_ij = exp(S_ij - m_i) / l_i.
        for (std::int64_t d = 0; d < D; ++d) o(b, h, i, d) = 0.0;
        for (std::int64_t j = 0; j <= last; ++j) {
          const double p = std::exp(score(j) - m) / l;
          for (std::int64_t d = 0; d < D; ++d) o(b, h, i, d) += p * v(b, hk, j, d);
        }
        lse(b, h, i) = last < 0 ? -std::numeric_limits<double>::infinity() : m + std::log(l);
      });
  Kokkos::fence();
}

Result run(const HostInputs& in, const std::vector<std::int64_t>& rows) {
  const Problem& p = in.problem;
  using Unmanaged4 = Kokkos::View<double****, Kokkos::LayoutRight, Kokkos::HostSpace,
                                  Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Unmanaged3 = Kokkos::View<double***, Kokkos::LayoutRight, Kokkos::HostSpace,
                                  Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Result r;
  r.o.assign(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q * p.head_dim), std::nan(""));
  r.lse.assign(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q), std::nan(""));
  auto* qd = const_cast<double*>(in.q.data());
  auto* kd = const_cast<double*>(in.k.data());
  auto* vd = const_cast<double*>(in.v.data());
  Unmanaged4 q(qd, p.batch, p.heads_q, p.seqlen_q, p.head_dim);
  Unmanaged4 k(kd, p.batch, p.heads_kv, p.seqlen_k, p.head_dim);
  Unmanaged4 v(vd, p.batch, p.heads_kv, p.seqlen_k, p.head_dim);
  Unmanaged4 o(r.o.data(), p.batch, p.heads_q, p.seqlen_q, p.head_dim);
  Unmanaged3 lse(r.lse.data(), p.batch, p.heads_q, p.seqlen_q);
  Options opt;
  opt.mask = p.mask;
  opt.scale = p.softmax_scale ? static_cast<double>(*p.softmax_scale) : 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  attention(q, k, v, opt, o, lse, rows);
  return r;
}

}  // namespace flashsteps::reference
