"""tools/gpu/gpu_session.sh with stand-ins for the GPU commands (no GPU): a command that hangs
ends its phase, not the session."""
import os
import shutil
import stat
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "gpu_session.sh"
REPO = SCRIPT.parents[2]


def executable(path: Path, text: str) -> None:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_hung_gpu_commands_end_their_phase_not_the_session(tmp_path):
    # The build folder: a ceilings binary that never returns and a bench that prints a line.
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    executable(build / "bin" / "ceilings", "exec sleep 600\n")
    executable(build / "bench", "echo bench ran\n")
    # The machine: nvcc and nvidia-smi that hang, and a python3 whose PyTorch probes hang.
    fake = tmp_path / "fake"
    fake.mkdir()
    executable(fake / "nvcc", "exec sleep 600\n")
    executable(fake / "nvidia-smi", "exec sleep 600\n")
    python = shutil.which("python3")
    executable(fake / "python3", f'case "$*" in *torch*) exec sleep 600 ;; esac\nexec {python} "$@"\n')
    path = os.pathsep.join([str(fake), "/usr/bin", "/bin"])
    env = {"PATH": path, "HOME": str(tmp_path), "FLASHSTEPS_PROBE_TIMEOUT": "1",
           "FLASHSTEPS_CEILINGS_TIMEOUT": "1", "FLASHSTEPS_SDPA_ARGS": "", "FLASHSTEPS_CLOCKS": "0"}
    out = tmp_path / "session"
    run = subprocess.run(["bash", str(SCRIPT), str(build), str(out)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 1, run.stdout + run.stderr  # the ceilings timed out
    assert "bench ran" in (out / "bench.log").read_text()
    assert not (out / "sdpa.log").exists()  # the probe for torch timed out: SDPA skipped
    assert (tmp_path / "session.tar.gz").is_file()
