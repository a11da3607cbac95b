#!/usr/bin/env bash
# The Python module on a GPU machine, from the repository root, with a CUDA build folder
# already there (built elsewhere, e.g. -DCMAKE_CUDA_ARCHITECTURES=90a): builds only the
# module against that folder's step libraries and this machine's python3 and nanobind (no
# kernel is recompiled: python/CMakeLists.txt's standalone mode), runs tests/python (every
# step against SDPA's math backend in float64, CUDA graph capture, errors), then the
# same-tensor comparison of tools/baselines/sdpa_bench.py on a few standard problems.
# Logs, JUnit XML and JSON go to $OUT (default /tmp/out).
#   tools/gpu/python_session.sh [BUILD_DIR]        (default build/h200)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build="${1:-build/h200}"
out="${OUT:-/tmp/out}"
py="$(command -v "${FLASHSTEPS_DEVICE_PYTHON:-python3}")"
pybuild="build/python-$(basename "$build")"
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
status=0
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  timeout 30 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv 2>&1
  "$py" -c 'import sys, torch, nanobind; print("python", sys.version.split()[0], "torch", torch.__version__, "nanobind", nanobind.__version__)'
} | tee "$out/python_device.txt"

# The module alone: configure and build, each under a time limit (expected well under 60 s).
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
start=$(date +%s)
if ! timeout 120 cmake -S python -B "$pybuild" "${gen[@]}" -DFLASHSTEPS_PREBUILT="$build" \
       -DPython_EXECUTABLE="$py" > "$out/python_configure.log" 2>&1 \
   || ! timeout 240 cmake --build "$pybuild" -j "$(nproc)" > "$out/python_build.log" 2>&1; then
  echo "module build FAILED (logs: $out/python_configure.log, $out/python_build.log)"
  tail -30 "$out/python_configure.log" "$out/python_build.log"
  exit 1
fi
echo "module built in $(( $(date +%s) - start )) s: $pybuild/python/flashsteps"
export PYTHONPATH="$PWD/$pybuild/python${PYTHONPATH:+:$PYTHONPATH}"

# The tests.
timeout "${FLASHSTEPS_PYTEST_TIMEOUT:-600}" "$py" -m pytest tests/python -q -rs \
  --junitxml="$out/pytest.xml" > "$out/pytest.log" 2>&1 || status=1
grep -E "passed|failed|error" "$out/pytest.log" | tail -3
grep -E "^(FAILED|ERROR)" "$out/pytest.log" | head -30

# Same tensors: every step at N = 1024, the tensor-core steps at N = 8192, against the SDPA
# backends; JSON in $out/same-tensors-*/same-tensors.json.
timeout 300 "$py" tools/baselines/sdpa_bench.py --flashsteps --dtype fp16 bf16 --head-dim 64 128 \
  --seqlen 1024 --warmup 2 --min-time 0.05 --out "$out/same-tensors-n1024" 2>&1 | tee "$out/same-tensors-n1024.txt" \
  || status=1
timeout 300 "$py" tools/baselines/sdpa_bench.py --flashsteps 4 5 6 7 --dtype bf16 --head-dim 64 128 \
  --seqlen 8192 --warmup 3 --min-time 0.1 --out "$out/same-tensors-n8192" 2>&1 | tee "$out/same-tensors-n8192.txt" \
  || status=1
echo "python session: $([ $status = 0 ] && echo OK || echo FAILURES) (logs in $out)"
exit $status
