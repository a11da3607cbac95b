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
#include <fcntl.h>   // open(): --out's writability, tried before the tune
#include <unistd.h>  // close(), getpid(), unlink()

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "flashsteps/commit.h"
#include "flashsteps/harness.h"
#include "flashsteps/problem.h"
#include "flashsteps/step.h"  // the step's workspace_bytes()
#include "flashsteps/tuner.h"
#include FLASHSTEPS_STEP_HEADER

namespace {

// Why the tuning table cannot be written to @p path, or "" when it can. Checked before the
// GPU is looked for, so that a bad --out fails at once rather than after a whole tune. It is
// tried, not inferred from permission bits (root passes access() even where nothing can be
// created, /proc say): an existing table is opened for appending and closed (left as it
// was); otherwise a probe file is created and removed in the nearest folder that exists
// (TuningTable::save() creates the missing ones below it).
std::string unwritable(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return "is empty";
  std::error_code error;
  const fs::path file = fs::absolute(path, error);
  if (error) return error.message();
  if (fs::is_directory(file, error)) return "is a folder";
  if (fs::exists(file, error)) {
    if (!fs::is_regular_file(file, error)) return "is not a regular file";  // a FIFO would block open()
    const int fd = open(file.c_str(), O_WRONLY | O_APPEND);
    if (fd < 0) return std::string("cannot be written: ") + std::strerror(errno);
    close(fd);
    return "";
  }
  fs::path folder = file.parent_path();
  // The nearest part of the path that exists, a dangling symbolic link included (save() could
  // not create a folder there).
  while (!fs::exists(fs::symlink_status(folder, error)) && folder != folder.parent_path()) folder = folder.parent_path();
  if (!fs::is_directory(folder, error)) return folder.string() + " is not a folder";
  const fs::path probe = folder / (".tune-probe-" + std::to_string(getpid()));
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return "cannot be created in " + folder.string() + ": " + std::strerror(errno);
  close(fd);
  unlink(probe.c_str());
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flashsteps;
  tuning::TunerCore& tuner = FLASHSTEPS_STEP_NS::tuner();
  CLI::App app{std::string("Tunes ") + tuner.names().step + " on the standard problem set and writes a tuning table (JSON)"};
  std::string out = std::string(tuner.names().id) + "_tuning.json";
  std::vector<std::string> dtypes = {"fp16", "bf16"};
  std::vector<int> standard_head_dims;  // those of the standard set (64, 128): the only ones it can tune
  std::vector<std::int64_t> standard_seqlens;
  for (const Problem& p : standard_problems(DType::f16)) {
    if (std::find(standard_head_dims.begin(), standard_head_dims.end(), p.head_dim) == standard_head_dims.end())
      standard_head_dims.push_back(static_cast<int>(p.head_dim));
    if (std::find(standard_seqlens.begin(), standard_seqlens.end(), p.seqlen_q) == standard_seqlens.end())
      standard_seqlens.push_back(p.seqlen_q);
  }
  std::vector<int> head_dims = standard_head_dims;
  std::int64_t min_seqlen = 0, max_seqlen = 16384;
  int reps = 7;
  app.add_option("--out", out, "tuning table to write");
  app.add_option("--dtype", dtypes, "fp16 and/or bf16")->check(CLI::IsMember({"fp16", "bf16"}));
  app.add_option("--head-dim", head_dims, "head dims of the standard set to tune (64, 128)")
      ->check(CLI::IsMember(standard_head_dims));
  app.add_option("--min-seqlen", min_seqlen, "skip standard problems shorter than this")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20));
  app.add_option("--max-seqlen", max_seqlen, "skip standard problems longer than this")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  app.add_option("--reps", reps, "timed launches per candidate (median)")->check(CLI::Range(1, 1000));
  // What the options select, and where the table goes, checked once all are read (a
  // CLI::ValidationError here is reported like a validator's): before the GPU is looked
  // for, so a mistyped run fails here too, not with "nothing tuned" or after the tune.
  std::vector<Problem> problems;
  app.callback([&] {
    if (min_seqlen > max_seqlen)
      throw CLI::ValidationError("--min-seqlen", std::to_string(min_seqlen) + " is above --max-seqlen " +
                                                     std::to_string(max_seqlen) + ": no problem lies between them");
    for (const std::string& dname : dtypes)
      for (const Problem& p : standard_problems(dname == "fp16" ? DType::f16 : DType::bf16))
        if (p.seqlen_q >= min_seqlen && p.seqlen_q <= max_seqlen &&
            std::find(head_dims.begin(), head_dims.end(), p.head_dim) != head_dims.end())
          problems.push_back(p);
    if (problems.empty()) {
      std::string listed;
      for (std::int64_t n : standard_seqlens) listed += (listed.empty() ? "" : ", ") + std::to_string(n);
      throw CLI::ValidationError("--min-seqlen", "no standard problem has a seqlen from " + std::to_string(min_seqlen) +
                                                     " to --max-seqlen " + std::to_string(max_seqlen) +
                                                     " (the standard set's: " + listed + ")");
    }
    if (const std::string why = unwritable(out); !why.empty()) throw CLI::ValidationError("--out", out + ": " + why);
  });
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
    for (const Problem& p : problems) {
      DeviceCase device_case(make_random_inputs(p, seed_from_name(p.name())));
      device_case.reserve_workspace(FLASHSTEPS_STEP_NS::workspace_bytes(device_case.args()));  // step 09's counter
      const tuning::TuneEntry entry = tuner.tune(device_case.args(), nullptr, &std::cerr, 2, reps);
      table.insert(entry);
      std::printf("%-40s -> %s\n", entry.key.str().c_str(), entry.choice.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", FLASHSTEPS_STEP_TOOL, e.what());
    status = 1;
  }
  if (table.entries.empty()) {
    std::fprintf(stderr, "%s: no problem of the standard set was tuned (the first failed); %s is left as it was\n",
                 FLASHSTEPS_STEP_TOOL, out.c_str());
    return 1;
  }
  try {  // --out was writable before the tune; a folder that changed since still fails loudly
    table.save(out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s (%zu keys tuned, not saved)\n", FLASHSTEPS_STEP_TOOL, e.what(), table.entries.size());
    return 1;
  }
  std::printf("wrote %s (%zu keys)\n", out.c_str(), table.entries.size());
  return status;
}
