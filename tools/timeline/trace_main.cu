// SPDX-License-Identifier: Apache-2.0
// trace_stepNN: one call of a Hopper step with its trace calls compiled in (trace_sm90.h), and
// the phase marks of one of its blocks written as JSON, for tools/timeline/plot_timeline.py:
//
//   trace_step08 --dtype bf16 --head-dim 128 --seqlen 8192 [--causal] [--block B] --out trace.json
//
// Built for a step by flashsteps_add_trace_tool() (cmake/FlashStepsSteps.cmake, called from the
// step's step.cmake) when CMake is configured with -DFLASHSTEPS_TRACE=ON. This file includes the
// step's own step.cu (its folder is on the include path) with FLASHSTEPS_TRACE defined: the
// kernel traced is the step's kernel with its marks switched on, compiled with the step's
// options, and the trace buffer (sm90::g_trace) is a symbol of this translation unit.
//
// The problem is the benchmark's: the standard set's shape (batch = 16384 / seqlen, heads =
// 2048 / head_dim, BSHD, bottom-right causal mask) and the same random inputs. The step is
// called a few times untraced (warm-up, then timed), then timed with the trace armed, then,
// after a flush of L2, once more armed: that call's output is checked against the float64
// reference on the benchmark's rows of every head (a traced kernel must compute what the step computes)
// and its marks are written out. Exit status: 0 when the trace is written and the check
// passed, 1 otherwise.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#ifndef FLASHSTEPS_TRACE
#error "trace_main.cu is built with FLASHSTEPS_TRACE (flashsteps_add_trace_tool in cmake/FlashStepsSteps.cmake)"
#endif
#include "step.cu"  // the step itself, its trace calls compiled in

#include "flashsteps/commit.h"
#include "flashsteps/harness.h"
#include "flashsteps/problem.h"
#include "flashsteps/reference.h"
#include "flashsteps/verify.h"

namespace flashsteps {
namespace {

using Json = nlohmann::ordered_json;

// Which block records: kTraceMiddleBlock, kTraceNoBlock or a block index.
void request_block(std::int32_t block) {
  FLASHSTEPS_CHECK(cudaMemcpyToSymbol(sm90::g_trace_request, &block, sizeof block));
}

// Clears the header and the lanes (the records are overwritten, and read only up to a count).
void clear_trace() {
  const auto empty = std::make_unique<sm90::TraceBuffer>();  // 1 MiB: not on the stack
  empty->block = -1;
  FLASHSTEPS_CHECK(cudaMemcpyToSymbol(sm90::g_trace, empty.get(), offsetof(sm90::TraceBuffer, records)));
}

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::string utc_now() {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

// The SM clock the block ran at, from the lane with the longest span between its start and
// stop (cycles of %clock64 over nanoseconds of %globaltimer); the maximum clock when no lane
// ran long enough for the timer's ticks (32 ns or more) to be negligible.
Json clock_of(const sm90::TraceBuffer& t, int max_clock_mhz) {
  std::uint64_t best_ns = 0, best_cycles = 0;
  for (const sm90::TraceLane& lane : t.lanes)
    if (lane.stop_cycles > lane.start_cycles && lane.stop_ns > lane.start_ns && lane.stop_ns - lane.start_ns > best_ns)
      best_ns = lane.stop_ns - lane.start_ns, best_cycles = lane.stop_cycles - lane.start_cycles;
  Json c;
  c["source"] = "clock64";
  c["max_clock_mhz"] = max_clock_mhz;
  if (best_ns >= 20000) {
    c["cycles_per_us"] = 1000.0 * static_cast<double>(best_cycles) / static_cast<double>(best_ns);
    c["cycles_per_us_from"] = "globaltimer over the longest lane (" + std::to_string(best_ns / 1000) + " us)";
  } else {
    c["cycles_per_us"] = static_cast<double>(max_clock_mhz);
    c["cycles_per_us_from"] = "the maximum SM clock (no lane ran 20 us, too short to measure the clock)";
  }
  return c;
}

// The lanes that recorded, cycles relative to the earliest lane's start.
Json lanes_of(const sm90::TraceBuffer& t, std::uint64_t& dropped_total) {
  std::uint64_t t0 = 0;
  bool any = false;
  for (const sm90::TraceLane& lane : t.lanes)
    if (lane.start_cycles != 0 && (!any || lane.start_cycles < t0)) t0 = lane.start_cycles, any = true;
  Json lanes = Json::array();
  for (int wg = 0; wg < sm90::kTraceLanes; ++wg) {
    const sm90::TraceLane& lane = t.lanes[wg];
    if (lane.start_cycles == 0) continue;  // this warpgroup does not exist or did not record
    const std::uint32_t written = std::min(lane.count, sm90::kTraceCapacity);
    Json l;
    l["warpgroup"] = wg;
    l["role"] = wg == 0 ? std::string("producer") : "consumer " + std::to_string(wg - 1);
    l["sm"] = lane.smid;
    l["start"] = lane.start_cycles - t0;
    l["stop"] = lane.stop_cycles == 0 ? Json(nullptr) : Json(lane.stop_cycles - t0);
    l["marks"] = lane.count;
    l["dropped"] = lane.count - written;
    dropped_total += lane.count - written;
    Json events = Json::array();
    for (std::uint32_t i = 0; i < written; ++i) {
      const sm90::TraceRecord& r = t.records[wg][i];
      events.push_back(Json::array({static_cast<std::int64_t>(r.cycles - t0),
                                    sm90::trace_phase_name(static_cast<sm90::TracePhase>(r.phase)),
                                    r.edge == sm90::kTraceEnd ? "end" : "begin", r.tile}));
    }
    l["events"] = std::move(events);
    lanes.push_back(std::move(l));
  }
  return lanes;
}

// The document indented, but each lane's events one to a line (thousands of them).
std::string dump(Json doc) {
  std::vector<std::string> events;
  for (Json& lane : doc["lanes"]) {
    std::string text = "[";
    for (const Json& event : lane["events"]) text += (text.size() > 1 ? ",\n    " : "\n    ") + event.dump();
    events.push_back(text + (text.size() > 1 ? "\n   ]" : "]"));
    lane["events"] = "@events" + std::to_string(events.size() - 1) + "@";
  }
  std::string text = doc.dump(1);
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::string placeholder = "\"@events" + std::to_string(i) + "@\"";
    text.replace(text.find(placeholder), placeholder.size(), events[i]);
  }
  return text;
}

// The command line.
struct Options {
  std::string dtype = "bf16", out;
  int head_dim = 128, warmup = 3, reps = 5;
  std::int64_t seqlen = 8192, batch = 0, heads = 0;  // batch, heads 0: the standard set's
  bool causal = false;
  std::int32_t block = sm90::kTraceMiddleBlock;
};

// One traced call and its JSON (see the top of this file); returns the exit status.
int run_trace(const Options& o, const std::string& step_id, const std::string& command) {
  const std::string& dtype_arg = o.dtype;
  const std::string& out = o.out;
  const int head_dim = o.head_dim, warmup = o.warmup, reps = o.reps;
  const std::int64_t seqlen = o.seqlen, batch = o.batch, heads = o.heads;
  const bool causal = o.causal;
  const std::int32_t block = o.block;

  reference::Runtime reference_runtime;
  Problem p;
  p.dtype = dtype_arg == "fp16" ? DType::f16 : DType::bf16;
  p.head_dim = head_dim;
  p.seqlen_q = p.seqlen_k = seqlen;
  p.batch = batch > 0 ? batch : std::max<std::int64_t>(1, 16384 / seqlen);
  p.heads_q = p.heads_kv = heads > 0 ? heads : std::max<std::int64_t>(1, 2048 / head_dim);
  p.mask = causal ? Mask::causal_bottom_right : Mask::none;
  p.layout = Layout::bshd;
  p.with_lse = true;
  // The benchmark's name, and so its inputs (bench/bench_attention.cu seeds from the name).
  const std::string name = standard_name(p);
  const DeviceInfo dev = device_info();
  const HostInputs inputs = make_random_inputs(p, seed_from_name(name));
  DeviceCase device_case(inputs);
  device_case.reserve_workspace(step::workspace_bytes(device_case.args()));
  const AttentionArgs& args = device_case.args();
  auto call = [&] { step::attention_forward(args, nullptr); };

  // Untraced: warm-up and the time per call; then the same with the trace armed (only one
  // block records, so the call's time should barely move: the check that the marks are cheap).
  request_block(sm90::kTraceNoBlock);
  const std::vector<float> untraced_ms = time_with_events(call, warmup, reps);
  request_block(block);
  clear_trace();
  const std::vector<float> traced_ms = time_with_events(call, 0, reps);

  // The traced call whose marks are kept, checked against the reference on the benchmark's
  // rows (spot_check_rows(): five per head on large problems, all on small ones).
  // L2 is flushed first: the benchmark rotates over copies of the inputs, so none of its calls
  // finds them cached by the call before.
  DeviceBuffer flush(2 * dev.l2_bytes);
  FLASHSTEPS_CHECK(cudaMemset(flush.data(), 0, flush.size()));
  clear_trace();
  const std::vector<std::int64_t> rows = spot_check_rows(p);
  const DeviceCase::Output result = run_once(device_case, {&step::attention_forward, &step::workspace_bytes}, rows);
  auto trace = std::make_unique<sm90::TraceBuffer>();
  FLASHSTEPS_CHECK(cudaMemcpyFromSymbol(trace.get(), sm90::g_trace, sizeof(sm90::TraceBuffer)));
  request_block(sm90::kTraceNoBlock);
  const reference::Result ref = reference::run(inputs, rows);
  const Verdict verdict = verify_output(p, ref.o, ref.lse, result.o, result.lse, rows);
  std::string failure = verdict.failure;
  if (result.unwritten > 0) failure += std::to_string(result.unwritten) + " output elements unwritten; ";
  if (!result.guards_intact) failure += "write outside a buffer; ";
  if (trace->block < 0) {
    std::fprintf(stderr, "trace_%s: no block recorded (--block %d: is it below the grid's block count?)\n",
                 step_id.c_str(), block);
    return 1;
  }

  const StepInfo si = step::info();
  Json doc;
  doc["format"] = "flashsteps-timeline";
  doc["version"] = 1;
  doc["step"] = step_id.substr(4);
  doc["step_name"] = si.slug;
  doc["meta"] = {{"command", command},
                 {"date", utc_now()},
                 {"git_commit", FLASHSTEPS_GIT_COMMIT},
                 {"gpu_name", dev.name},
                 {"gpu_arch", dev.arch},
                 {"sm_count", dev.sm_count},
                 {"gpu_max_clock_mhz", dev.max_clock_mhz},
                 {"gpu_mem_clock_mhz", dev.mem_clock_mhz},
                 {"runtime_driver_version", dev.driver},
                 {"runtime_version", dev.runtime},
                 {"nvcc_version", std::to_string(__CUDACC_VER_MAJOR__) + "." + std::to_string(__CUDACC_VER_MINOR__)}};
  doc["problem"] = {{"name", name},
                    {"dtype", dtype_name(p.dtype)},
                    {"batch", p.batch},
                    {"heads_q", p.heads_q},
                    {"heads_kv", p.heads_kv},
                    {"seqlen_q", p.seqlen_q},
                    {"seqlen_k", p.seqlen_k},
                    {"head_dim", p.head_dim},
                    {"causal", causal},
                    {"mask", mask_name(p.mask)},
                    {"layout", layout_name(p.layout)}};
  doc["launch"] = {{"grid", trace->grid},
                   {"threads", trace->threads},
                   {"warpgroups", trace->threads / sm90::kWarpgroupThreads},
                   {"dynamic_smem_bytes", trace->smem_bytes},
                   {"block_m", trace->block_m},
                   {"block_n", trace->block_n},
                   {"stages", trace->stages}};
  doc["traced_block"] = trace->block;
  doc["clock"] = clock_of(*trace, dev.max_clock_mhz);
  doc["check"] = {{"passed", failure.empty()},
                  {"failure", failure},
                  {"rows_per_head", rows.empty() ? static_cast<std::size_t>(seqlen) : rows.size()},
                  {"max_abs_err", verdict.o.max_abs},
                  {"rel_fro_err", verdict.o.rel_fro}};
  doc["timing"] = {{"untraced_ms", median(untraced_ms)}, {"traced_ms", median(traced_ms)}, {"reps", reps}};
  doc["event_fields"] = {"cycles", "phase", "edge", "tile"};
  std::uint64_t dropped = 0;
  doc["lanes"] = lanes_of(*trace, dropped);
  std::ofstream file(out);
  file << dump(doc) << "\n";
  if (!file.flush()) throw std::runtime_error("could not write " + out);

  const double cycles_per_us = doc["clock"]["cycles_per_us"].get<double>();
  std::printf("%s %s: block %d of %u (SM %u), %zu lanes, %.1f MHz (%s)\n", step_id.c_str(), name.c_str(),
              trace->block, trace->grid, trace->lanes[0].smid, doc["lanes"].size(), cycles_per_us,
              doc["clock"]["cycles_per_us_from"].get<std::string>().c_str());
  for (const Json& l : doc["lanes"]) {
    const double span = l["stop"].is_null() ? 0.0 : (l["stop"].get<double>() - l["start"].get<double>()) / cycles_per_us;
    std::printf("  %-11s %6u marks, %8.2f us%s\n", l["role"].get<std::string>().c_str(), l["marks"].get<unsigned>(),
                span, l["dropped"].get<unsigned>() > 0 ? " (records dropped: the buffer is full)" : "");
  }
  std::printf("  call: %.3f ms untraced, %.3f ms traced (median of %d); check %s\n", median(untraced_ms),
              median(traced_ms), reps, failure.empty() ? "passed" : ("FAILED: " + failure).c_str());
  if (dropped > 0) std::fprintf(stderr, "trace_%s: %llu marks dropped (kTraceCapacity)\n", step_id.c_str(),
                                static_cast<unsigned long long>(dropped));
  std::printf("wrote %s\n", out.c_str());
  return failure.empty() ? 0 : 1;
}

}  // namespace
}  // namespace flashsteps

int main(int argc, char** argv) {
  using namespace flashsteps;
  const std::string step_id = FLASHSTEPS_STRINGIFY(FLASHSTEPS_STEP_NS);
  CLI::App app{"One traced call of " + step_id + ": per-warpgroup phase marks of one block, as JSON"};
  Options o;
  o.out = step_id + "_trace.json";
  app.add_option("--dtype", o.dtype, "element type")->check(CLI::IsMember({"bf16", "fp16"}));
  app.add_option("--head-dim", o.head_dim, "head_dim")->check(CLI::Range(1, 1024));
  app.add_option("--seqlen", o.seqlen, "seqlen_q = seqlen_k")->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  app.add_flag("--causal", o.causal, "bottom-right causal mask (default: none)");
  app.add_option("--batch", o.batch, "batch (default: the standard set's, max(1, 16384 / seqlen))")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20));
  app.add_option("--heads", o.heads, "heads_q = heads_kv (default: the standard set's, max(1, 2048 / head_dim))")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20));
  app.add_option("--block", o.block, "blockIdx.x to trace (default: the middle block of the grid, gridDim.x / 2)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--warmup", o.warmup, "untraced calls before the timed ones")->check(CLI::Range(0, 100));
  app.add_option("--reps", o.reps, "timed calls, untraced and traced (median)")->check(CLI::Range(1, 1000));
  app.add_option("--out", o.out, "JSON file to write");
  CLI11_PARSE(app, argc, argv);
  if (vendor::device_count() == 0) {
    std::fprintf(stderr, "No GPU found by the %s runtime: nothing traced.\n", vendor::kName);
    return 1;
  }
  std::string command = "trace_" + step_id;
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  try {
    return run_trace(o, step_id, command);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_%s: %s\n", step_id.c_str(), e.what());
    return 1;
  }
}
