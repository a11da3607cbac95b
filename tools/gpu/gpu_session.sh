#!/usr/bin/env bash
# One full session on a GPU machine, from the repository root, with a build folder already
# there (built here or copied with its bundled libraries, see tools/gpu/bundle_runtime_libs.sh):
# device description, every step's GPU tests, compute-sanitizer (memcheck, racecheck, initcheck,
# synccheck) on a subset, then the
# benchmark of every step. Logs and JSON go to OUTDIR, packed as OUTDIR.tar.gz at the end.
#   tools/gpu/gpu_session.sh [BUILD_DIR] [OUTDIR] [extra ./bench arguments...]
# Every command that can touch the GPU runs under `timeout`, so a hung kernel or driver call
# ends its phase, not the session: the short queries (nvcc, nvidia-smi, PyTorch's device
# probes) after FLASHSTEPS_PROBE_TIMEOUT seconds (60), the others after their own limits below.
set -uo pipefail
probe="${FLASHSTEPS_PROBE_TIMEOUT:-60}"
build="${1:-build/cuda}"
outdir="${2:-gpu-session}"
shift 2 2>/dev/null || shift $#
mkdir -p "$outdir"
export LD_LIBRARY_PATH="$build/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  timeout "$probe" nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,temperature.gpu --format=csv
  timeout "$probe" nvcc --version | tail -2
} > "$outdir/device.txt" 2>&1
timeout "$probe" nvidia-smi -q > "$outdir/nvidia-smi-q.txt" 2>&1
cat "$outdir/device.txt"
status=0
# FLASHSTEPS_TEST_STEPS="04 05" limits the GPU tests (and sanitizers) to those steps, read as
# cmake/bench.in (./bench) reads FLASHSTEPS_BENCH_STEPS: the make targets' spelling is taken
# too ("6 4a" is "06 04a"). Naming no test binary of the build fails the session.
built_tests=() wanted=() unknown=()
for t in "$build"/bin/test_step*; do [ -x "$t" ] && built_tests+=("${t##*test_step}"); done
read -r -a words <<< "${FLASHSTEPS_TEST_STEPS:-}"
for word in ${words[@]+"${words[@]}"}; do
  if [[ $word =~ ^[0-9][a-z]?$ ]]; then word="0$word"; fi
  wanted+=("$word")
  if [[ " ${built_tests[*]} " != *" $word "* ]]; then unknown+=("$word"); fi
done
if [ ${#wanted[@]} -gt 0 ] && [ ${#unknown[@]} -eq ${#wanted[@]} ]; then
  echo "FLASHSTEPS_TEST_STEPS=\"$FLASHSTEPS_TEST_STEPS\" names no test binary in $build/bin (there: ${built_tests[*]:-none}): nothing tested"
  status=1
elif [ ${#unknown[@]} -gt 0 ]; then
  echo "FLASHSTEPS_TEST_STEPS: ${unknown[*]}: no test binary in $build/bin; testing the others"
fi
selected() { [ ${#wanted[@]} -eq 0 ] || [[ " ${wanted[*]} " == *" ${1##*test_step} "* ]]; }
# The SASS of the tensor-core steps must hold HMMA (tensor-core MMA) instructions: counted
# per step from the sm_90a cubin of each test binary (cuobjdump -sass).
if command -v cuobjdump > /dev/null && [ "${FLASHSTEPS_SASS:-1}" = 1 ]; then
  for t in "$build"/bin/test_step0[4-9]*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    cuobjdump -sass -arch sm_90a "$t" > "$outdir/$name.sass" 2>/dev/null
    echo "$name SASS (sm_90a): $(grep -c 'HMMA\.16816\.F32\.BF16' "$outdir/$name.sass") HMMA.16816.F32.BF16, $(grep -c 'HMMA\.16816\.F32 ' "$outdir/$name.sass") HMMA.16816.F32 (fp16), $(grep -c 'LDSM' "$outdir/$name.sass") LDSM, $(grep -c 'LDGSTS' "$outdir/$name.sass") LDGSTS, $(grep -c 'HGMMA' "$outdir/$name.sass") HGMMA, $(grep -c 'UTMALDG' "$outdir/$name.sass") UTMALDG, $(grep -c 'SYNCS' "$outdir/$name.sass") SYNCS" | tee -a "$outdir/sass.txt"
    gzip -f "$outdir/$name.sass"
  done
fi
# FLASHSTEPS_TESTS=0 skips the GPU tests (a benchmark-only call), as FLASHSTEPS_<TOOL>=0 does a
# sanitizer below.
for t in "$build"/bin/test_step*; do
  [ "${FLASHSTEPS_TESTS:-1}" = 1 ] || break
  [ -x "$t" ] || continue  # a bundle without tests (benchmarks only)
  selected "$t" || continue
  name=$(basename "$t")
  timeout "${FLASHSTEPS_TEST_TIMEOUT:-300}" "$t" --gtest_brief=1 --gtest_output="json:$outdir/$name.json" > "$outdir/$name.log" 2>&1 || status=1
  echo "$name: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$outdir/$name.log" | tr '\n' ' ')"
  grep -A3 -E '^\[  FAILED  \]|Failure' "$outdir/$name.log" | head -40
done
# compute-sanitizer on a subset of each step's tests: sanitize TOOL SWITCH FILTER FIRST_STEP.
# memcheck (out-of-bounds and misaligned accesses) and initcheck (reads of uninitialised
# device memory) from step 01 on, racecheck (shared-memory hazards) and synccheck (barriers and
# warp-synchronous operations used wrongly) from step 02 on; the race subset includes every
# configuration of step 06 (EveryConfiguration) on two problems, one with more keys than
# queries and one with more queries (bottom-right, so the 64-row shapes have blocks that see
# no key and copy no Q), and every shape of step 09 on a problem of several work tiles per
# block (EveryShape, 830 rows), where step 09's blocks hand work tiles over through shared
# memory. FLASHSTEPS_<TOOL>=0 skips a tool.
memcheck_filter="${FLASHSTEPS_MEMCHECK_FILTER:-*nq17_nk100*:*nq257_nk130*:*packed_qkv*:*hq32_hkv8*}"
racecheck_filter="${FLASHSTEPS_RACECHECK_FILTER:-*nq130_nk257*bf16*:*nq17_nk100*:*EveryConfiguration*nq130_nk257*:*EveryConfiguration*nq257_nk130*:*EveryShape*_nq830_nk830_*}"
sanitize() {
  local tool=$1 enabled=$2 filter=$3 first=$4 t name
  command -v compute-sanitizer > /dev/null && [ "$enabled" = 1 ] || return 0
  for t in "$build"/bin/test_step*; do
    name=$(basename "$t")
    [ -x "$t" ] && [ "${name#test_step}" \> "$(printf '%02d' $((10#$first - 1)))" ] || continue
    selected "$t" || continue
    timeout "${FLASHSTEPS_SANITIZER_TIMEOUT:-600}" compute-sanitizer --tool "$tool" --error-exitcode 3 "$t" \
      --gtest_brief=1 --gtest_filter="$filter" > "$outdir/$name.$tool.log" 2>&1 || status=1
    echo "$name $tool: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$outdir/$name.$tool.log" | tail -1)"
  done
}
sanitize memcheck "${FLASHSTEPS_MEMCHECK:-1}" "$memcheck_filter" 01
sanitize initcheck "${FLASHSTEPS_INITCHECK:-1}" "$memcheck_filter" 01
sanitize racecheck "${FLASHSTEPS_RACECHECK:-1}" "$racecheck_filter" 02
sanitize synccheck "${FLASHSTEPS_SYNCCHECK:-1}" "$racecheck_filter" 02
# Roofline ceilings: fp32 FMA rate and copy bandwidth (ours), dense bf16 GEMM (PyTorch, optional),
# each bounded by FLASHSTEPS_CEILINGS_TIMEOUT seconds (300).
if [ "${FLASHSTEPS_CEILINGS:-1}" = 1 ]; then
  if [ -x "$build/bin/ceilings" ]; then
    timeout "${FLASHSTEPS_CEILINGS_TIMEOUT:-300}" "$build/bin/ceilings" "$outdir/ceilings.json" > "$outdir/ceilings.log" 2>&1 || status=1
    cat "$outdir/ceilings.log"
  fi
  timeout "${FLASHSTEPS_CEILINGS_TIMEOUT:-300}" python3 tools/ceilings/gemm_ceiling.py "$outdir/gemm_ceiling.json" > "$outdir/gemm_ceiling.log" 2>&1 && cat "$outdir/gemm_ceiling.log"
fi
# DRAM and L2 traffic of each step on one shape (bf16, D = 128, N = 4096, non-causal), with
# the clocks left alone (--clock-control none). Only the correctness run's launches are profiled.
if [ "${FLASHSTEPS_NCU:-0}" = 1 ] && command -v ncu > /dev/null; then
  metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum,gpu__time_duration.sum
  for b in "$build"/bin/bench_step*; do
    name=$(basename "$b")
    count=1
    [ "$name" = bench_step01 ] && count=3
    timeout 120 ncu --clock-control none --metrics "$metrics" --launch-count "$count" --csv --log-file "$outdir/$name.ncu.csv" \
      "$b" --benchmark_filter='attention/bf16/hd128/n4096/full/' --benchmark_repetitions=1 \
      --benchmark_min_time=0.001 --benchmark_min_warmup_time=0 > "$outdir/$name.ncu.out" 2>&1 || status=1
    echo "$name ncu: $(grep -c dram__bytes "$outdir/$name.ncu.csv") metric rows"
  done
fi
# The tuners over the standard set (FLASHSTEPS_TUNE_ARGS: their arguments, e.g. "--dtype bf16";
# FLASHSTEPS_TUNE_STEPS: which tuned steps, default "06", e.g. "06 09"); the table of step NN,
# stepNN_tuning.json, is what steps/NN_slug/tuned/ checks in.
if [ -n "${FLASHSTEPS_TUNE_ARGS+set}" ]; then
  for nn in ${FLASHSTEPS_TUNE_STEPS:-06}; do
    [ -x "$build/bin/tune_step$nn" ] || { echo "no $build/bin/tune_step$nn"; status=1; continue; }
    # shellcheck disable=SC2086
    timeout "${FLASHSTEPS_TUNE_TIMEOUT:-600}" "$build/bin/tune_step$nn" --out "$outdir/step${nn}_tuning.json" \
      $FLASHSTEPS_TUNE_ARGS > "$outdir/tune_step$nn.log" 2> "$outdir/tune_step$nn.progress.log" || status=1
    tail -30 "$outdir/tune_step$nn.log"
    # The benchmark below then runs the step with the table just made (its cache variable).
    case $nn in
      06) export FLASHSTEPS_TUNE_CACHE="$outdir/step06_tuning.json" ;;
      *) export "FLASHSTEPS_STEP${nn}_TUNE_CACHE=$outdir/step${nn}_tuning.json" ;;
    esac
  done
fi
# The SM clock and power while the baselines and the steps are timed (tools/gpu/clock_summary.py):
# nvidia-smi samples every 100 ms into clocks.csv, phase marks into phases.txt, the summary
# into clocks.md. FLASHSTEPS_CLOCKS=0 leaves it out.
smi_pid=
mark() { echo "$(date +'%Y/%m/%d %H:%M:%S.%3N') $*" >> "$outdir/phases.txt"; }
if [ "${FLASHSTEPS_CLOCKS:-1}" = 1 ] && command -v nvidia-smi > /dev/null; then
  timeout "${FLASHSTEPS_CLOCKS_TIMEOUT:-7200}" nvidia-smi \
    --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,utilization.gpu --format=csv -lms 100 \
    > "$outdir/clocks.csv" 2>&1 &
  smi_pid=$!
fi
# PyTorch SDPA on the same problems, in the same run (FLASHSTEPS_SDPA_ARGS: arguments of
# tools/baselines/sdpa_bench.py, e.g. "--dtype bf16"); needs torch, skipped without it. A torch
# that takes over the probe timeout to import, or names no GPU, skips it and fails the session.
gpu_slug=
if [ -n "${FLASHSTEPS_SDPA_ARGS+set}" ]; then
  timeout "$probe" python3 -c 'import torch' 2> /dev/null
  case $? in
    0) gpu_slug=$(timeout "$probe" python3 -c 'import torch, re; print(re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name().lower()).strip("-"))')
       [ -n "$gpu_slug" ] || { echo "PyTorch named no GPU within $probe s: SDPA skipped"; status=1; } ;;
    124) echo "importing torch took over $probe s: SDPA skipped"; status=1 ;;
  esac
fi
if [ -n "$gpu_slug" ]; then
  # The commit the benchmarks were built from (a copied tree's .git may be stale).
  commit=$(strings "$(ls "$build"/bin/bench_step* | head -1)" 2> /dev/null | grep -m1 -xE '[0-9a-f]{12}(-dirty)?')
  mark start sdpa
  # shellcheck disable=SC2086
  FLASHSTEPS_GIT_COMMIT="${FLASHSTEPS_GIT_COMMIT:-$commit}" timeout "${FLASHSTEPS_SDPA_TIMEOUT:-600}" python3 tools/baselines/sdpa_bench.py --out "$outdir/results/$gpu_slug" $FLASHSTEPS_SDPA_ARGS \
    > "$outdir/sdpa.log" 2>&1 || status=1
  mark end sdpa
  tail -40 "$outdir/sdpa.log"
fi
if [ "${FLASHSTEPS_BENCH:-1}" = 1 ]; then
  # Bounded, so that what was measured is still packed when time runs short.
  mark start bench
  FLASHSTEPS_PHASES="$outdir/phases.txt" FLASHSTEPS_RESULTS="$outdir/results" timeout "${FLASHSTEPS_BENCH_TIMEOUT:-3600}" "$build/bench" "$@" \
    > "$outdir/bench.log" 2>&1 || status=1
  mark end bench
  tail -70 "$outdir/bench.log"
fi
if [ -n "$smi_pid" ]; then
  kill "$smi_pid" 2> /dev/null
  python3 tools/gpu/clock_summary.py "$outdir/clocks.csv" "$outdir/phases.txt" > "$outdir/clocks.md" 2>&1
  cat "$outdir/clocks.md"
fi
tar czf "$outdir.tar.gz" -C "$(dirname "$outdir")" "$(basename "$outdir")"
exit $status
