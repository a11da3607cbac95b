// SPDX-License-Identifier: Apache-2.0
// tune_stepNN: runs a step's tuner (common/include/flashsteps/tuner.h) over the standard
// problem set and writes a tuning table, e.g. the checked-in steps/06_autotuned/tuned/nvidia-h200.json:
//
//   tune_step06 --out steps/06_autotuned/tuned/nvidia-h200.json
//   tune_step09 --out steps/09_persistent/tuned/nvidia-h200.json
//
// Every key gets the median time of every candidate, so a table records the whole search
// (step 06's feeds chapter 06's figure, tools/book/plot_search_space.py). One source for every tuned step:
// flashsteps_add_tuner() (cmake/FlashStepsSteps.cmake) compiles it per step with
// FLASHSTEPS_STEP_NS (step06), FLASHSTEPS_STEP_HEADER (the header declaring the step's
// tuner()) and FLASHSTEPS_STEP_TOOL (tune_step06).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include "flashsteps/commit.h"
#include "flashsteps/harness.h"
#include "flashsteps/problem.h"
#include "flashsteps/step.h"  // the step's workspace_bytes()
#include "flashsteps/tuner.h"
#include FLASHSTEPS_STEP_HEADER

int main(int argc, char** argv) {
  using namespace flashsteps;
  tuning::TunerCore& tuner = FLASHSTEPS_STEP_NS::tuner();
  CLI::App app{std::string("Tunes ") + tuner.names().step + " on the standard problem set and writes a tuning table (JSON)"};
  std::string out = std::string(tuner.names().id) + "_tuning.json";
  std::vector<std::string> dtypes = {"fp16", "bf16"};
  std::vector<int> head_dims = {64, 128};
  std::int64_t min_seqlen = 0, max_seqlen = 16384;
  int reps = 7;
  app.add_option("--out", out, "tuning table to write");
  app.add_option("--dtype", dtypes, "fp16 and/or bf16")->check(CLI::IsMember({"fp16", "bf16"}));
  app.add_option("--head-dim", head_dims, "head dims of the standard set to tune (64, 128)");
  app.add_option("--min-seqlen", min_seqlen, "skip standard problems shorter than this");
  app.add_option("--max-seqlen", max_seqlen, "skip standard problems longer than this");
  app.add_option("--reps", reps, "timed launches per candidate (median)")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  if (vendor::device_count() == 0) {
    std::printf("No GPU found by the %s runtime: nothing tuned.\n", vendor::kName);
    return 0;
  }
  std::string command = FLASHSTEPS_STEP_TOOL;
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  const DeviceInfo dev = device_info();
  tuning::TuningTable table(tuner.table_format());
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  table.set_meta("command", command);
  table.set_meta("date", date);
  table.set_meta("git_commit", FLASHSTEPS_GIT_COMMIT);
  table.set_meta("device", dev.name + " (" + dev.arch + ", " + std::to_string(dev.sm_count) + " SMs, CUDA driver API " +
                               dev.driver + ", " + dev.runtime + ")");
  table.set_meta("problems", "standard set: batch * seqlen = 16384 tokens, heads * head_dim = 2048, random inputs");
  // A problem that throws (a GPU the step does not run on, say) stops the tool with its
  // message; the keys tuned before it are written all the same.
  int status = 0;
  try {
    for (const std::string& dname : dtypes) {
      const DType dtype = dname == "fp16" ? DType::f16 : DType::bf16;
      for (const Problem& p : standard_problems(dtype)) {
        bool head_dim_listed = false;
        for (int d : head_dims) head_dim_listed = head_dim_listed || d == p.head_dim;
        if (p.seqlen_q < min_seqlen || p.seqlen_q > max_seqlen || !head_dim_listed) continue;
        DeviceCase device_case(make_random_inputs(p, seed_from_name(p.name())));
        device_case.reserve_workspace(FLASHSTEPS_STEP_NS::workspace_bytes(device_case.args()));  // step 09's counter
        const tuning::TuneEntry entry = tuner.tune(device_case.args(), nullptr, &std::cerr, 2, reps);
        table.insert(entry);
        std::printf("%-40s -> %s\n", entry.key.str().c_str(), entry.choice.c_str());
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", FLASHSTEPS_STEP_TOOL, e.what());
    status = 1;
  }
  if (table.entries.empty()) {
    std::fprintf(stderr, "%s: no problem of the standard set was tuned (--dtype, --head-dim, --min-seqlen, "
                 "--max-seqlen select none, or the first failed); %s is left as it was\n", FLASHSTEPS_STEP_TOOL,
                 out.c_str());
    return 1;
  }
  table.save(out);
  std::printf("wrote %s (%zu keys)\n", out.c_str(), table.entries.size());
  return status;
}
