"""tools/gpu/gpu_session.sh with stand-ins for the GPU commands (no GPU): a command that hangs
ends its phase, not the session; PyTorch that hangs or names no GPU skips SDPA and fails the
session; FLASHSTEPS_TEST_STEPS takes "6" for "06" and fails the session when it names no test."""
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "gpu_session.sh"
REPO = SCRIPT.parents[2]
# The SASS count and the sanitizers stay off: a cuobjdump or compute-sanitizer in /usr/bin
# would otherwise run on the stand-in test binaries.
NO_TOOLS = {"FLASHSTEPS_SASS": "0", "FLASHSTEPS_MEMCHECK": "0", "FLASHSTEPS_INITCHECK": "0",
            "FLASHSTEPS_RACECHECK": "0", "FLASHSTEPS_SYNCCHECK": "0"}


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
           "FLASHSTEPS_CEILINGS_TIMEOUT": "1", "FLASHSTEPS_SDPA_ARGS": "", "FLASHSTEPS_CLOCKS": "0", **NO_TOOLS}
    out = tmp_path / "session"
    run = subprocess.run(["bash", str(SCRIPT), str(build), str(out)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 1, run.stdout + run.stderr  # the ceilings timed out
    assert "bench ran" in (out / "bench.log").read_text()
    assert not (out / "sdpa.log").exists()  # the probe for torch timed out: SDPA skipped
    assert "importing torch took over 1 s: SDPA skipped" in run.stdout
    assert (tmp_path / "session.tar.gz").is_file()


# --- PyTorch's probes and FLASHSTEPS_TEST_STEPS, on a session that is otherwise clean ----------

def clean_session(tmp_path, torch: str, tests=(), **env_extra):
    """Run the session with a build holding ``tests`` (test_stepNN stand-ins that pass) and a
    bench that prints; ``torch`` is the fake python3's answer to PyTorch's probes: a shell
    snippet run for `import torch` alone ($1 = -c, $2 = the code) and for the device name."""
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    executable(build / "bench", "echo bench ran\n")
    for step in tests:
        executable(build / "bin" / f"test_step{step}", "echo '[  PASSED  ] 1 test.'\n")
    fake = tmp_path / "fake"
    fake.mkdir()
    for tool in ("nvcc", "nvidia-smi"):
        executable(fake / tool, "exit 0\n")
    python = shutil.which("python3")
    executable(fake / "python3", f'case "$*" in\n'
                                 f'  *sdpa_bench*) echo sdpa ran; exit 0 ;;\n'
                                 f'  *torch*) {torch} ;;\n'
                                 f'esac\nexec {python} "$@"\n')
    env = {"PATH": os.pathsep.join([str(fake), "/usr/bin", "/bin"]), "HOME": str(tmp_path),
           "FLASHSTEPS_PROBE_TIMEOUT": "1", "FLASHSTEPS_CEILINGS": "0", "FLASHSTEPS_CLOCKS": "0",
           **NO_TOOLS, **env_extra}
    out = tmp_path / "session"
    run = subprocess.run(["bash", str(SCRIPT), str(build), str(out)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert "bench ran" in (out / "bench.log").read_text()
    return run, out


@pytest.mark.parametrize("device_probe,why", [("exec sleep 600", "hangs"),
                                              ("exit 0", "prints nothing"),
                                              ("echo 'no CUDA' >&2; exit 1", "fails")])
def test_sdpa_is_skipped_when_pytorch_names_no_gpu(tmp_path, device_probe, why):
    # `import torch` answers at once; the device-name probe does not name a GPU.
    torch = f'[ "$2" = "import torch" ] && exit 0; {device_probe}'
    run, out = clean_session(tmp_path, torch, FLASHSTEPS_SDPA_ARGS="--dtype bf16")
    assert run.returncode == 1, (why, run.stdout + run.stderr)
    assert "PyTorch named no GPU within 1 s: SDPA skipped" in run.stdout
    assert not (out / "sdpa.log").exists() and not (out / "results" / "unknown-gpu").exists()


def test_a_gpu_named_by_pytorch_gets_sdpa(tmp_path):
    torch = '[ "$2" = "import torch" ] && exit 0; echo test-gpu; exit 0'
    run, out = clean_session(tmp_path, torch, FLASHSTEPS_SDPA_ARGS="--dtype bf16")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "sdpa ran" in (out / "sdpa.log").read_text()


def test_importing_torch_that_hangs_is_reported(tmp_path):
    run, out = clean_session(tmp_path, "exec sleep 600", FLASHSTEPS_SDPA_ARGS="")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "importing torch took over 1 s: SDPA skipped" in run.stdout
    assert not (out / "sdpa.log").exists()


def test_without_torch_sdpa_is_skipped_quietly(tmp_path):
    # No torch (the import fails): skipped, as documented, and the session still passes.
    run, out = clean_session(tmp_path, "echo 'No module named torch' >&2; exit 1",
                             FLASHSTEPS_SDPA_ARGS="")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SDPA skipped" not in run.stdout and not (out / "sdpa.log").exists()


BUILT = ("01", "04a", "06", "10")


@pytest.mark.parametrize("steps,tested", [("6", {"06"}), ("06", {"06"}), ("4a 10", {"04a", "10"}),
                                          ("1 06", {"01", "06"}), ("", set(BUILT))])
def test_test_steps_take_both_spellings(tmp_path, steps, tested):
    run, out = clean_session(tmp_path, "exit 1", tests=BUILT, FLASHSTEPS_TEST_STEPS=steps)
    assert run.returncode == 0, run.stdout + run.stderr
    assert {p.name[len("test_step"):-len(".log")] for p in out.glob("test_step*.log")} == tested
    assert "test binary" not in run.stdout


def test_test_steps_naming_no_test_binary_fail_the_session(tmp_path):
    run, out = clean_session(tmp_path, "exit 1", tests=BUILT, FLASHSTEPS_TEST_STEPS="11 4b")
    assert run.returncode == 1, run.stdout + run.stderr
    assert ('FLASHSTEPS_TEST_STEPS="11 4b" names no test binary in '
            f'{tmp_path}/build/bin (there: 01 04a 06 10): nothing tested') in run.stdout
    assert not list(out.glob("test_step*.log"))


def test_test_steps_partly_unknown_test_the_others(tmp_path):
    run, out = clean_session(tmp_path, "exit 1", tests=BUILT, FLASHSTEPS_TEST_STEPS="6 11")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FLASHSTEPS_TEST_STEPS: 11: no test binary" in run.stdout
    assert [p.name for p in out.glob("test_step*.log")] == ["test_step06.log"]


def test_tests_off_run_no_test_and_pass(tmp_path):
    # A benchmark-only call (tools/gpu/step06_publication.sh) on a build that holds tests.
    run, out = clean_session(tmp_path, "exit 1", tests=BUILT, FLASHSTEPS_TESTS="0")
    assert run.returncode == 0, run.stdout + run.stderr
    assert not list(out.glob("test_step*.log"))
