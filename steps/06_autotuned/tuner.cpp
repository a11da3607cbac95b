// SPDX-License-Identifier: Apache-2.0
// Step 06's tuner (tuner.h): the names of its shapes, and the shared tuner
// (common/src/tuner.cpp) given step 06's space, tables and default.
#include "tuner.h"

#include <cstdio>

#include "flashsteps/dispatch.h"
#include "flashsteps/step06_tuned_tables.h"  // generated: step06::kTunedTables[], the files of tuned/

namespace flashsteps::step06 {

std::string TileChoice::name() const {
  return "m" + std::to_string(block_m) + "_n" + std::to_string(block_n) + "_w" + std::to_string(warps) + "_s" +
         std::to_string(stages) + (overlap != 0 ? "_ov" : "");
}

std::optional<TileChoice> TileChoice::parse(const std::string& text) {
  TileChoice c;
  std::string base = text;
  if (base.size() > 3 && base.compare(base.size() - 3, 3, "_ov") == 0) base.resize(base.size() - 3), c.overlap = 1;
  char tail = 0;
  if (std::sscanf(base.c_str(), "m%d_n%d_w%d_s%d%c", &c.block_m, &c.block_n, &c.warps, &c.stages, &tail) != 4)
    return std::nullopt;
  if (c.name() != text) return std::nullopt;  // no signs, no leading zeros
  return c;
}

tuning::Tuner<TileChoice>& tuner() {
  static tuning::Tuner<TileChoice> t(
      {"step 06", "step06", "configuration", "FLASHSTEPS_CONFIG", "FLASHSTEPS_TUNE_CACHE", "m128_n64_w4_s2"},
      kTunedTables, &padded_head_dim_tc, &space, [](const AttentionArgs&, int head_dim) { return heuristic(head_dim); });
  return t;
}

void attention_forward_with(const AttentionArgs& args, vendor::Stream stream, const TileChoice& choice) {
  validate(args);
  check_tensor_core_args(args, "step 06");
  const Candidate& c = tuner().find(padded_head_dim_tc(args.head_dim()), choice, "configuration");
  if (is_empty(args)) return;
  c.launch(args, stream);
}

}  // namespace flashsteps::step06
