// SPDX-License-Identifier: Apache-2.0
// The benchmark, written once and linked to every step (FLASHSTEPS_STEP_NS picks it).
//
// Benchmarks carry the same names in every step ("attention/bf16/hd128/n4096/causal"), so
// Google Benchmark's compare.py sets two steps' JSON side by side. Time is manual, from GPU
// events around each call (around a batch of back-to-back calls when one call is under 1 ms;
// one Google Benchmark iteration is one call, so --min-time counts seconds of calls on the
// GPU). A batch is queued behind a 0.5 ms GPU wait, as tools/baselines/sdpa_bench.py queues
// SDPA's calls behind torch.cuda._sleep, so that calls shorter than their host launch time are
// timed on the GPU, not on the host's launches. Each problem is first run once and
// spot-checked against the float64 reference (its errors are reported as counters), and the
// binary exits non-zero if any check fails. Inputs rotate over several copies when one set would sit in L2.
//
//   bench_stepNN [--results-dir DIR] [--set standard|decode|all] [--quick] [--max-seqlen N]
//                [--min-time S] [--num-splits N | --split-sweep 1,2,4,...] [--benchmark_* flags]
//
// --set decode times the decode set (decode_problems(): Nq = 1 against a K/V cache, and
// chunked prefill) instead of the standard set; its names start with "decode/" and its
// measure is GBps, the bytes of Q, K, V and O over the time (us_per_call beside it). Its
// inputs are drawn on the device (a B = 32, Nk = 65536 cache holds 17 G elements, minutes of
// host time) and checked on two (batch, KV head) slices drawn again on the host. With
// --results-dir it writes DIR/<gpu>/stepNN-decode.json, beside the standard set's stepNN.json.
// --num-splits N forces step 10's split count (it sets FLASHSTEPS_NUM_SPLITS; other steps
// ignore it) and records it in the JSON context. --split-sweep times every decode problem
// (pick them with --benchmark_filter) with the heuristic's count and then at each listed count,
// as "<decode name>/splits:<N>" (counters num_splits and heuristic_splits), for the split
// sweeps of chapter 10; with --results-dir it writes DIR/<gpu>/runs/stepNN-split-sweep/stepNN.json.
#include <benchmark/benchmark.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "flashsteps/commit.h"
#include "flashsteps/verify.h"
#include "flashsteps/fixture.h"
#include "flashsteps/harness.h"
#include "flashsteps/reference.h"
#include "flashsteps/step.h"
#ifdef FLASHSTEPS_BENCH_SPLIT_KV
#include "splits.h"  // the step splits the keys (step 10): its split counts become counters
#endif

namespace flashsteps {
namespace {

const StepFns kStep{&step::attention_forward, &step::workspace_bytes};
// How the decode set is drawn and checked (device_source()), recorded in the JSON context.
const char* const kDecodeCheck =
    "inputs drawn on the device (the values of make_random_inputs, bit for bit); O and LSE checked against the "
    "float64 reference on the (batch, KV head) slices (0, 0) and (B-1, Hkv-1), drawn again on the host, at the "
    "query rows of spot_check_rows()";
bool g_mismatch = false;  // any failed correctness check makes the binary exit non-zero
DeviceInfo g_device;

// Where a problem's inputs come from and how its output is checked: made by a benchmark's
// registration, used once by prepare(), then dropped (with any host copy of the inputs).
struct Source {
  Problem problem;
  std::function<std::unique_ptr<DeviceCase>()> make_case;  // one copy of the inputs on the device
  // The verdict on one output (DeviceCase::download(rows)) against the float64 reference.
  std::function<Verdict(const DeviceCase::Output&, const std::vector<std::int64_t>& rows)> check;
};

// Inputs drawn on the host (make_random_inputs(), the fixture) and uploaded; checked against
// the reference of the whole problem on the rows of spot_check_rows() (problem.h).
Source host_source(const std::shared_ptr<const HostInputs>& in) {
  Source s;
  s.problem = in->problem;
  s.make_case = [in] { return std::make_unique<DeviceCase>(*in); };
  s.check = [in](const DeviceCase::Output& out, const std::vector<std::int64_t>& rows) {
    const reference::Result ref = reference::run(*in, rows);
    return verify_output(in->problem, ref.o, ref.lse, out.o, out.lse, rows);
  };
  return s;
}

// The decode set's problems: inputs drawn on the device, the same values make_random_inputs()
// would draw (random.h), with no host copy. The check draws two (batch, KV head) slices again
// on the host, the first and the last (make_random_slice()), and compares their rows with the
// float64 reference of the slice: every query head of a KV head, both ends of the batch and
// head strides, at the cost of 2 / (B Hkv) of the whole problem's reference.
Source device_source(const Problem& p, std::uint64_t seed) {
  Source s;
  s.problem = p;
  s.make_case = [p, seed] { return std::make_unique<DeviceCase>(p, seed); };
  s.check = [p, seed](const DeviceCase::Output& out, const std::vector<std::int64_t>& rows) {
    std::vector<std::pair<std::int64_t, std::int64_t>> slices = {{0, 0}};
    if (p.batch > 1 || p.heads_kv > 1) slices.emplace_back(p.batch - 1, p.heads_kv - 1);
    Verdict v;
    for (std::size_t i = 0; i < slices.size(); ++i) {
      const auto [b, hk] = slices[i];
      const reference::Result ref = reference::run(make_random_slice(p, seed, b, hk), rows);
      const Verdict part = verify_slice(p, b, hk, ref.o, ref.lse, out.o, out.lse, rows);
      v = i == 0 ? part : worse_of(v, part);
    }
    return v;
  };
  return s;
}

// A problem that does not fit in the device's free memory: skipped, with the numbers.
struct TooLarge : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Device bytes of one copy of a problem's inputs and outputs (the step's workspace aside).
double problem_bytes(const Problem& p) {
  const ProblemLayout l = make_layout(p);
  const double elems = static_cast<double>(l.buffer_elems[0] + l.buffer_elems[1] + l.buffer_elems[2] + l.o_elems);
  return elems * static_cast<double>(dtype_size(p.dtype)) + 4.0 * static_cast<double>(p.batch * p.heads_q * p.seqlen_q);
}

// One problem made ready for timing; only one lives at a time (step 01's workspace alone
// can take tens of GB).
struct Prepared {
  std::string name;
  std::vector<std::unique_ptr<DeviceCase>> sets;  // rotated to defeat L2 reuse
  Verdict verdict;
  std::string skip;        // non-empty: why this problem is not timed
  double prepare_s = 0.0;  // host seconds to draw, upload, check and copy the inputs
  int batch = 0;           // calls per event pair, chosen at the first run (0: not yet)
};
std::unique_ptr<Prepared> g_prepared;

Prepared& prepare(const std::string& name, const std::function<Source()>& make_source) {
  if (g_prepared && g_prepared->name == name) return *g_prepared;
  g_prepared.reset();  // free the previous problem's device memory first
  const auto start = std::chrono::steady_clock::now();
  auto prep = std::make_unique<Prepared>();
  prep->name = name;
  try {
    Source source = make_source();
    const Problem& p = source.problem;
    const double needed = problem_bytes(p), free_bytes = static_cast<double>(vendor::free_device_bytes());
    if (needed > 0.9 * free_bytes) {
      char why[160];
      std::snprintf(why, sizeof why, "device memory: one copy of its inputs and outputs needs %.1f GB, %.1f GB are free",
                    needed / 1e9, free_bytes / 1e9);
      throw TooLarge(why);
    }
    prep->sets.push_back(source.make_case());
    const std::vector<std::int64_t> rows = spot_check_rows(p);
    const DeviceCase::Output out = run_once(*prep->sets[0], kStep, rows);
    prep->verdict = source.check(out, rows);
    std::string failure = prep->verdict.failure;
    if (out.unwritten > 0) failure += std::to_string(out.unwritten) + " output elements unwritten; ";
    if (!out.guards_intact) failure += "write outside a buffer; ";
    if (!failure.empty()) {
      g_mismatch = true;
      prep->skip = "MISMATCH against the float64 reference: " + failure;
    } else {
      // Rotate over enough copies that the inputs and output of consecutive calls exceed L2.
      const double bytes = attention_min_bytes(prep->sets[0]->args());
      const int copies = static_cast<int>(std::min(64.0, std::ceil(2.0 * g_device.l2_bytes / std::max(bytes, 1.0))));
      for (int c = 1; c < copies; ++c) {
        prep->sets.push_back(source.make_case());
        prep->sets.back()->reserve_workspace(step::workspace_bytes(prep->sets.back()->args()));
      }
    }
  } catch (const TooLarge& e) {
    prep->skip = e.what();
  } catch (const Unsupported& e) {
    prep->skip = std::string("unsupported by this step: ") + e.what();
  } catch (const std::exception& e) {
    g_mismatch = true;
    prep->skip = std::string("error: ") + e.what();
  }
  prep->prepare_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  g_prepared = std::move(prep);
  return *g_prepared;
}

// Spins one thread for @p ticks of clock64(): the GPU is busy while the host queues the calls
// behind it, so the first timed call starts with all of them queued.
__global__ void gpu_wait_kernel(long long ticks) {
  const long long start = clock64();
  while (clock64() - start < ticks) {
  }
}

// Ticks of clock64() per millisecond on the current device: NVIDIA counts SM cycles; AMD's
// counter has a rate of its own, the device attribute ClockInstructionRate (kHz).
long long wait_ticks_per_ms() {
#if FLASHSTEPS_VENDOR_HIP
  int device = 0, khz = 0;
  if (hipGetDevice(&device) != hipSuccess ||
      hipDeviceGetAttribute(&khz, hipDeviceAttributeClockInstructionRate, device) != hipSuccess || khz <= 0)
    khz = 100000;  // 100 MHz, a common rate
  return khz;
#else
  return static_cast<long long>(std::max(g_device.max_clock_mhz, 1000)) * 1000;  // at the peak clock
#endif
}

void run_benchmark(benchmark::State& state, const std::string& name, const std::function<Source()>& make_source) {
  Prepared& prep = prepare(name, make_source);
  if (!prep.skip.empty()) {
    state.SkipWithError(prep.skip.c_str());
    for (auto _ : state) {
    }
    return;
  }
  // Calls per event pair: enough for a pair to span about 1 ms, so each call is queued while
  // the previous one runs and its launch latency is hidden (as in real use), then the time per
  // call is the pair's interval divided by the count. Long problems get one call per pair.
  // Chosen once per problem, at its first run (Google Benchmark runs the function several
  // times: warm-up, the runs that size the iteration count, the repetitions).
  if (prep.batch == 0) {
    const AttentionArgs& a0 = prep.sets[0]->args();
    const std::vector<float> ms = time_with_events([&] { step::attention_forward(a0, nullptr); }, 1, 3);
    const double fastest_ms = std::max(1e-3, static_cast<double>(*std::min_element(ms.begin(), ms.end())));
    prep.batch = static_cast<int>(std::clamp(std::ceil(1.0 / fastest_ms), 1.0, 64.0));
  }
  const int batch = prep.batch;
  // One Google Benchmark iteration is one call: KeepRunningBatch(batch) runs the calls of one
  // event pair as that many iterations, and the pair's interval is their time. So --min-time
  // and the warm-up count seconds of calls on the GPU, and the reported time (manual time over
  // iterations) is the time per call.
  vendor::Event start = vendor::event_create(), stop = vendor::event_create();
  double total_s = 0.0;
  std::size_t call = 0;
  // 0.5 ms: a batch spans about 1 ms of calls, at most 64, so the host keeps ahead as long as
  // it launches a call at most 7.8 us slower than the GPU runs it.
  const long long wait_ticks = wait_ticks_per_ms() / 2;
  while (state.KeepRunningBatch(batch)) {
    if (batch > 1) {
      gpu_wait_kernel<<<1, 1>>>(wait_ticks);
      FLASHSTEPS_CHECK_LAUNCH("gpu_wait_kernel");
    }
    vendor::event_record(start, nullptr);
    for (int i = 0; i < batch; ++i) step::attention_forward(prep.sets[call++ % prep.sets.size()]->args(), nullptr);
    vendor::event_record(stop, nullptr);
    const double s = vendor::event_elapsed_ms(start, stop) / 1e3;
    state.SetIterationTime(s);
    total_s += s;
  }
  vendor::event_destroy(start);
  vendor::event_destroy(stop);
  const AttentionArgs& a = prep.sets[0]->args();
  const double mean_s = total_s / static_cast<double>(std::max<std::size_t>(call, 1));
  state.counters["calls_per_timing"] = batch;
  const double tflops = attention_flops(a) / mean_s / 1e12;
  state.counters["TFLOPS"] = tflops;
  state.counters["GBps"] = attention_min_bytes(a) / mean_s / 1e9;
  state.counters["us_per_call"] = mean_s * 1e6;
  if (g_device.peak_tc_tflops > 0) state.counters["pct_peak"] = 100.0 * tflops / g_device.peak_tc_tflops;
  state.counters["max_abs_err"] = prep.verdict.o.max_abs;
  state.counters["rel_fro_err"] = prep.verdict.o.rel_fro;
  state.counters["batch"] = static_cast<double>(a.batch());
  state.counters["heads_q"] = static_cast<double>(a.heads_q());
  state.counters["heads_kv"] = static_cast<double>(a.heads_kv());
  state.counters["seqlen_q"] = static_cast<double>(a.seqlen_q());
  state.counters["seqlen_k"] = static_cast<double>(a.seqlen_k());
  state.counters["head_dim"] = static_cast<double>(a.head_dim());
  state.counters["causal"] = a.mask == Mask::none ? 0.0 : 1.0;
  state.counters["prepare_s"] = prep.prepare_s;
#ifdef FLASHSTEPS_BENCH_SPLIT_KV
  const step::SplitPlan plan = step::plan_for_device(a);
  state.counters["num_splits"] = plan.num_splits;  // what the calls used: forced, or the heuristic's
  state.counters["heuristic_splits"] = step::heuristic_num_splits(a);
  state.counters["key_tiles"] = static_cast<double>(plan.key_tiles);  // the most splits that all see keys
#endif
}

// Sets the split count of the calls that follow (0: the heuristic's), for --split-sweep.
void force_splits(int num_splits) {
  if (num_splits > 0)
    setenv("FLASHSTEPS_NUM_SPLITS", std::to_string(num_splits).c_str(), 1);
  else
    unsetenv("FLASHSTEPS_NUM_SPLITS");
}

std::string slug(const std::string& name) {
  std::string s;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!s.empty() && s.back() != '-')
      s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s;
}

void add_context(const std::string& step_id) {
  const StepInfo si = step::info();
  benchmark::AddCustomContext("flashsteps_step", step_id.substr(4));
  benchmark::AddCustomContext("flashsteps_step_name", si.slug);
  benchmark::AddCustomContext("gpu_vendor", g_device.vendor);
  benchmark::AddCustomContext("gpu_name", g_device.name);
  benchmark::AddCustomContext("gpu_arch", g_device.arch);
  benchmark::AddCustomContext("sm_count", std::to_string(g_device.sm_count));
  benchmark::AddCustomContext("gpu_max_clock_mhz", std::to_string(g_device.max_clock_mhz));
  benchmark::AddCustomContext("gpu_mem_clock_mhz", std::to_string(g_device.mem_clock_mhz));
  benchmark::AddCustomContext("runtime_driver_version", g_device.driver);
  benchmark::AddCustomContext("runtime_version", g_device.runtime);
  benchmark::AddCustomContext("peak_tc_tflops", std::to_string(g_device.peak_tc_tflops));
  benchmark::AddCustomContext("l2_bytes", std::to_string(g_device.l2_bytes));
  benchmark::AddCustomContext("git_commit", FLASHSTEPS_GIT_COMMIT);
}

}  // namespace
}  // namespace flashsteps

int main(int argc, char** argv) {
  using namespace flashsteps;
  const std::string step_id = FLASHSTEPS_STRINGIFY(FLASHSTEPS_STEP_NS);
  CLI::App app{"FlashSteps benchmark of " + step_id + " (other flags go to Google Benchmark)"};
  app.allow_extras();
  std::string results_dir;
  bool quick = false;
  std::int64_t max_seqlen = 16384;
  app.add_option("--results-dir", results_dir,
                 "write JSON to DIR/<gpu>/" + step_id + ".json (" + step_id + "-decode.json with --set decode, runs/" +
                     step_id + "-split-sweep/" + step_id + ".json with --split-sweep)");
  app.add_flag("--quick", quick, "D = 128, bf16 and seqlen <= 4096 only, fewer repetitions");
  app.add_option("--max-seqlen", max_seqlen, "skip standard problems longer than this")->check(CLI::Range(1, 1 << 20));
  double min_time = 0.2;
  app.add_option("--min-time", min_time, "seconds of calls per repetition (the median of the repetitions is reported)")
      ->check(CLI::Validator(
          [](const std::string& value) {  // CLI::PositiveNumber lets nan through
            const double t = std::strtod(value.c_str(), nullptr);
            return t > 0.0 && std::isfinite(t) ? std::string{} : "must be a positive number of seconds, got " + value;
          },
          "POSITIVE"));
  int repetitions = 3;
  app.add_option("--repetitions", repetitions, "repetitions per benchmark, each of at least --min-time seconds of calls")
      ->check(CLI::Range(1, 100));
  std::string set = "standard";
  app.add_option("--set", set, "which problems: standard (the papers' set, the default), decode (Nq = 1 and chunked "
                               "prefill; with --quick bf16 D = 128 only) or all")
      ->check(CLI::IsMember({"standard", "decode", "all"}));
  int num_splits = 0;
  auto* num_splits_opt = app.add_option("--num-splits", num_splits, "step 10: force this split count (sets FLASHSTEPS_NUM_SPLITS)")
                             ->check(CLI::Range(1, 256));
  std::vector<int> sweep;
  app.add_option("--split-sweep", sweep,
                 "step 10: time the decode set (pick problems with --benchmark_filter) with the heuristic's split "
                 "count, then at each of these counts (e.g. 1,2,4,8), as <name>/splits:<N>")
      ->delimiter(',')
      ->check(CLI::Range(1, 256))
      ->excludes(num_splits_opt);
  CLI11_PARSE(app, argc, argv);
#ifndef FLASHSTEPS_BENCH_SPLIT_KV
  if (!sweep.empty()) {
    std::fprintf(stderr, "%s does not split the keys: --split-sweep is for step 10\n", step_id.c_str());
    return 2;
  }
#endif
  if (!sweep.empty()) set = "decode";
  if (num_splits > 0) setenv("FLASHSTEPS_NUM_SPLITS", std::to_string(num_splits).c_str(), 1);

  // Google Benchmark takes the flags CLI11 left, and reports any it does not know either.
  std::vector<std::string> args = {argv[0]};
  for (const std::string& extra : app.remaining()) args.push_back(extra);
  auto initialize_benchmark = [&args] {
    std::vector<char*> cargs;
    for (std::string& a : args) cargs.push_back(a.data());
    int bargc = static_cast<int>(cargs.size());
    benchmark::Initialize(&bargc, cargs.data());
    return !benchmark::ReportUnrecognizedArguments(bargc, cargs.data());
  };
  if (vendor::device_count() == 0) {
    if (!initialize_benchmark()) return 2;  // a misspelt flag fails without a GPU too
    std::printf("No GPU found by the %s runtime: %s benchmark not run.\n", vendor::kName, step_id.c_str());
    return 0;
  }
  g_device = device_info();
  std::string out_path;
  if (!results_dir.empty()) {
    auto dir = std::filesystem::path(results_dir) / slug(g_device.name);
    std::string file = step_id + ".json";
    if (!sweep.empty())
      dir = dir / "runs" / (step_id + "-split-sweep");  // a same-run set (tools/results: load_runs)
    else if (set == "decode")
      file = step_id + "-decode.json";  // beside the standard set's stepNN.json
    std::filesystem::create_directories(dir);
    out_path = (dir / file).string();
    args.push_back("--benchmark_out=" + out_path);
    args.push_back("--benchmark_out_format=json");
  }
  if (!initialize_benchmark()) return 2;
  reference::Runtime reference_runtime;
  add_context(step_id);
  benchmark::AddCustomContext("flashsteps_bench_set", set);
  if (const char* forced = std::getenv("FLASHSTEPS_NUM_SPLITS")) benchmark::AddCustomContext("flashsteps_num_splits", forced);
  if (!sweep.empty()) {
    std::string list;
    for (int n : sweep) list += (list.empty() ? "" : ",") + std::to_string(n);
    benchmark::AddCustomContext("flashsteps_split_sweep", list);
  }

  auto configure = [&](benchmark::internal::Benchmark* b) {
    // Each repetition runs at least min_time seconds of calls; the median is reported.
    b->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(quick ? 0.05 : min_time)->MinWarmUpTime(0.05)
        ->Repetitions(repetitions)->ReportAggregatesOnly(true);
  };
  const std::int64_t step_cap = step::info().bench_max_seqlen;
  const bool standard_set = set != "decode", decode_set = set != "standard";
  for (DType dtype : {DType::f16, DType::bf16}) {
    if ((quick && dtype == DType::f16) || !standard_set) continue;
    for (const Problem& p : standard_problems(dtype)) {
      if (p.seqlen_q > max_seqlen || (quick && (p.head_dim != 128 || p.seqlen_q > 4096))) continue;
      const std::string name = standard_name(p);
      const std::uint64_t seed = seed_from_name(name);
      if (step_cap > 0 && p.seqlen_q > step_cap) {  // registered, so the JSON says why it is missing
        const std::string why = "capped: step " + std::to_string(step::info().index) + " times seqlen <= " +
                                std::to_string(step_cap) + " only (seconds per call beyond)";
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
          s.SkipWithError(why.c_str());
          for (auto _ : s) {
          }
        })->Iterations(1);
        continue;
      }
      configure(benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
        run_benchmark(s, name, [=] { return host_source(std::make_shared<const HostInputs>(make_random_inputs(p, seed))); });
      }));
    }
  }
  // The decode set, its inputs drawn on the device (device_source()). With --split-sweep each
  // problem runs at the heuristic's count (its plain name), then at each forced count.
  if (decode_set) benchmark::AddCustomContext("flashsteps_decode_check", kDecodeCheck);
  for (DType dtype : {DType::f16, DType::bf16}) {
    if (!decode_set || (quick && dtype == DType::f16)) continue;
    for (const Problem& p : decode_problems(dtype)) {
      if (quick && p.head_dim != 128) continue;
      const std::string base = decode_name(p);
      const std::uint64_t seed = seed_from_name(base);  // the same inputs at every split count
      std::vector<int> counts = {0};                     // 0: whatever FLASHSTEPS_NUM_SPLITS or the heuristic says
      counts.insert(counts.end(), sweep.begin(), sweep.end());
      for (int count : counts) {
        const std::string name = count == 0 ? base : base + "/splits:" + std::to_string(count);
        const bool sweeping = !sweep.empty();
        configure(benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
          if (sweeping) force_splits(count);
          run_benchmark(s, name, [=] { return device_source(p, seed); });
        }));
      }
    }
  }
  // Real activations: every layer and head of all-MiniLM-L6-v2 in one call (batch = layers).
  std::string fixture_path;
  try {
    if (standard_set) fixture_path = default_fixture_path();
  } catch (const InvalidArgument& e) {
    std::fprintf(stderr, "%s\n", e.what());
  }
  if (!fixture_path.empty()) {
    configure(benchmark::RegisterBenchmark("minilm/fp16/layers6", [=](benchmark::State& s) {
      run_benchmark(s, "minilm/fp16/layers6", [=] {
        return host_source(std::make_shared<const HostInputs>(fixture_inputs(load_qkv_fixture(fixture_path), DType::f16)));
      });
    }));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_prepared.reset();
  if (!out_path.empty()) std::printf("results: %s\n", out_path.c_str());
  if (g_mismatch) std::fprintf(stderr, "%s: at least one problem failed its check against the reference\n", step_id.c_str());
  return g_mismatch ? 1 : 0;
}
