// SPDX-License-Identifier: Apache-2.0
#include "flashsteps/verify.h"

#include <algorithm>
#include <sstream>
#include <string>

namespace flashsteps {

Verdict verify_output(const Problem& p, const std::vector<double>& ref_o, const std::vector<double>& ref_lse,
                      const std::vector<double>& out_o, const std::vector<double>& out_lse,
                      const std::vector<std::int64_t>& rows) {
  Verdict v;
  const std::int64_t D = p.head_dim, heads = p.batch * p.heads_q;
  const std::vector<std::int64_t> row_list = query_rows(rows, p.seqlen_q);
  std::vector<double> ro, oo, rl, ol;
  for (std::int64_t bh = 0; bh < heads; ++bh)
    for (std::int64_t i : row_list) {
      const std::size_t row = static_cast<std::size_t>(bh * p.seqlen_q + i);
      for (std::int64_t d = 0; d < D; ++d) {
        ro.push_back(ref_o.at(row * D + d));
        oo.push_back(out_o.at(row * D + d));
      }
      if (p.with_lse) {
        rl.push_back(ref_lse.at(row));
        ol.push_back(out_lse.at(row));
      }
    }
  v.o = compare(ro, oo);
  v.failure = check_tolerance(v.o, p.dtype, "O");
  if (p.with_lse) {
    v.lse = compare(rl, ol);
    if (v.lse.nonfinite_mismatch > 0 || !(v.lse.max_abs <= kLseMaxAbs)) {
      std::ostringstream s;
      s << "LSE: max abs error " << v.lse.max_abs << " (limit " << kLseMaxAbs << "), "
        << v.lse.nonfinite_mismatch << " non-finite mismatches; ";
      v.failure += s.str();
    }
  }
  return v;
}

Verdict verify_slice(const Problem& p, std::int64_t batch, std::int64_t head_kv, const std::vector<double>& ref_o,
                     const std::vector<double>& ref_lse, const std::vector<double>& out_o,
                     const std::vector<double>& out_lse, const std::vector<std::int64_t>& rows) {
  const Problem slice = slice_problem(p);
  if (batch < 0 || batch >= p.batch || head_kv < 0 || head_kv >= p.heads_kv)
    throw InvalidArgument("verify_slice: (batch " + std::to_string(batch) + ", KV head " + std::to_string(head_kv) +
                          ") is outside " + p.name());
  // The slice's query heads are consecutive in canonical order: rows first_row ... + G Nq.
  const std::int64_t rows_in_slice = slice.heads_q * p.seqlen_q;
  const std::int64_t first_row = (batch * p.heads_q + head_kv * slice.heads_q) * p.seqlen_q;
  auto part = [&](const std::vector<double>& whole, std::int64_t width, const char* what) {
    const std::size_t begin = static_cast<std::size_t>(first_row * width), n = static_cast<std::size_t>(rows_in_slice * width);
    if (whole.size() < begin + n) throw InvalidArgument(std::string("verify_slice: ") + what + " is too short for " + p.name());
    return std::vector<double>(whole.begin() + static_cast<std::ptrdiff_t>(begin),
                               whole.begin() + static_cast<std::ptrdiff_t>(begin + n));
  };
  return verify_output(slice, ref_o, ref_lse, part(out_o, p.head_dim, "O"),
                       p.with_lse ? part(out_lse, 1, "LSE") : std::vector<double>{}, rows);
}

Verdict worse_of(const Verdict& a, const Verdict& b) {
  auto worse = [](const ErrorStats& x, const ErrorStats& y) {
    ErrorStats w;
    w.max_abs = std::max(x.max_abs, y.max_abs);
    w.rel_fro = std::max(x.rel_fro, y.rel_fro);
    w.max_abs_ref = std::max(x.max_abs_ref, y.max_abs_ref);
    w.nonfinite_mismatch = x.nonfinite_mismatch + y.nonfinite_mismatch;
    w.count = x.count + y.count;
    return w;
  };
  Verdict v;
  v.o = worse(a.o, b.o);
  v.lse = worse(a.lse, b.lse);
  v.failure = a.failure + b.failure;
  return v;
}

}  // namespace flashsteps
