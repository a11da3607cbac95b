#!/usr/bin/env bash
# Step 10's decode session on a GPU machine, from the repository root, with a build folder
# carried there (built elsewhere with -DCMAKE_CUDA_ARCHITECTURES=90a and bundled with
# tools/gpu/bundle_runtime_libs.sh; targets test_step10, bench_step06, bench_step10):
#   1. test_step10, every test (GoogleTest JSON);
#   2. compute-sanitizer memcheck and racecheck on a few decode and forced-split cases;
#   3. the decode set (bf16 and fp16, D = 128 and 64) of steps 10 and 06 (bench_stepNN --set decode);
#   4. step 10's split sweep (bench_step10 --split-sweep) on three decode problems;
#   5. PyTorch SDPA on the same decode set (tools/baselines/sdpa_bench.py --set decode), when torch is there;
# then the tables of tools/results/ on what was measured. Everything goes to $OUT/decode-session/,
# packed at the end as $OUT/decode-session.tar.gz (the folder is removed; $OUT/decode-summary.txt
# is the console output): unpack it beside the repository and copy decode-session/results/ into
# results/ to publish (results/<gpu>/step10-decode.json, step06-decode.json,
# sdpa-*-decode.json, runs/step10-split-sweep/step10.json).
#
#   tools/gpu/decode_session.sh [BUILD_DIR]        (default build/h200; OUT defaults to /tmp/out)
#
# The whole session keeps to a time budget (FLASHSTEPS_SESSION_BUDGET seconds, default 360):
# each phase runs under `timeout` with the smaller of its own cap and what is left of the
# budget (less 20 s for the packing), and a phase that finds less than 15 s left is skipped and
# says so. Expected on an H200: about 5 minutes (tests 30 s, memcheck 45 s, racecheck 60 s, each
# decode set 45 s, the sweep 20 s, SDPA 50 s; the estimates are printed beside the times
# measured). Settings, all optional:
#   FLASHSTEPS_DECODE_MIN_TIME  seconds of calls per repetition (default 0.05)
#   FLASHSTEPS_DECODE_REPS      repetitions per benchmark, median reported (default 3)
#   FLASHSTEPS_DECODE_FILTER    --benchmark_filter of the decode sets (default: all 104 problems)
#   FLASHSTEPS_DECODE_STEPS     steps whose decode set is timed (default "10 06")
#   FLASHSTEPS_SWEEP_COUNTS     forced split counts (default 1,2,4,8,16,32,64,128,256)
#   FLASHSTEPS_SWEEP_FILTER     the sweep's problems (default bf16 D = 128 Hkv = 8: B = 1 at
#                               Nk = 4096 (64 key tiles: counts past them leave splits empty) and
#                               16384, B = 8 at Nk = 65536)
#   FLASHSTEPS_SDPA_WARMUP, FLASHSTEPS_SDPA_REPS   SDPA's untimed and timed calls (default 5, 20)
#   FLASHSTEPS_MEMCHECK_FILTER, FLASHSTEPS_RACECHECK_FILTER   gtest filters of the sanitizers
#   FLASHSTEPS_SKIP             phases to leave out, e.g. "sdpa racecheck"
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
build="${1:-build/h200}"
out="${OUT:-/tmp/out}"
work="$out/decode-session"
results="$work/results"
export PATH="/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="$PWD/$build/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
py="$(command -v "${FLASHSTEPS_DEVICE_PYTHON:-python3}")"
mkdir -p "$work" "$results"
start=$(date +%s)
deadline=$((start + ${FLASHSTEPS_SESSION_BUDGET:-360}))
status=0
summary="$work/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

# phase NAME CAP_S ESTIMATE_S LOG COMMAND...: runs COMMAND under timeout (the smaller of CAP_S
# and the budget left), its output in LOG; records the time beside the estimate.
phase() {
  local name=$1 cap=$2 estimate=$3 log=$4 left limit t0 rc
  shift 4
  if [[ " ${FLASHSTEPS_SKIP:-} " == *" $name "* ]]; then
    say "== $name: skipped (FLASHSTEPS_SKIP)"
    return 0
  fi
  left=$((deadline - $(date +%s) - 20))
  limit=$((cap < left ? cap : left))
  if [ "$limit" -lt 15 ]; then
    say "== $name: SKIPPED, out of time (${left} s of the budget left)"
    status=1
    return 0
  fi
  say "== $name (limit ${limit} s, expected about ${estimate} s)"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
  rc=$?
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && say "   TIMED OUT after ${limit} s"
  [ "$rc" -ne 0 ] && status=1
  say "   $name: exit $rc, $(($(date +%s) - t0)) s (log: ${log#"$out"/})"
  return 0
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,temperature.gpu --format=csv
  nvcc --version 2> /dev/null | tail -2
  echo "build: $build ($(strings "$build/bin/bench_step10" 2> /dev/null | grep -m1 -xE '[0-9a-f]{12}(-dirty)?'))"
  echo "host: $(nproc) CPU cores"
} > "$work/device.txt" 2>&1
tee -a "$summary" < "$work/device.txt"
for exe in test_step10 bench_step10 bench_step06; do
  [ -x "$build/bin/$exe" ] || say "missing: $build/bin/$exe (build it with -DCMAKE_CUDA_ARCHITECTURES=90a)"
done
# The driver and the clocks at start go into every benchmark file's context (as ./bench does).
if command -v nvidia-smi > /dev/null 2>&1; then
  IFS=', ' read -r driver sm_clock mem_clock < <(nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem \
    --format=csv,noheader,nounits | head -1) || true
fi
context="--benchmark_context=driver_version=${driver:-unknown},sm_clock_mhz_at_start=${sm_clock:-unknown},mem_clock_mhz_at_start=${mem_clock:-unknown}"

# 1. Every test of step 10: the conformance suite, the split matrix, the plan, the device draw.
phase tests 90 30 "$work/test_step10.log" \
  "$build/bin/test_step10" --gtest_brief=1 --gtest_output="json:$work/test_step10.json"
say "   $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$work/test_step10.log" 2> /dev/null | tr '\n' ' ')"
grep -A3 -E '^\[  FAILED  \]|Failure' "$work/test_step10.log" 2> /dev/null | head -20 | tee -a "$summary"

# 2. Sanitizers on decode and forced-split cases: G = 4 and 8, splits past the key tiles
# (empty splits), a causal top-left row whose later splits are all masked, chunked prefill on
# the prefill tile, no keys at all, the benchmark's GQA shape at the heuristic's count, and the
# huge-logit combine; memcheck also covers the harness's device draw.
cases='*/s5_b2_hq8_hkv2_nq1_nk1025_d128_fp16_*:*/s64_b2_hq16_hkv2_nq1_nk1025_d128_bf16_*'
cases+=':*/s40_b2_hq8_hkv2_nq16_nk1000_d64_bf16_causal_top_left_*:*/s4_b1_hq8_hkv2_nq128_nk1000_d128_*'
cases+=':*/s4_b1_hq8_hkv2_nq3_nk0_*:*/auto_b2_hq32_hkv8_nq1_nk2000_*:SplitKvHugeLogits.EqualLogits1e11*'
declare -A sanitizer_filter=([memcheck]="${FLASHSTEPS_MEMCHECK_FILTER:-$cases:Harness.*}"
                             [racecheck]="${FLASHSTEPS_RACECHECK_FILTER:-$cases}")
for tool in memcheck racecheck; do
  if command -v compute-sanitizer > /dev/null; then
    phase "$tool" 90 50 "$work/test_step10.$tool.log" \
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$build/bin/test_step10" --gtest_brief=1 \
      --gtest_filter="${sanitizer_filter[$tool]}"
    say "   $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$work/test_step10.$tool.log" 2> /dev/null | tail -1)" \
        "$(grep -E '^\[  (PASSED|FAILED) ' "$work/test_step10.$tool.log" 2> /dev/null | tr '\n' ' ')"
  else
    say "== $tool: compute-sanitizer not found"
    status=1
  fi
done

# 3. The decode set of each step: stepNN-decode.json under results/<gpu>/.
bench_args=(--set decode --min-time "${FLASHSTEPS_DECODE_MIN_TIME:-0.05}" --repetitions "${FLASHSTEPS_DECODE_REPS:-3}"
            --results-dir "$results" "$context")
[ -n "${FLASHSTEPS_DECODE_FILTER:-}" ] && bench_args+=("--benchmark_filter=$FLASHSTEPS_DECODE_FILTER")
for step in ${FLASHSTEPS_DECODE_STEPS:-10 06}; do
  phase "decode$step" 120 45 "$work/bench_step$step-decode.log" "$build/bin/bench_step$step" "${bench_args[@]}"
  tail -3 "$work/bench_step$step-decode.log" 2> /dev/null | tee -a "$summary"
done

# 4. The split sweep: each problem at the heuristic's count, then at every forced count.
sweep_filter="${FLASHSTEPS_SWEEP_FILTER:-decode/bf16/hd128/b(1/hq32/hkv8/nq1/nk(4096|16384)|8/hq32/hkv8/nq1/nk65536)/full}"
phase sweep 60 20 "$work/bench_step10-sweep.log" "$build/bin/bench_step10" \
  --split-sweep "${FLASHSTEPS_SWEEP_COUNTS:-1,2,4,8,16,32,64,128,256}" --benchmark_filter="$sweep_filter" \
  --min-time "${FLASHSTEPS_DECODE_MIN_TIME:-0.05}" --repetitions "${FLASHSTEPS_DECODE_REPS:-3}" \
  --results-dir "$results" "$context"
tail -2 "$work/bench_step10-sweep.log" 2> /dev/null | tee -a "$summary"

# 5. PyTorch SDPA (flash, cuDNN, efficient) on the decode set, commit recorded from the benchmarks.
if "$py" -c 'import torch' 2> /dev/null; then
  commit=$(strings "$build/bin/bench_step10" 2> /dev/null | grep -m1 -xE '[0-9a-f]{12}(-dirty)?')
  phase sdpa 120 50 "$work/sdpa_decode.log" env FLASHSTEPS_GIT_COMMIT="${FLASHSTEPS_GIT_COMMIT:-$commit}" \
    "$py" tools/baselines/sdpa_bench.py --set decode --warmup "${FLASHSTEPS_SDPA_WARMUP:-5}" \
    --reps "${FLASHSTEPS_SDPA_REPS:-20}" --results-dir "$results"
  grep -E '^results:|skipped:|^!' "$work/sdpa_decode.log" 2> /dev/null | head -12 | tee -a "$summary"
else
  say "== sdpa: no PyTorch for $py: skipped"
fi

# What was measured, as the results tools show it (standard library only; the figure needs
# matplotlib and is drawn only where it is installed).
gpu_dir=$(find "$results" -mindepth 1 -maxdepth 1 -type d | head -1)
if [ -n "$gpu_dir" ]; then
  decode_files=("$gpu_dir"/*-decode.json)
  [ -e "${decode_files[0]}" ] && timeout 60 "$py" tools/results/bench_summary.py "${decode_files[@]}" \
    > "$work/decode_summary.txt" 2>&1
  for kv in 8 32; do
    timeout 60 "$py" tools/results/results_table.py "$results" --decode-heads-kv "$kv" > "$work/decode_table_hkv$kv.md" 2>&1
  done
  timeout 60 "$py" tools/results/results_table.py "$results" --step 10 --baselines > "$work/step10_table.md" 2>&1
  sweep_dir="$gpu_dir/runs/step10-split-sweep"
  if [ -d "$sweep_dir" ]; then
    timeout 60 "$py" tools/results/plot_split_sweep.py "$sweep_dir" --table > "$work/split_sweep.md" 2>&1
    tee -a "$summary" < "$work/split_sweep.md"
    "$py" -c 'import matplotlib' 2> /dev/null &&
      timeout 60 "$py" tools/results/plot_split_sweep.py "$sweep_dir" -o "$work/split_sweep" > /dev/null 2>&1
  fi
  grep -E '^\| (Problem|B=)' "$work/decode_table_hkv8.md" | tee -a "$summary"
fi

say "decode session: $([ $status = 0 ] && echo OK || echo 'FAILURES or cuts (see above)'), $(($(date +%s) - start)) s in all"
cp "$summary" "$out/decode-summary.txt"
tar czf "$out/decode-session.tar.gz" -C "$out" decode-session && rm -rf "$work"
echo "packed: $out/decode-session.tar.gz"
exit $status
