#!/usr/bin/env bash
# The main job (README, Quick start, first command): set up, build, and then
#  - with a GPU: run every step's benchmark (checked against the float64 reference), write
#    the JSON to results/<gpu>/, redraw the plot and the README's results table;
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
if [ -z "$gpu" ] && command -v rocminfo > /dev/null 2>&1 && rocminfo 2>/dev/null | grep -q 'gfx9'; then gpu=hip; fi

if [ -n "$gpu" ]; then
  cmake --preset "$gpu"
  cmake --build "build/$gpu" -j "$jobs"
  FLASHSTEPS_RESULTS="$root/results" "build/$gpu/bench" "$@"
else
  cmake --preset cpu
  cmake --build build/cpu -j "$jobs" --target reference_on_fixture
  build/cpu/bin/reference_on_fixture
  echo
  echo "No GPU found (no nvidia-smi or rocminfo device): the steps were not run."
  echo "The plot below is redrawn from the results already in results/."
fi
"$py" tools/plot_results.py results -o results/tflops
"$py" tools/results_table.py results --seqlen 8192 --update README.md
echo "Plot: results/tflops.png, results/tflops.svg; table: README.md (Results)."
