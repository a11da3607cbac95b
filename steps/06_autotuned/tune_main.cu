// SPDX-License-Identifier: Apache-2.0
// tune_step06: runs step 06's tuner over the standard problem set and writes a tuning table
// (the format of tuner.h), e.g. the checked-in steps/06_autotuned/tuned/nvidia-h200.json:
//
//   tune_step06 --out steps/06_autotuned/tuned/nvidia-h200.json
//
// Every key gets the median time of every candidate, so the table also feeds the chapter's
// search-space plot (tools/book/plot_search_space.py).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include "flashsteps/commit.h"
#include "flashsteps/harness.h"
#include "flashsteps/problem.h"
#include "tuner.h"

int main(int argc, char** argv) {
  using namespace flashsteps;
  CLI::App app{"Tunes step 06 on the standard problem set and writes a tuning table (JSON)"};
  std::string out = "step06_tuning.json";
  std::vector<std::string> dtypes = {"fp16", "bf16"};
  std::vector<int> head_dims = {64, 128};
  std::int64_t max_seqlen = 16384;
  int reps = 7;
  app.add_option("--out", out, "tuning table to write");
  app.add_option("--dtype", dtypes, "fp16 and/or bf16");
  app.add_option("--head-dim", head_dims, "head dims of the standard set to tune (64, 128)");
  app.add_option("--max-seqlen", max_seqlen, "skip standard problems longer than this");
  app.add_option("--reps", reps, "timed launches per candidate (median)");
  CLI11_PARSE(app, argc, argv);
  if (vendor::device_count() == 0) {
    std::printf("No GPU found by the %s runtime: nothing tuned.\n", vendor::kName);
    return 0;
  }
  std::string command = "tune_step06";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  const DeviceInfo dev = device_info();
  step06::TuningTable table;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  table.set_meta("command", command);
  table.set_meta("date", date);
  table.set_meta("git_commit", FLASHSTEPS_GIT_COMMIT);
  table.set_meta("device", dev.name + " (" + dev.arch + ", " + std::to_string(dev.sm_count) + " SMs, CUDA driver API " +
                               dev.driver + ", " + dev.runtime + ")");
  table.set_meta("problems", "standard set: batch * seqlen = 16384 tokens, heads * head_dim = 2048, random inputs");
  for (const std::string& dname : dtypes) {
    const DType dtype = dname == "fp16" ? DType::f16 : DType::bf16;
    for (const Problem& p : standard_problems(dtype)) {
      bool wanted = p.seqlen_q <= max_seqlen;
      bool head_dim_listed = false;
      for (int d : head_dims) head_dim_listed = head_dim_listed || d == p.head_dim;
      if (!wanted || !head_dim_listed) continue;
      DeviceCase device_case(make_random_inputs(p, seed_from_name(p.name())));
      const step06::TuneEntry entry = step06::tune(device_case.args(), nullptr, &std::cerr, 2, reps);
      table.insert(entry);
      std::printf("%-40s -> %s\n", entry.key.str().c_str(), entry.choice.name().c_str());
      std::fflush(stdout);
    }
  }
  table.save(out);
  std::printf("wrote %s (%zu keys)\n", out.c_str(), table.entries.size());
  return 0;
}
