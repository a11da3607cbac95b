#!/usr/bin/env bash
# The main job (README, Quick start, first command): set up, build, and then
#  - with a GPU: run every step's benchmark (checked against the float64 reference), write
#    the JSON to build/<preset>/results/<gpu>/ and the plot to build/<preset>/results/
#    (FLASHSTEPS_PUBLISH=1: to results/, and redraw the README's results table);
#  - without one: run the float64 reference on the real-activation fixture and say so.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash tools/install_deps.sh --no-browser
export PATH="/usr/local/cuda/bin:$PATH"
py="$root/.venv/bin/python3"
jobs="$(nproc)"

gpu=""
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then gpu=cuda; fi
# The hip preset compiles for gfx90a, gfx940 and gfx942 (Debian's clang-19), but Debian's ROCm 5.2
# runtime runs only gfx90a and gfx940: an MI300X/MI300A (gfx942) needs ROCm 6 and a rebuild (README).
if [ -z "$gpu" ] && command -v rocminfo > /dev/null 2>&1 && rocminfo 2>/dev/null | grep -qE 'gfx90a|gfx940'; then gpu=hip; fi

# Published results (results/, README table) change only when asked: FLASHSTEPS_PUBLISH=1.
results="$root/results"
if [ -n "$gpu" ]; then
  [ "${FLASHSTEPS_PUBLISH:-0}" = 1 ] || results="$root/build/$gpu/results"
  cmake --preset "$gpu"
  cmake --build "build/$gpu" -j "$jobs"
  FLASHSTEPS_RESULTS="$results" "build/$gpu/bench" "$@"
else
  cmake --preset cpu
  cmake --build build/cpu -j "$jobs" --target reference_on_fixture
  build/cpu/bin/reference_on_fixture
  echo
  echo "No GPU found (no nvidia-smi or rocminfo device): the steps were not run."
  echo "The plot below is redrawn from the results already in results/."
fi
"$py" tools/results/plot_results.py "$results" -o "$results/tflops"
if [ "$results" = "$root/results" ]; then
  "$py" tools/results/results_table.py results --seqlen 8192 --update README.md
  echo "Plot: results/tflops.png and .svg; table: README.md (Results)."
else
  "$py" tools/results/results_table.py "$results" --seqlen 8192
  echo "Plot: $results/tflops.png and .svg (FLASHSTEPS_PUBLISH=1 writes to results/ instead)."
fi
