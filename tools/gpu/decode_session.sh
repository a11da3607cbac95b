#!/usr/bin/env bash
# Step 10's decode session on a GPU machine, from the repository root, with a build folder
# carried there (built elsewhere with -DCMAKE_CUDA_ARCHITECTURES=90a and bundled with
# tools/gpu/bundle_runtime_libs.sh; targets test_step10, bench_step06, bench_step10).
#
#   tools/gpu/decode_session.sh [BUILD_DIR]        (default build/h200; OUT defaults to /tmp/out)
#
# Every benchmark run is small enough to write its JSON before a time limit can cut it: the
# decode set runs as one bench_stepNN per subset (dtype, D, Hkv: 12 decode problems and the
# chunked-prefill point each), with its own --benchmark_filter and results folder under
# decode-session/parts/, and the parts are merged at the end into decode-session/results/
# (tools/results/merge_bench_json.py: one step10-decode.json, step06-decode.json,
# sdpa-<backend>-decode.json and runs/step10-split-sweep/step10.json; a part cut by its limit
# is left out and named). The course's target points come first:
#    phase (FLASHSTEPS_SKIP name)     what                                        estimate
#    tests                            test_step10, every test (measured: 12 s)        15 s
#    decode10-bf16-hd128-hkv8         the targets: Hkv 8, Nk >= 4096, B 8 Nk 65536,
#                                     and the chunked-prefill point                   10 s
#    decode10-bf16-hd128-hkv32                                                        10 s
#    decode06-bf16-hd128-hkv8         step 06, the slow baseline (this subset only)   15 s
#    sdpa-bf16-hd128                  PyTorch SDPA, 3 backends, both Hkv              80 s
#    sweep-b1-nk16384, sweep-b8-nk65536, sweep-b1-nk4096
#                                     step 10's split sweep, 10 counts each      3 x 8 s
#    memcheck, racecheck, initcheck, synccheck
#                                     compute-sanitizer (measured: 2-4 s each)    4 x 5 s
#    decode10-fp16-hd128-hkv8, -hkv32                                            2 x 10 s
#    decode10-{bf16,fp16}-hd64-{hkv8,hkv32}                                      4 x 10 s
#    sdpa-fp16-hd128, sdpa-hd64                                                 70 + 140 s
#    merge, tables, packing                                                           15 s
#    in all                                                           about 460 s (8 min)
# The priority block (tests to the sweep) ends after about 155 s. SDPA is timed by the
# steps' loop (sdpa_bench.py's timed_calls(): the same warm-up, repetitions and --min-time), so
# each of its problems takes about 0.3 s of GPU time per backend, as a step's does, and
# more on the clock where Python queues calls slower than the GPU runs them (the GPU waits
# for it before each batch): the SDPA estimates are guesses until a run measures them. Until
# d9134eb SDPA took 25 calls per problem, and its three parts were estimated at 25, 20, 35 s. How the estimates follow
# from the run at 2e04100 (results/nvidia-h200/runs/step10-decode-2e04100.txt, budget 300 s):
# its benchmarks spent their time in Google Benchmark's loop, not in preparing or checking.
# Until bench_attention.cu timed one call per iteration (KeepRunningBatch), one iteration was
# one event pair of up to 64 calls reporting the time of one call, so --min-time 0.05 and the
# 0.05 s warm-up ran batch x 0.05 s of calls: about 0.3 s x batch per problem, 17 s at B = 1,
# Nk = 1024 (55 calls per pair). That accounts for 114 s of the 120 s in which step 10 printed
# 16 problems, and 108 s of step 06's 43. Now each problem takes about 0.3 s of calls (warm-up,
# the runs that size the iteration count, 3 repetitions of >= 0.05 s) plus about 0.3 s to
# draw, check (once per problem: prepare() caches it) and copy its inputs, and each run about
# 2 s to start: 13 problems, about 10 s. With binaries from before that change a subset takes
# about 90 s (the first gets a 120 s cap for that reason; the others would be cut).
#
# The whole session keeps to a time budget (FLASHSTEPS_SESSION_BUDGET seconds, default 480):
# each phase runs under `timeout` with the smaller of its own cap and what is left of the
# budget (less 30 s for the merge, the tables and the packing), and a phase that finds less
# than 15 s left is skipped and says so. Everything goes to $OUT/decode-session/, packed at the
# end as $OUT/decode-session.tar.gz (the folder is removed; $OUT/decode-summary.txt is the
# console output): unpack it beside the repository and copy decode-session/results/ into
# results/ to publish. Settings, all optional:
#   FLASHSTEPS_DECODE_MIN_TIME  seconds of calls per repetition (default 0.05)
#   FLASHSTEPS_DECODE_REPS      repetitions per benchmark, median reported (default 3)
#   FLASHSTEPS_DECODE_STEPS     steps whose decode set is timed (default "10 06")
#   FLASHSTEPS_DECODE10_SUBSETS step 10's subsets, <dtype>-hd<D>-hkv<Hkv>, bf16-hd128-* first
#                               whatever the order (default: all eight)
#   FLASHSTEPS_DECODE06_SUBSETS step 06's (default bf16-hd128-hkv8; "all": all eight)
#   FLASHSTEPS_DECODE_FILTER    instead of the subsets, one run per step with this filter
#   FLASHSTEPS_SWEEP_COUNTS     forced split counts (default 1,2,4,8,16,32,64,128,256)
#   FLASHSTEPS_SWEEP_PROBLEMS   the sweep's problems, one run each (default bf16 D = 128
#                               Hkv = 8: B = 1 at Nk = 16384, B = 8 at Nk = 65536, B = 1 at
#                               Nk = 4096, whose 64 key tiles leave splits past them empty)
#   FLASHSTEPS_SWEEP_FILTER     instead of those, one sweep run with this filter
#   FLASHSTEPS_SDPA_WARMUP   SDPA's untimed calls (default 5); it is timed by the steps' loop, --min-time and --repetitions as theirs
#   FLASHSTEPS_MEMCHECK_FILTER, FLASHSTEPS_RACECHECK_FILTER   gtest filters of the sanitizers
#   FLASHSTEPS_SKIP             phases to leave out, by name or group: e.g. "sdpa racecheck"
#                               leaves out every sdpa-* phase and racecheck; "decode06",
#                               "sweep", "decode10-fp16-hd64-hkv32", patterns like "*-hd64-*"
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
build="${1:-build/h200}"
out="${OUT:-/tmp/out}"
work="$out/decode-session"
results="$work/results"
parts="$work/parts"
export PATH="/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="$PWD/$build/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
py="$(command -v "${FLASHSTEPS_DEVICE_PYTHON:-python3}")"
rm -rf "$work"
mkdir -p "$work" "$results" "$parts"
start=$(date +%s)
deadline=$((start + ${FLASHSTEPS_SESSION_BUDGET:-480}))
reserve=30  # seconds kept for the merge, the tables and the packing
status=0
summary="$work/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
# A benchmark's console lines reach its log as they are printed (a cut run's log still shows them).
linebuf=(env)
command -v stdbuf > /dev/null 2>&1 && linebuf=(stdbuf -oL)

# skipped NAME: whether FLASHSTEPS_SKIP names the phase, its group (the words before a '-')
# or a pattern that matches it.
skipped() {
  local word
  for word in ${FLASHSTEPS_SKIP:-}; do
    # shellcheck disable=SC2053  # unquoted on purpose: a word may be a pattern
    [[ $1 == $word || $1 == $word-* ]] && return 0
  done
  return 1
}

# phase NAME CAP_S ESTIMATE_S LOG COMMAND...: runs COMMAND under timeout (the smaller of CAP_S
# and the budget left), its output in LOG; records the time beside the estimate.
phase() {
  local name=$1 cap=$2 estimate=$3 log=$4 left limit t0 rc
  shift 4
  if skipped "$name"; then
    say "== $name: skipped (FLASHSTEPS_SKIP)"
    return 0
  fi
  left=$((deadline - $(date +%s) - reserve))
  limit=$((cap < left ? cap : left))
  if [ "$limit" -lt 15 ]; then
    say "== $name: SKIPPED, out of time (${left} s of the budget left)"
    status=1
    return 0
  fi
  say "== $name (limit ${limit} s, expected about ${estimate} s; at $(($(date +%s) - start)) s)"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
  rc=$?
  { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && say "   TIMED OUT after ${limit} s"
  [ "$rc" -ne 0 ] && status=1
  say "   $name: exit $rc, $(($(date +%s) - t0)) s (log: ${log#"$out"/})"
  return 0
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  timeout 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,temperature.gpu --format=csv
  timeout 30 nvcc --version 2> /dev/null | tail -2
  echo "build: $build ($(strings "$build/bin/bench_step10" 2> /dev/null | grep -m1 -xE '[0-9a-f]{12}(-dirty)?'))"
  echo "host: $(nproc) CPU cores"
} > "$work/device.txt" 2>&1
tee -a "$summary" < "$work/device.txt"
for exe in test_step10 bench_step10 bench_step06; do
  [ -x "$build/bin/$exe" ] || say "missing: $build/bin/$exe (build it with -DCMAKE_CUDA_ARCHITECTURES=90a)"
done
# The driver and the clocks at start go into every benchmark file's context (as ./bench does).
if command -v nvidia-smi > /dev/null 2>&1; then
  IFS=', ' read -r driver sm_clock mem_clock < <(timeout 30 nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem \
    --format=csv,noheader,nounits | head -1) || true
fi
context="--benchmark_context=driver_version=${driver:-unknown},sm_clock_mhz_at_start=${sm_clock:-unknown},mem_clock_mhz_at_start=${mem_clock:-unknown}"
min_time="${FLASHSTEPS_DECODE_MIN_TIME:-0.05}"
reps="${FLASHSTEPS_DECODE_REPS:-3}"
part_no=0

# part NAME CAP_S ESTIMATE_S COMMAND... (the command's results folder: "$dir"): one run whose
# files land in its own folder under parts/, numbered in the order of the session.
part() {
  local name=$1 cap=$2 estimate=$3 dir
  shift 3
  part_no=$((part_no + 1))
  dir="$parts/$(printf %02d "$part_no")-$name"
  phase "$name" "$cap" "$estimate" "$work/$name.log" "$@" --results-dir "$dir"
  [ -f "$work/$name.log" ] && grep -iE '^results:|mismatch|error' "$work/$name.log" | tail -3 | tee -a "$summary"
  return 0
}

# decode_part STEP SUBSET CAP_S: one subset (<dtype>-hd<D>-hkv<Hkv>) of a step's decode set
# (STEP as in the binary's name: 10, 06).
decode_part() {
  local step=$1 subset=$2 cap=$3 dtype d hkv filter estimate=10
  if [ "$subset" = filter ]; then
    filter="$FLASHSTEPS_DECODE_FILTER"
  elif [[ $subset =~ ^(fp16|bf16)-hd([0-9]+)-hkv([0-9]+)$ ]]; then
    dtype=${BASH_REMATCH[1]} d=${BASH_REMATCH[2]} hkv=${BASH_REMATCH[3]}
    filter="^decode/$dtype/hd$d/b[0-9]+/hq[0-9]+/hkv$hkv/"
  else
    say "== decode$step-$subset: not a subset (<fp16|bf16>-hd<D>-hkv<Hkv>): skipped"
    status=1
    return 0
  fi
  [ "$step" = 06 ] && estimate=15
  part "decode$step-$subset" "$cap" "$estimate" "${linebuf[@]}" "$build/bin/bench_step$step" --set decode \
    --benchmark_filter="$filter" --min-time "$min_time" --repetitions "$reps" "$context"
}

all_subsets="bf16-hd128-hkv8 bf16-hd128-hkv32 fp16-hd128-hkv8 fp16-hd128-hkv32"
all_subsets+=" bf16-hd64-hkv8 bf16-hd64-hkv32 fp16-hd64-hkv8 fp16-hd64-hkv32"
# decode_parts STEP first|rest: the step's subsets of bf16 D = 128 (first) or the others (rest).
decode_parts() {
  local step=$1 which=$2 subsets subset cap=40
  [[ " ${FLASHSTEPS_DECODE_STEPS:-10 06} " == *" $step "* ]] || return 0
  if [ "$step" = 10 ]; then subsets="${FLASHSTEPS_DECODE10_SUBSETS:-$all_subsets}"; else subsets="${FLASHSTEPS_DECODE06_SUBSETS:-bf16-hd128-hkv8}"; fi
  [ "$subsets" = all ] && subsets="$all_subsets"
  if [ -n "${FLASHSTEPS_DECODE_FILTER:-}" ]; then
    [ "$which" = first ] && decode_part "$step" filter 120
    return 0
  fi
  for subset in $subsets; do
    [[ $subset == bf16-hd128-* ]] && [ "$which" = rest ] && continue
    [[ $subset == bf16-hd128-* ]] || [ "$which" = rest ] || continue
    # The first run gets room for binaries that still time batch x --min-time (see the header).
    [ "$part_no" -eq 0 ] && cap=120
    decode_part "$step" "$subset" "$cap"
    cap=40
  done
}

# sdpa_part NAME ESTIMATE_S ARGS...: PyTorch SDPA (flash, cuDNN, efficient) on part of the decode
# set, the commit recorded from the benchmarks; it writes its files after every problem.
sdpa_ok=0
if "$py" -c 'import torch' 2> /dev/null; then
  sdpa_ok=1
  commit=$(strings "$build/bin/bench_step10" 2> /dev/null | grep -m1 -xE '[0-9a-f]{12}(-dirty)?')
fi
sdpa_part() {
  local name=$1 estimate=$2
  shift 2
  if [ "$sdpa_ok" = 0 ]; then
    say "== $name: no PyTorch for $py: skipped"
    return 0
  fi
  part "$name" $((3 * estimate)) "$estimate" env FLASHSTEPS_GIT_COMMIT="${FLASHSTEPS_GIT_COMMIT:-$commit}" \
    "$py" tools/baselines/sdpa_bench.py --set decode "$@" --warmup "${FLASHSTEPS_SDPA_WARMUP:-5}" \
    --min-time "$min_time" --repetitions "$reps"
  grep -E 'skipped:|^!' "$work/$name.log" 2> /dev/null | head -6 | tee -a "$summary"
}

# 1. Every test of step 10: the conformance suite, the split matrix, the plan, the device draw.
phase tests 60 15 "$work/test_step10.log" \
  "$build/bin/test_step10" --gtest_brief=1 --gtest_output="json:$work/test_step10.json"
say "   $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$work/test_step10.log" 2> /dev/null | tr '\n' ' ')"
grep -A3 -E '^\[  FAILED  \]|Failure' "$work/test_step10.log" 2> /dev/null | head -20 | tee -a "$summary"

# 2. The targets: bf16 D = 128 of step 10 (Hkv = 8 with the chunked-prefill point first), of
# step 06 (Hkv = 8), and of SDPA.
decode_parts 10 first
decode_parts 06 first
sdpa_part sdpa-bf16-hd128 80 --dtype bf16 --head-dim 128

# 3. The split sweep, one run per problem: each at the heuristic's count, then at every forced count.
sweep_args=(--split-sweep "${FLASHSTEPS_SWEEP_COUNTS:-1,2,4,8,16,32,64,128,256}" --min-time "$min_time"
            --repetitions "$reps" "$context")
if [ -n "${FLASHSTEPS_SWEEP_FILTER:-}" ]; then
  part sweep 60 25 "${linebuf[@]}" "$build/bin/bench_step10" "${sweep_args[@]}" --benchmark_filter="$FLASHSTEPS_SWEEP_FILTER"
else
  for problem in ${FLASHSTEPS_SWEEP_PROBLEMS:-decode/bf16/hd128/b1/hq32/hkv8/nq1/nk16384/full \
      decode/bf16/hd128/b8/hq32/hkv8/nq1/nk65536/full decode/bf16/hd128/b1/hq32/hkv8/nq1/nk4096/full}; do
    shape=$(sed -E 's|^decode/.*/(b[0-9]+)/.*/(nk[0-9]+)/.*$|\1-\2|; s|[^A-Za-z0-9-]|_|g' <<< "$problem")
    part "sweep-$shape" 30 8 "${linebuf[@]}" "$build/bin/bench_step10" "${sweep_args[@]}" --benchmark_filter="^$problem"
  done
fi

# 4. Sanitizers on decode and forced-split cases: G = 4 and 8, splits past the key tiles
# (empty splits), a causal top-left row whose later splits are all masked, chunked prefill on
# the prefill tile, no keys at all, the benchmark's GQA shape at the heuristic's count, and the
# huge-logit combine; memcheck also covers the harness's device draw.
cases='*/s5_b2_hq8_hkv2_nq1_nk1025_d128_fp16_*:*/s64_b2_hq16_hkv2_nq1_nk1025_d128_bf16_*'
cases+=':*/s40_b2_hq8_hkv2_nq16_nk1000_d64_bf16_causal_top_left_*:*/s4_b1_hq8_hkv2_nq128_nk1000_d128_*'
cases+=':*/s4_b1_hq8_hkv2_nq3_nk0_*:*/auto_b2_hq32_hkv8_nq1_nk2000_*:SplitKvHugeLogits.EqualLogits1e11*'
# The four-warp decode tile with masked warps' slices, the D = 256 prefill tile with splits, and
# the combine kernel at kMaxSplits.
cases+=':*/s3_b2_hq8_hkv2_nq3_nk200_d128_*:*/s4_b1_hq8_hkv2_nq128_nk1000_d256_*:*/s256_b1_hq8_hkv2_nq1_nk777_d96_*'
# Calls back to back, each kernel a dependent launch of the one ahead (the second call reads the
# first's O and reuses its workspace).
cases+=':SplitKvStream.*'
# initcheck and synccheck take the filters of memcheck and racecheck (as gpu_session.sh does).
declare -A sanitizer_filter=([memcheck]="${FLASHSTEPS_MEMCHECK_FILTER:-$cases:Harness.*}"
                             [racecheck]="${FLASHSTEPS_RACECHECK_FILTER:-$cases}")
sanitizer_filter[initcheck]="${sanitizer_filter[memcheck]}"
sanitizer_filter[synccheck]="${sanitizer_filter[racecheck]}"
for tool in memcheck racecheck initcheck synccheck; do
  if skipped "$tool" || command -v compute-sanitizer > /dev/null; then
    phase "$tool" 45 5 "$work/test_step10.$tool.log" \
      compute-sanitizer --tool "$tool" --error-exitcode 3 "$build/bin/test_step10" --gtest_brief=1 \
      --gtest_filter="${sanitizer_filter[$tool]}"
    say "   $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$work/test_step10.$tool.log" 2> /dev/null | tail -1)" \
        "$(grep -E '^\[  (PASSED|FAILED) ' "$work/test_step10.$tool.log" 2> /dev/null | tr '\n' ' ')"
  else
    say "== $tool: compute-sanitizer not found"
    status=1
  fi
done

# 5. The rest of the decode set: fp16 D = 128, then D = 64, of step 10 (and of step 06 when
# FLASHSTEPS_DECODE06_SUBSETS asks), then of SDPA.
decode_parts 10 rest
sdpa_part sdpa-fp16-hd128 70 --dtype fp16 --head-dim 128
sdpa_part sdpa-hd64 140 --dtype bf16 fp16 --head-dim 64
decode_parts 06 rest

# 6. The parts merged, one file per name: results/<gpu>/step10-decode.json from every
# parts/*/<gpu>/step10-decode.json, in the order they ran; a part cut short is left out.
say "== merge (at $(($(date +%s) - start)) s)"
find "$parts" -name '*.json' -printf '%P\n' 2> /dev/null | sed -E 's|^[^/]+/||' | sort -u > "$work/merge.list"
while read -r rel; do
  inputs=("$parts"/*/"$rel")
  timeout 60 "$py" tools/results/merge_bench_json.py --skip-unreadable -o "$results/$rel" "${inputs[@]}" \
    > "$work/merge.log.tmp" 2>&1 || status=1
  sed "s|$work/||g" "$work/merge.log.tmp" | tee -a "$work/merge.log" "$summary"
done < "$work/merge.list"
rm -f "$work/merge.log.tmp"

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
else
  say "no results to merge"
  status=1
fi

say "decode session: $([ $status = 0 ] && echo OK || echo 'FAILURES or cuts (see above)'), $(($(date +%s) - start)) s in all"
cp "$summary" "$out/decode-summary.txt"
tar czf "$out/decode-session.tar.gz" -C "$out" decode-session && rm -rf "$work"
echo "packed: $out/decode-session.tar.gz"
exit $status
