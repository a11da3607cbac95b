"""tools/gpu/step06_publication.sh with stand-ins for the GPU programs (no GPU): which parts run
in which order on an H200 and on another card, with which table, and what the exit status says."""
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "step06_publication.sh"
REPO = SCRIPT.parents[2]


def executable(path: Path, text: str) -> None:
    path.write_text("#!/bin/bash\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def publish(tmp_path, gpu: str, bench_writes_json: bool = True):
    """Runs the script with a build whose bench logs its table and writes step06.json (or not),
    a tune_step06 that writes its --out, and a machine whose nvidia-smi names ``gpu``."""
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    log = tmp_path / "calls.log"
    write = ('mkdir -p "$FLASHSTEPS_RESULTS/g" && echo {} > "$FLASHSTEPS_RESULTS/g/step06.json"'
             if bench_writes_json else "true")
    executable(build / "bench", f'echo "bench cache=${{FLASHSTEPS_TUNE_CACHE:-compiled}} '
                                f'steps=$FLASHSTEPS_BENCH_STEPS" >> {log}\n{write}\n')
    executable(build / "bin" / "tune_step06", f'echo "tune $*" >> {log}\n'
                                              'touch "$2"\n')  # --out FILE first
    executable(build / "bin" / "test_step06", f'echo "test ran" >> {log}\n')
    fake = tmp_path / "fake"
    fake.mkdir()
    executable(fake / "nvidia-smi", f'case "$*" in *name*) echo "{gpu}" ;; esac\n')
    executable(fake / "nvcc", "exit 0\n")
    python = shutil.which("python3")
    executable(fake / "python3", f'case "$*" in\n'
                                 f'  *sdpa_bench*) echo "sdpa $*" >> {log}; exit 0 ;;\n'
                                 f'  *get_device_name*) echo test-gpu; exit 0 ;;\n'
                                 f'  "-c import torch") exit 0 ;;\n'
                                 f'esac\nexec {python} "$@"\n')
    env = {"PATH": os.pathsep.join([str(fake), "/usr/bin", "/bin"]), "HOME": str(tmp_path),
           "FLASHSTEPS_CLOCKS": "0"}
    out = tmp_path / "pub"
    run = subprocess.run(["bash", str(SCRIPT), str(build), str(out)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    calls = log.read_text().splitlines() if log.exists() else []
    return run, out, calls


def test_h200_sdpa_then_the_compiled_table_then_a_new_one(tmp_path):
    run, out, calls = publish(tmp_path, "NVIDIA H200")
    assert run.returncode == 0, run.stdout + run.stderr
    assert [c.split()[0] for c in calls] == ["sdpa", "bench", "tune", "bench"]
    assert "--backends flash" in calls[0]
    assert calls[1] == "bench cache=compiled steps=06"
    assert calls[3] == f"bench cache={out}/b/step06_tuning.json steps=06"
    assert "test ran" not in calls  # FLASHSTEPS_TESTS=0
    assert (tmp_path / "pub.tar.gz").is_file()


def test_another_card_tunes_its_own_table_first_then_runs_the_h200_one_renamed(tmp_path):
    run, out, calls = publish(tmp_path, "NVIDIA H100 80GB HBM3")
    assert run.returncode == 0, run.stdout + run.stderr
    assert [c.split()[0] for c in calls] == ["tune", "sdpa", "bench", "bench"]
    renamed = out / "h200-table-renamed.json"
    assert calls[3] == f"bench cache={renamed} steps=06"
    table = json.loads(renamed.read_text())
    h200 = json.loads((REPO / "steps/06_autotuned/tuned/nvidia-h200.json").read_text())
    assert {e["device"] for e in table["entries"]} == {"NVIDIA H100 80GB HBM3"}
    assert len(table["entries"]) == len(h200["entries"])


def test_a_part_without_step06_json_fails_the_call(tmp_path):
    run, out, _ = publish(tmp_path, "NVIDIA H200", bench_writes_json=False)
    assert run.returncode == 1
    assert "part a: no step06.json" in (out / "times.txt").read_text()


def test_no_gpu_named_measures_nothing(tmp_path):
    run, _, calls = publish(tmp_path, "")
    assert run.returncode == 1 and calls == []
    assert "nvidia-smi named no GPU: nothing measured" in run.stdout
