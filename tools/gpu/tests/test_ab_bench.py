"""tools/gpu/ab_bench.sh and ab_summary.py with fake bench_stepNN binaries (no GPU)."""
import os
import stat
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ab_summary as ab  # noqa: E402

GPU = Path(__file__).resolve().parents[1]
LINE = ("{name}/min_time:0.050/min_warmup_time:0.050/repeats:3/manual_time_median      0.864 ms"
        "         1.14 ms            3 GBps=312.026 TFLOPS={tflops} batch=4 calls_per_timing=2\n")


def fake_bench(path: Path, tflops_by_name: dict[str, float], fail: bool = False) -> Path:
    """A bench_stepNN stand-in: prints its arguments to a file, then median lines (the
    repetitions' lines, which the summary must skip, first)."""
    lines = "".join(LINE.replace("_median", "").format(name=n, tflops=t + 50) +
                    LINE.format(name=n, tflops=t) for n, t in tflops_by_name.items())
    path.write_text("#!/bin/sh\necho \"$@\" >> \"$0.args\"\ncat <<'EOF'\n" + lines + "EOF\n" +
                    ("exit 3\n" if fail else ""))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_read_log_takes_the_medians_only(tmp_path):
    (tmp_path / "a.r1.log").write_text(LINE.replace("_median", "").format(name="attention/x", tflops=1)
                                       + LINE.format(name="attention/x", tflops=614.2)
                                       + LINE.format(name="minilm/fp16/layers6", tflops=20.5741))
    assert ab.read_log(tmp_path / "a.r1.log") == {"attention/x": 614.2, "minilm/fp16/layers6": 20.5741}


def test_ab_bench_interleaves_rounds_and_tabulates(tmp_path):
    a = fake_bench(tmp_path / "a", {"attention/bf16/hd64/n1024/causal": 270.0, "attention/bf16/hd64/n2048/causal": 350.0})
    b = fake_bench(tmp_path / "b", {"attention/bf16/hd64/n1024/causal": 297.0, "attention/bf16/hd64/n2048/causal": 350.0})
    out = tmp_path / "out"
    env = {**os.environ, "FLASHSTEPS_AB_ARGS": "--min-time 0.01"}
    run = subprocess.run(["bash", str(GPU / "ab_bench.sh"), str(out), "2", "hd64/n1024", f"base={a}", f"ends=env X=1 {b}"],
                         capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.glob("*.log")) == ["base.r1.log", "base.r2.log", "ends.r1.log", "ends.r2.log"]
    assert (tmp_path / "a.args").read_text().splitlines() == ["--benchmark_filter=hd64/n1024 --min-time 0.01"] * 2
    summary = (out / "summary.md").read_text()
    assert "| attention/bf16/hd64/n1024/causal | 270.0, 270.0 | 297.0, 297.0; 1.100 |" in summary
    assert "| attention/bf16/hd64/n2048/causal | 350.0, 350.0 | 350.0, 350.0; 1.000 |" in summary


def test_a_failed_or_missing_variant_is_reported(tmp_path):
    a = fake_bench(tmp_path / "a", {"attention/x": 100.0})
    b = fake_bench(tmp_path / "b", {}, fail=True)
    out = tmp_path / "out"
    run = subprocess.run(["bash", str(GPU / "ab_bench.sh"), str(out), "1", "x", f"a={a}", f"b={b}"],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 1
    assert "b round 1 failed" in run.stderr
    assert "| attention/x | 100.0 | n/a |" in (out / "summary.md").read_text()


def test_usage_errors(tmp_path):
    run = subprocess.run(["bash", str(GPU / "ab_bench.sh"), str(tmp_path), "1", "x", "no-equals-sign"],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "is not NAME=COMMAND" in run.stderr
    run = subprocess.run(["bash", str(GPU / "ab_bench.sh"), str(tmp_path)], capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "ab_bench.sh OUTDIR ROUNDS" in run.stderr
