#!/usr/bin/env bash
# The timelines of the Hopper steps on a GPU machine, from the repository root, with a build
# folder configured with -DFLASHSTEPS_TRACE=ON (and CMAKE_CUDA_ARCHITECTURES holding 90a) whose
# trace tools are built (`cmake --build BUILD --target trace_step08`; copied builds need
# tools/gpu/bundle_runtime_libs.sh): for every BUILD/bin/trace_stepNN, one traced call of bf16,
# D = 128, N = 8192 (the standard set's batch 2 and 16 heads), full and causal, of the middle
# block of the grid; its JSON and log, then the figures (tools/timeline/plot_timeline.py): the
# whole block, four tiles of its steady state (tiles 16 to 19), and each lane's time per phase.
# Everything goes to $OUT/timeline (default /tmp/out/timeline). Without matplotlib on the
# machine the figures are skipped: draw them from the JSON elsewhere.
#   tools/gpu/trace_session.sh [BUILD_DIR]        (default build/trace)
# Run time: a few seconds per trace (inputs drawn on the host and the float64 check of five
# rows per head take most of it; the calls themselves are milliseconds) and one or two per
# figure: about 20 s for step 08. Each command is bounded by `timeout`.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
build="${1:-build/trace}"
out="${OUT:-/tmp/out}/timeline"
py="$(command -v "${FLASHSTEPS_DEVICE_PYTHON:-python3}")"
mkdir -p "$out"
export LD_LIBRARY_PATH="$build/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  timeout 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv
} > "$out/device.txt" 2>&1
cat "$out/device.txt"
figures=1
if ! timeout 60 "$py" -c 'import matplotlib' 2> /dev/null; then
  echo "matplotlib not found by $py: no figures (python3 tools/timeline/plot_timeline.py TRACE.json -o PREFIX elsewhere)"
  figures=0
fi
tools=("$build"/bin/trace_step*)
if [ ! -x "${tools[0]}" ]; then
  echo "no $build/bin/trace_step*: configure with -DFLASHSTEPS_TRACE=ON and build trace_step08"
  exit 1
fi
start=$(date +%s)
for tool in "${tools[@]}"; do
  step=$(basename "$tool")
  step=${step#trace_}
  for mask in full causal; do
    name="${step}_bf16_d128_n8192_${mask}"
    args=(--dtype bf16 --head-dim 128 --seqlen 8192 --out "$out/$name.json")
    [ "$mask" = causal ] && args+=(--causal)
    timeout 120 "$tool" "${args[@]}" > "$out/$name.log" 2>&1 || status=1
    cat "$out/$name.log"
    if [ "$figures" = 0 ] || [ ! -s "$out/$name.json" ]; then
      continue
    fi
    timeout 60 "$py" tools/timeline/plot_timeline.py "$out/$name.json" -o "$out/$name" --summary \
      > "$out/$name.summary.txt" 2>&1 || status=1
    timeout 60 "$py" tools/timeline/plot_timeline.py "$out/$name.json" -o "$out/${name}_tiles16-19" --tiles 16 19 \
      --summary > "$out/${name}_tiles16-19.summary.txt" 2>&1 || status=1
    sed -n '3,$p' "$out/${name}_tiles16-19.summary.txt"
  done
done
echo "trace session: $([ $status = 0 ] && echo OK || echo FAILURES) in $(( $(date +%s) - start )) s (files in $out)"
exit $status
