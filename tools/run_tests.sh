#!/usr/bin/env bash
# The test job (README, Quick start, second command; CI runs it through .ci/run): set up,
# build every preset the machine can build (cpu; cuda when nvcc is present; hip), run all
# tests (GPU tests skip without a GPU; the ISA checks run anywhere), the Python module's
# tests, the tools' tests, the fixture check, the results-table and step-header checks, and
# build and check the book in a headless browser.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash tools/install_deps.sh || exit 1
export PATH="/usr/local/cuda/bin:$PATH"
py="$root/.venv/bin/python3"
jobs="$(nproc)"
passed=0
failed=0
failures=()

# record NAME COMMAND...: runs a step, counts it, keeps going after a failure.
record() {
  local name="$1"
  shift
  echo "=== $name"
  if "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$name")
  fi
}

presets=(cpu hip)
command -v nvcc > /dev/null 2>&1 && presets+=(cuda) || echo "nvcc not found: skipping the cuda preset"
for preset in "${presets[@]}"; do
  extra=("-DFLASHSTEPS_PYTHON=$py")
  [ "$preset" = cpu ] && extra+=(-DFLASHSTEPS_BUILD_BOOK=ON)
  [ "$preset" = cpu ] || extra+=(-DFLASHSTEPS_BUILD_PYTHON=ON)  # the Python module, in each GPU preset
  record "configure $preset" cmake --preset "$preset" "${extra[@]}"
  record "build $preset" cmake --build "build/$preset" -j "$jobs"
  record "ctest $preset" ctest --test-dir "build/$preset" -j "$jobs" --output-on-failure --timeout 600
done
# The Python module of each GPU preset: its argument errors on NumPy arrays (no GPU needed);
# the GPU tests skip without PyTorch and a GPU.
for preset in "${presets[@]}"; do
  [ "$preset" = cpu ] && continue
  record "python module ($preset)" env PYTHONPATH="$root/build/$preset/python" "$py" -m pytest -q -rs tests/python
done
record "tools tests" "$py" -m pytest -q tools/results/tests tools/baselines/tests tools/book/tests tools/timeline/tests tools/gpu/tests
record "fixture check" "$py" tools/extract_qkv/check_fixture.py
record "README results table is generated" "$py" tools/results/results_table.py results --seqlen 8192 --check README.md
record "step headers agree with the results" "$py" tools/results/check_step_headers.py results steps
record "book" cmake --build build/cpu --target book
record "book in a browser" cmake --build build/cpu --target book-browser-check

echo
if [ ${#failures[@]} -gt 0 ]; then
  echo "Failed: ${failures[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
