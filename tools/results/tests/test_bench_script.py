"""cmake/bench.in (the build folder's ./bench), rendered as CMakeLists.txt renders it, run
against fake bench_stepNN binaries (no GPU, no build)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BUILT = ("01", "02", "03", "04", "04a", "04b", "05", "06", "10")

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake to render bench.in")


def render(build: Path) -> Path:
    """build/bench from cmake/bench.in by CMakeLists.txt's own configure_file call (its
    arguments copied from there), with CMAKE_SOURCE_DIR the repository."""
    call = re.search(r"configure_file\(cmake/bench\.in \$\{CMAKE_BINARY_DIR\}/bench(.*?)\)",
                     (REPO / "CMakeLists.txt").read_text(encoding="utf-8"), re.S)
    assert call, "CMakeLists.txt no longer configure_files cmake/bench.in to the build folder"
    script = build / "render.cmake"
    script.write_text(f'set(CMAKE_SOURCE_DIR "{REPO}")\n'
                      f'set(CMAKE_BINARY_DIR "{build}")\n'
                      f'configure_file("{REPO}/cmake/bench.in" "{build}/bench"{call[1]})\n')
    subprocess.run(["cmake", "-P", str(script)], check=True, capture_output=True, text=True)
    bench = build / "bench"
    assert os.access(bench, os.X_OK) and "@CMAKE_SOURCE_DIR@" not in bench.read_text()
    return bench


@pytest.fixture
def build(tmp_path: Path) -> Path:
    """A build folder with bin/bench_stepNN for each of BUILT; each logs its step and exits 0."""
    (tmp_path / "bin").mkdir()
    for step in BUILT:
        fake = tmp_path / "bin" / f"bench_step{step}"
        fake.write_text(f'#!/bin/sh\necho {step} >> "{tmp_path}/ran.log"\n')
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    render(tmp_path)
    return tmp_path


def run_bench(build: Path, steps: str | None) -> tuple[subprocess.CompletedProcess, list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "FLASHSTEPS_BENCH_STEPS"}
    if steps is not None:
        env["FLASHSTEPS_BENCH_STEPS"] = steps
    env["FLASHSTEPS_RESULTS"] = str(build / "results")
    log = build / "ran.log"
    log.unlink(missing_ok=True)
    proc = subprocess.run([str(build / "bench")], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    return proc, log.read_text().split() if log.exists() else []


@pytest.mark.parametrize("steps,ran", [
    (None, list(BUILT)), ("", list(BUILT)),
    ("06", ["06"]), ("6", ["06"]),                   # the folder's and the make target's spelling
    ("4a", ["04a"]), ("04a 4b", ["04a", "04b"]),
    ("4", ["04"]), ("1 10", ["01", "10"]),
])
def test_bench_steps_takes_both_spellings(build, steps, ran):
    proc, log = run_bench(build, steps)
    assert proc.returncode == 0, proc.stderr
    assert log == ran
    assert proc.stderr == ""


@pytest.mark.parametrize("steps", ["99", "7", "07 08", "abc"])
def test_bench_steps_matching_no_built_step_says_so(build, steps):
    proc, log = run_bench(build, steps)
    assert proc.returncode == 2 and log == []
    assert f'FLASHSTEPS_BENCH_STEPS="{steps}" names no step built here' in proc.stderr
    assert "built: " + " ".join(sorted(BUILT)) in proc.stderr
    assert "No step is built yet" not in proc.stderr


def test_bench_steps_some_not_built_runs_the_others(build):
    proc, log = run_bench(build, "6 99")
    assert proc.returncode == 0 and log == ["06"]
    assert 'FLASHSTEPS_BENCH_STEPS="6 99": 99 not built here' in proc.stderr


@pytest.mark.parametrize("steps", [None, "06"])
def test_no_step_built_keeps_its_message(tmp_path, steps):
    (tmp_path / "bin").mkdir()
    render(tmp_path)
    proc, _ = run_bench(tmp_path, steps)
    assert proc.returncode == 1
    assert "No step is built yet: run 'make step1' (or 'make') first." in proc.stderr
