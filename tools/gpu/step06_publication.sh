#!/usr/bin/env bash
# Step 06 beside PyTorch SDPA flash (FlashAttention-2) in one call, for publication from an
# H200: gpu_session.sh twice, with no tests, sanitizers, SASS or ceilings.
#   tools/gpu/step06_publication.sh [BUILD_DIR] [OUTDIR]      (from the repository root)
# BUILD_DIR (default build/h200) holds bin/bench_step06, bin/tune_step06 and bench, built with
# -DCMAKE_CUDA_ARCHITECTURES=90a and bundled (bundle_runtime_libs.sh); FLASHSTEPS_PACK=FILE.tar.xz
# unpacks such a folder into BUILD_DIR first. OUTDIR defaults to /tmp/step06-publication; the
# result is OUTDIR.tar.gz, packed again after each part so that a call cut short keeps what
# was measured.
# - On an H200, part A: SDPA flash by the steps' own loop, then step 06 over the standard set
#   and MiniLM with the table compiled in (steps/06_autotuned/tuned/nvidia-h200.json). Then,
#   when fewer than FLASHSTEPS_PART_B_BEFORE seconds (300) have passed, part B:
#   tune_step06 --reps 7 over the standard set and step 06 again with the table it wrote.
# - On another card: part B first (the card's own table), with SDPA flash after the tuner and
#   before step 06 (gpu_session.sh's order), then part A with the H200 table renamed to the
#   card: a same-run comparison, not a publication.
# Each part's benchmark limit is what is left of FLASHSTEPS_CALL_LIMIT seconds (560), at most
# 220 s. The exit status is 1 when a part that ran wrote no step06.json.
set -u
build="${1:-build/h200}"
outdir="${2:-/tmp/step06-publication}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
limit="${FLASHSTEPS_CALL_LIMIT:-560}"
mkdir -p "$build" "$outdir"
if [ -n "${FLASHSTEPS_PACK:-}" ]; then tar xJf "$FLASHSTEPS_PACK" -C "$build" || exit 9; fi
name=$(timeout "${FLASHSTEPS_PROBE_TIMEOUT:-60}" nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: ${name:-none}"
date -u +%Y-%m-%dT%H:%M:%SZ > "$outdir/times.txt"
quiet=(FLASHSTEPS_TESTS=0 FLASHSTEPS_SASS=0 FLASHSTEPS_CEILINGS=0 FLASHSTEPS_MEMCHECK=0
       FLASHSTEPS_INITCHECK=0 FLASHSTEPS_RACECHECK=0 FLASHSTEPS_SYNCCHECK=0 FLASHSTEPS_BENCH_STEPS=06)
sdpa_args=(FLASHSTEPS_SDPA_ARGS="--backends flash" FLASHSTEPS_SDPA_TIMEOUT=150)
pack() { tar czf "$outdir.tar.gz" -C "$(dirname "$outdir")" "$(basename "$outdir")"; }
session() {  # PART [VAR=VALUE ...]: gpu_session.sh into OUTDIR/PART, its log OUTDIR/session-PART.log
  local part=$1
  shift
  env "${quiet[@]}" "$@" bash "$here/gpu_session.sh" "$build" "$outdir/$part" > "$outdir/session-$part.log" 2>&1
  echo "part $part rc=$? $(date -u +%T)" >> "$outdir/times.txt"
  ls "$outdir/$part"/results/*/step06.json > /dev/null 2>&1 || echo "part $part: no step06.json" >> "$outdir/times.txt"
  tail -22 "$outdir/session-$part.log"
  rm -f "$outdir/$part.tar.gz"
  gzip -f "$outdir/$part/clocks.csv" 2> /dev/null
  pack
}
bench_limit() {  # SECONDS_STILL_NEEDED_BEFORE_THE_BENCHMARK
  local left=$((limit - SECONDS - $1))
  echo $((left < 220 ? left : 220))
}
part_a() {  # [sdpa]
  local extra=() before=0
  [ "${1:-}" = sdpa ] && extra+=("${sdpa_args[@]}") && before=80
  case $name in
    *H200*) ;;
    *) python3 - "$name" "$outdir/h200-table-renamed.json" <<'PY'
import json, sys
table = json.load(open("steps/06_autotuned/tuned/nvidia-h200.json"))
for entry in table["entries"]:
    entry["device"] = sys.argv[1]
json.dump(table, open(sys.argv[2], "w"), indent=1)
PY
       extra+=(FLASHSTEPS_TUNE_CACHE="$outdir/h200-table-renamed.json") ;;
  esac
  session a ${extra[@]+"${extra[@]}"} FLASHSTEPS_BENCH_TIMEOUT="$(bench_limit $before)"
}
part_b() {  # [sdpa]
  local extra=() before=120
  [ "${1:-}" = sdpa ] && extra+=("${sdpa_args[@]}") && before=200
  session b ${extra[@]+"${extra[@]}"} FLASHSTEPS_TUNE_ARGS="--reps 7" FLASHSTEPS_TUNE_TIMEOUT=120 \
    FLASHSTEPS_BENCH_TIMEOUT="$(bench_limit $before)"
}
case $name in
  *H200*) part_a sdpa; [ $SECONDS -lt "${FLASHSTEPS_PART_B_BEFORE:-300}" ] && part_b ;;
  "") echo "nvidia-smi named no GPU: nothing measured"; pack; exit 1 ;;
  *) part_b sdpa; [ $SECONDS -lt $((limit - 160)) ] && part_a ;;
esac
cat "$outdir/times.txt"
pack
! grep -q 'no step06.json' "$outdir/times.txt"
