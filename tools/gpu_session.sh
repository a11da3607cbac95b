#!/usr/bin/env bash
# One full session on a GPU machine, from the repository root, with a build folder already
# there (built here or copied with its bundled libraries, see tools/bundle_runtime_libs.sh):
# device description, every step's GPU tests, compute-sanitizer on a subset, then the
# benchmark of every step. Logs and JSON go to OUTDIR, packed as OUTDIR.tar.gz at the end.
#   tools/gpu_session.sh [BUILD_DIR] [OUTDIR] [extra ./bench arguments...]
set -uo pipefail
build="${1:-build/cuda}"
outdir="${2:-gpu-session}"
shift 2 2>/dev/null || shift $#
mkdir -p "$outdir"
export LD_LIBRARY_PATH="$build/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,temperature.gpu --format=csv
  nvcc --version | tail -2
} > "$outdir/device.txt" 2>&1
nvidia-smi -q > "$outdir/nvidia-smi-q.txt" 2>&1
cat "$outdir/device.txt"
status=0
for t in "$build"/bin/test_step*; do
  name=$(basename "$t")
  "$t" --gtest_brief=1 --gtest_output="json:$outdir/$name.json" > "$outdir/$name.log" 2>&1 || status=1
  echo "$name: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$outdir/$name.log" | tr '\n' ' ')"
  grep -A3 -E '^\[  FAILED  \]|Failure' "$outdir/$name.log" | head -40
done
if command -v compute-sanitizer > /dev/null; then
  for t in "$build"/bin/test_step*; do
    name=$(basename "$t")
    compute-sanitizer --tool memcheck --error-exitcode 3 "$t" --gtest_brief=1 \
      --gtest_filter='*nq17_nk100*:*nq257_nk130*:*packed_qkv*:*hq32_hkv8*' > "$outdir/$name.memcheck.log" 2>&1 || status=1
    echo "$name memcheck: $(grep -E 'ERROR SUMMARY' "$outdir/$name.memcheck.log" | tail -1)"
  done
fi
FLASHSTEPS_RESULTS="$outdir/results" "$build/bench" "$@" > "$outdir/bench.log" 2>&1 || status=1
tail -60 "$outdir/bench.log"
tar czf "$outdir.tar.gz" -C "$(dirname "$outdir")" "$(basename "$outdir")"
exit $status
