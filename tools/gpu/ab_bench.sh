#!/usr/bin/env bash
# A/B of benchmark variants on one GPU, in one call: every variant runs the same benchmarks,
# round after round, interleaved (a, b, c, a, b, c, ...), so that a drift of the clock or of
# the machine over the call falls on all of them alike; then ab_summary.py prints each
# variant's median TFLOPS per benchmark and round, and its ratio to the first variant.
#   tools/gpu/ab_bench.sh OUTDIR ROUNDS 'FILTER' NAME='COMMAND' [NAME='COMMAND' ...]
# COMMAND is a bench_stepNN binary with any environment or arguments of its own, e.g.
#   tools/gpu/ab_bench.sh $OUT/ab 2 'bf16/hd64/n1024/causal' \
#     base=.gpu/a/bin/bench_step09 ends='.gpu/b/bin/bench_step09' \
#     n160='env FLASHSTEPS_STEP09_SHAPE=m128_n160_s2 .gpu/a/bin/bench_step09'
# Each run gets --benchmark_filter=FILTER and FLASHSTEPS_AB_ARGS (default: --min-time 0.05
# --repetitions 3), and is bounded by FLASHSTEPS_AB_TIMEOUT seconds (default 120). Logs:
# OUTDIR/NAME.rR.log; the table: OUTDIR/summary.md (also printed).
set -uo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,13p' "$0" >&2
  exit 2
fi
outdir=$1 rounds=$2 filter=$3
shift 3
mkdir -p "$outdir"
names=() commands=()
for spec in "$@"; do
  if [[ "$spec" != *=* ]]; then
    echo "ab_bench.sh: '$spec' is not NAME=COMMAND" >&2
    exit 2
  fi
  names+=("${spec%%=*}")
  commands+=("${spec#*=}")
done
# shellcheck disable=SC2206
extra=(${FLASHSTEPS_AB_ARGS:---min-time 0.05 --repetitions 3})
status=0
for ((r = 1; r <= rounds; ++r)); do
  for i in "${!names[@]}"; do
    log="$outdir/${names[$i]}.r$r.log"
    # shellcheck disable=SC2086
    timeout "${FLASHSTEPS_AB_TIMEOUT:-120}" ${commands[$i]} --benchmark_filter="$filter" "${extra[@]}" > "$log" 2>&1 ||
      { echo "ab_bench.sh: ${names[$i]} round $r failed (exit $?), see $log" >&2; status=1; }
  done
done
python3 "$(dirname "${BASH_SOURCE[0]}")/ab_summary.py" "$outdir" "${names[@]}" | tee "$outdir/summary.md" || status=1
exit $status
