# SPDX-License-Identifier: Apache-2.0
"""python/examples/ without PyTorch: --help works, and a run says in one line that torch is
missing (exit 2, as tools/baselines/sdpa_bench.py does). Torch is hidden from the child even
where it is installed (sys.modules["torch"] = None makes every import of it fail)."""

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "python" / "examples" / "step_vs_sdpa.py"
WITHOUT_TORCH = ("import runpy, sys; sys.modules['torch'] = None; sys.argv = sys.argv[1:]; "
                 "runpy.run_path(sys.argv[0], run_name='__main__')")


def run_without_torch(*args):
    return subprocess.run([sys.executable, "-c", WITHOUT_TORCH, str(EXAMPLE), *args],
                          capture_output=True, text=True, timeout=60)


def test_step_vs_sdpa_help_needs_no_torch():
    proc = run_without_torch("--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: step_vs_sdpa.py") and "--step STEP" in proc.stdout


def test_step_vs_sdpa_without_torch_says_so_in_one_line():
    proc = run_without_torch("--seqlen", "256")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("error: PyTorch is not installed here; step_vs_sdpa.py needs a CUDA or ROCm "
                           "build of torch\n")
