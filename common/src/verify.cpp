// SPDX-License-Identifier: Apache-2.0
#include "flashsteps/verify.h"

#include <sstream>

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

}  // namespace flashsteps
