"""Tests for tools/baselines/sdpa_bench.py's parts that need no PyTorch (problems, FLOP counts, the
JSON it writes) and for the results tools reading its files as baselines. Every number is
made up; none is a measurement."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

BASELINES = Path(__file__).resolve().parents[1]          # tools/baselines
RESULTS_TOOLS = BASELINES.parent / "results"               # tools/results
sys.path[:0] = [str(BASELINES), str(RESULTS_TOOLS), str(RESULTS_TOOLS / "tests")]

import flashsteps_results as fr  # noqa: E402
import results_table  # noqa: E402
import sdpa_bench as sb  # noqa: E402
import synth  # noqa: E402

DEVICE = {"gpu_vendor": "nvidia", "gpu_name": synth.GPU_NAME, "gpu_arch": "sm_00",
          "sm_count": "8", "driver_version": "0.0.test", "runtime_version": "CUDA 0.0",
          "torch_version": "0.0+synthetic", "git_commit": "0000000sdpa"}
# Median TFLOPS per backend are these multiples of the problem's FLOP count per ms.
SPEED = {"flash": 3.0, "cudnn": 4.0, "efficient": 2.0}


def run_tool(script: str, *args) -> subprocess.CompletedProcess:
    folder = BASELINES if script == "sdpa_bench.py" else RESULTS_TOOLS
    return subprocess.run([sys.executable, str(folder / script), *map(str, args)],
                          capture_output=True, text=True, check=False)


def sdpa_files(folder: Path, problems: list[sb.Problem]) -> dict[str, Path]:
    """Writes one synthetic file per backend with sdpa_bench's own writers: times chosen
    so the median gives SPEED[backend] * flops / 1e12 TFLOPS; cuDNN skips causal D=64."""
    paths = {}
    for key, backend in sb.BACKENDS.items():
        entries = []
        for p in problems:
            if key == "cudnn" and p.causal and p.head_dim == 64:
                entries.append(sb.skipped_entry(p, "synthetic: cuDNN not used because ..."))
                continue
            median_ms = 1e3 / SPEED[key]
            times = [median_ms * f for f in (1.3, 0.9, 1.0, 1.1, 1.0)]
            entries += sb.entries_for(p, times, {"max_abs_err": 1e-3, "rel_fro_err": 2e-4},
                                      peak=100.0)
        ctx = sb.backend_context(backend, DEVICE, {"sdpa_layout": "bshd"})
        paths[key] = folder / backend.filename
        sb.write_json(paths[key], sb.document(ctx, entries))
    return paths


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """Steps 01-03 from synth plus the three SDPA baselines, for one synthetic GPU."""
    root = synth.make_tree(tmp_path / "results", ceilings=False, ncu=False)
    problems = [sb.Problem("bf16", 128, n, c) for n in (1024, 4096) for c in (False, True)]
    problems += [sb.Problem("bf16", 64, 4096, c) for c in (False, True)]
    sdpa_files(root / synth.GPU, problems)
    return root


# --- problems and counts ---------------------------------------------------------------

def test_standard_problems_match_the_benchmark_set():
    ps = sb.standard_problems()
    assert len(ps) == 2 * 2 * 2 * 6
    assert ps[0].name == "attention/fp16/hd64/n512/full"
    assert ps[-1].name == "attention/bf16/hd128/n16384/causal"
    assert [p.seqlen for p in ps[:6]] == list(sb.SEQLENS)
    for p in ps:
        assert p.batch * p.seqlen == 16384 and p.heads * p.head_dim == 2048
        fields = fr.parse_name(p.name)  # the loader's pattern for our benchmark names
        assert (fields["dtype"], fields["head_dim"], fields["seqlen"], fields["mask"]) == \
            (p.dtype, p.head_dim, p.seqlen, "causal" if p.causal else "full")
    assert [p.name for p in sb.standard_problems(name_filter="hd128/n4096/")] == [
        "attention/fp16/hd128/n4096/full", "attention/fp16/hd128/n4096/causal",
        "attention/bf16/hd128/n4096/full", "attention/bf16/hd128/n4096/causal"]


def test_flops_and_bytes():
    assert sb.visible_pairs(4, False) == 16 and sb.visible_pairs(4, True) == 10
    p = sb.Problem("bf16", 128, 4096, True)
    assert sb.flops(p) == 4.0 * 4 * 16 * 128 * (4096 * 4097 // 2)
    assert sb.flops(sb.Problem("bf16", 128, 4096, False)) == 4.0 * 4 * 16 * 128 * 4096 ** 2
    elems = 16384 * 2048
    assert sb.min_bytes(p) == 2 * 4 * elems + 4 * 4 * 16 * 4096


def test_seed_is_seed_from_name_of_problem_cpp():
    # FNV-1a steps from problem.cpp's start value 1469598103934665603 (sic, as in the C++).
    assert sb.seed_from_name("") == 1469598103934665603
    h = ((1469598103934665603 ^ ord("a")) * 1099511628211) % 2 ** 64
    assert sb.seed_from_name("a") == h
    assert sb.seed_from_name("attention/bf16/hd64/n512/full") != \
        sb.seed_from_name("attention/bf16/hd64/n512/causal")


def test_check_rows_and_peak():
    assert sb.check_rows(4096) == [0, 1, 1365, 2731, 4095]
    assert sb.check_rows(1) == [0]
    assert sb.peak_tflops("sm_90", 132, 1980) == pytest.approx(1070.53056)  # as the bench
    assert sb.peak_tflops("gfx942", 304, 2100) == pytest.approx(2048 * 304 * 2100e6 / 1e12)
    assert sb.peak_tflops("sm_75", 40, 1500) == 0.0


def test_refusal_reason_keeps_the_reasons():
    # The shape of PyTorch 2.11's messages when the flash backend refuses fp32 inputs.
    warned = [
        "Memory efficient kernel not used because: (Triggered internally at x/sdp_utils.cpp:986.)",
        "Memory Efficient attention has been runtime disabled. (Triggered internally at "
        "x/sdp_utils_cpp.h:552.)",
        "Flash attention kernel not used because: (Triggered internally at x/sdp_utils.cpp:988.)",
        "Expected query, key and value to all be of dtype: {Half, BFloat16}. Got Query dtype: "
        "float instead. (Triggered internally at x/sdp_utils_cpp.h:91.)",
        "torch.backends.cuda.sdp_kernel() is deprecated.",
    ]
    assert sb.refusal_reason(warned, "No available kernel. Aborting execution.") == (
        "Expected query, key and value to all be of dtype: {Half, BFloat16}. Got Query dtype: "
        "float instead. No available kernel. Aborting execution.")
    assert sb.refusal_reason([], "") == "refused by SDPA (no reason given)"


def test_slug_matches_the_bench_and_loader():
    for name in ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"):
        assert sb.slugify(name) == fr.slugify(name)
    assert sb.slugify("NVIDIA H200") == "nvidia-h200"


# --- command line ----------------------------------------------------------------------

def test_parse_args_defaults_and_selection():
    args = sb.parse_args([])
    assert len(sb.selected_problems(args)) == 48 + 1 and args.repetitions == 3 and args.warmup == 1
    assert args.backends == ["flash", "cudnn", "efficient"] and sb.output_dir(args, "x") is None
    args = sb.parse_args(["--dtype", "bf16", "--head-dim", "128", "--seqlen", "8192", "1024",
                          "--causal", "on", "--backends", "cudnn", "--out", "/tmp/o"])
    assert [p.name for p in sb.selected_problems(args)] == [
        "attention/bf16/hd128/n1024/causal", "attention/bf16/hd128/n8192/causal"]
    assert sb.output_dir(args, "NVIDIA H200") == Path("/tmp/o")
    args = sb.parse_args(["--results-dir", "res"])
    assert sb.output_dir(args, "NVIDIA H200") == Path("res/nvidia-h200")


@pytest.mark.parametrize("argv", [["--seqlen", "1000"], ["--seqlen", "32768"], ["--repetitions", "0"],
                                  ["--head-dim", "96"], ["--out", "a", "--results-dir", "b"]])
def test_parse_args_rejects(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        sb.parse_args(argv)
    assert exc.value.code == 2


def test_main_without_torch(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes "import torch" fail
    assert sb.main(["--out", "/nonexistent/never-written"]) == 2
    assert "PyTorch is not installed" in capsys.readouterr().err


def test_help_runs_without_torch():
    proc = run_tool("sdpa_bench.py", "--help")
    assert proc.returncode == 0 and "--backends" in proc.stdout


# --- the JSON it writes ----------------------------------------------------------------

def test_entries_are_google_benchmark_aggregates():
    p = sb.Problem("fp16", 64, 512, False)
    entries = sb.entries_for(p, [2.0, 1.0, 4.0], {"max_abs_err": 1e-3}, peak=1000.0)
    assert [e["aggregate_name"] for e in entries] == ["mean", "median", "stddev", "cv"]
    median = entries[1]
    assert median["run_name"] == "attention/fp16/hd64/n512/full/repeats:3/manual_time"
    assert fr.base_name(median) == p.name
    assert median["real_time"] == 2.0 and median["time_unit"] == "ms"
    assert median["TFLOPS"] == pytest.approx(sb.flops(p) / 2e-3 / 1e12)
    assert median["pct_peak"] == pytest.approx(median["TFLOPS"] / 10)
    assert median["causal"] == 0 and median["seqlen_k"] == 512 and median["heads_kv"] == 32
    with pytest.raises(ValueError):
        sb.entries_for(p, [1.0, 0.0])
    with pytest.raises(ValueError):
        sb.entries_for(p, [])
    skipped = sb.skipped_entry(p, "why")
    assert skipped["error_occurred"] is True and skipped["error_message"] == "why"


def test_loader_reads_sdpa_files_as_baselines(tree):
    recs = fr.load_results(tree)
    sdpa = [r for r in recs if r.step.startswith("sdpa-")]
    assert {r.step for r in sdpa} == {"sdpa-flash", "sdpa-cudnn", "sdpa-efficient"}
    assert all(r.is_baseline for r in sdpa) and not any(r.is_baseline for r in recs
                                                         if r not in sdpa)
    assert [s for s, _ in fr.steps_of(recs)] == ["01", "02", "03", "sdpa-cudnn",
                                                  "sdpa-efficient", "sdpa-flash"]
    flash = next(r for r in sdpa if r.step == "sdpa-flash" and r.name == synth.HEADLINE)
    assert flash.step_label == "PyTorch SDPA flash" and flash.gpu == synth.GPU
    p = sb.Problem("bf16", 128, 4096, False)
    assert flash.tflops == pytest.approx(SPEED["flash"] * sb.flops(p) / 1e12)
    assert flash.counters["rel_fro_err"] == 2e-4
    assert flash.context["flashsteps_baseline"] == "pytorch-sdpa"
    assert flash.context["sdpa_backend"] == "flash"
    skipped = next(r for r in sdpa if r.step == "sdpa-cudnn"
                   and r.name == "attention/bf16/hd64/n4096/causal")
    assert skipped.skipped and skipped.error.startswith("synthetic: cuDNN not used")


def test_bench_summary_reads_sdpa_files(tree):
    gpu = tree / synth.GPU
    proc = run_tool("bench_summary.py", gpu / "sdpa-flash.json", gpu / "step02.json",
                    gpu / "sdpa-cudnn.json")
    assert proc.returncode == 0, proc.stderr
    header = proc.stdout.splitlines()[0]
    assert header.index("02 tiled") < header.index("PyTorch SDPA cuDNN") \
        < header.index("PyTorch SDPA flash")


# --- plot and tables -------------------------------------------------------------------

def test_plot_draws_sdpa_as_reference_lines(tree, tmp_path):
    import plot_results
    recs = fr.load_results(tree)
    styles = plot_results._styles(recs)
    assert {styles[s]["linestyle"] for s in ("01", "02", "03")} == {"-"}
    base = [styles[s] for s in ("sdpa-cudnn", "sdpa-efficient", "sdpa-flash")]
    assert len({str(b["linestyle"]) for b in base}) == 3 and "-" not in [b["linestyle"] for b in base]
    assert len({b["marker"] for b in base}) == 3
    proc = run_tool("plot_results.py", tree, "-o", tmp_path / "fig")
    assert proc.returncode == 0, proc.stderr
    svg = (tmp_path / "fig.svg").read_text()
    for label in ("PyTorch SDPA flash", "PyTorch SDPA cuDNN", "PyTorch SDPA efficient",
                  "03 online_softmax"):
        assert label in svg


def test_table_lists_sdpa_rows(tree):
    table = results_table.make_table(fr.load_results(tree), seqlen=4096)
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert rows[-3:] == [
        "| *PyTorch SDPA cuDNN* (baseline) | " + " | ".join(
            "— [1]" if d == 64 and c else
            fr.fmt_tflops(4 * sb.flops(sb.Problem("bf16", d, 4096, c)) / 1e12)
            for d in (64, 128) for c in (False, True)) + " |",
        "| *PyTorch SDPA efficient* (baseline) | " + " | ".join(
            fr.fmt_tflops(2 * sb.flops(sb.Problem("bf16", d, 4096, c)) / 1e12)
            for d in (64, 128) for c in (False, True)) + " |",
        "| *PyTorch SDPA flash* (baseline) | " + " | ".join(
            fr.fmt_tflops(3 * sb.flops(sb.Problem("bf16", d, 4096, c)) / 1e12)
            for d in (64, 128) for c in (False, True)) + " |"]
    assert "[1] skipped: synthetic: cuDNN not used because ..." in table


def test_step_table_baseline_columns(tree):
    recs = fr.load_results(tree)
    plain = results_table.make_step_table(recs, "03")
    assert "SDPA" not in plain                          # unchanged without --baselines
    text = results_table.make_step_table(recs, "03", head_dims=[128], masks=["full"],
                                         baselines=True)
    lines = text.splitlines()
    assert "| N | D=128 full | PyTorch SDPA cuDNN D=128 full | PyTorch SDPA efficient " \
           "D=128 full | PyTorch SDPA flash D=128 full |" in lines
    flash = 3 * sb.flops(sb.Problem("bf16", 128, 4096, False)) / 1e12
    row = next(line for line in lines if line.startswith("| 4096 |"))
    share = f"{100 * synth.TFLOPS['03'][0] / flash:.0f}%"
    assert row.endswith(f"| {fr.fmt_tflops(flash)} ({share}) |")
    assert any(line.startswith("Baseline columns:") for line in lines)
    # A GPU without baselines: no extra columns, even when asked.
    no_base = [r for r in recs if not r.is_baseline]
    assert results_table.make_step_table(no_base, "03", baselines=True) == \
        results_table.make_step_table(no_base, "03")


def test_table_cli_baselines_flag(tree):
    proc = run_tool("results_table.py", tree, "--step", "02", "--baselines", "--mask", "causal",
                    "--head-dim", "64")
    assert proc.returncode == 0, proc.stderr
    assert "PyTorch SDPA cuDNN D=64 causal" in proc.stdout and "— [1]" in proc.stdout
    proc = run_tool("results_table.py", tree, "--baselines")
    assert proc.returncode == 2 and "--baselines goes with --step" in proc.stderr


# --- the decode set --------------------------------------------------------------------

def test_decode_problems_match_the_benchmark_set():
    ps = sb.decode_problems()
    assert len(ps) == 2 * 2 * 2 * (3 * 4 + 1)
    assert ps[0].name == "decode/fp16/hd128/b1/hq32/hkv8/nq1/nk1024/full"
    assert ps[12].name == "decode/fp16/hd128/b1/hq32/hkv8/nq128/nk8192/causal"  # chunked prefill
    assert ps[-1].name == "decode/bf16/hd64/b1/hq32/hkv32/nq128/nk8192/causal"
    for p in ps:
        fields = fr.parse_name(p.name)  # the loader's pattern for decode_name()
        assert (fields["kind"], fields["dtype"], fields["head_dim"], fields["seqlen"], fields["mask"]) == \
            ("decode", p.dtype, p.head_dim, p.seqlen_k, "causal" if p.causal else "full")
        assert fr.decode_sizes(p.name) == {"batch": p.batch, "heads_q": 32, "heads_kv": p.heads_kv,
                                           "seqlen_q": p.seqlen_q, "seqlen_k": p.seqlen_k}
    assert [p.name for p in sb.decode_problems(["bf16"], [128], "b8/hq32/hkv8/nq1/nk65536")] == [
        "decode/bf16/hd128/b8/hq32/hkv8/nq1/nk65536/full"]


def test_decode_flops_and_bytes():
    assert sb.visible_pairs_bottom_right(2, 5) == 4 + 5
    assert sb.visible_pairs_bottom_right(5, 2) == 0 + 0 + 0 + 1 + 2
    p = sb.DecodeProblem("bf16", 128, 8, 8, 1, 65536, False)
    assert sb.flops(p) == 4.0 * 8 * 32 * 128 * 65536
    # K and V of B = 8, Hkv = 8, D = 128 in bf16: 1.07 GB at Nk = 32768 (the figure),
    # 2.15 GB at 65536.
    assert 2 * 2 * 8 * 8 * 32768 * 128 == 1_073_741_824
    kv = 2 * 2 * 8 * 8 * 65536 * 128
    assert sb.min_bytes(p) == kv + 2 * 2 * 8 * 32 * 128 + 4 * 8 * 32
    prefill = sb.DecodeProblem("bf16", 128, 1, 8, 128, 8192, True)
    assert sb.flops(prefill) == 4.0 * 32 * 128 * sum(8192 - 127 + i for i in range(128))


def test_decode_entries_load_and_summarize(tmp_path):
    problems = sb.decode_problems(["bf16"], [128])[:3]
    entries = []
    for p in problems:
        entries += sb.entries_for(p, [0.2, 0.1, 0.3], {"max_abs_err": 1e-3, "rel_fro_err": 2e-4})
    median = entries[1]
    assert median["us_per_call"] == pytest.approx(200.0)
    assert median["GBps"] == pytest.approx(sb.min_bytes(problems[0]) / 0.2e-3 / 1e9)
    assert median["heads_kv"] == 8 and median["seqlen_q"] == 1 and median["seqlen_k"] == 1024
    path = tmp_path / synth.GPU / "sdpa-cudnn.json"
    sb.write_json(path, sb.document(sb.backend_context(sb.BACKENDS["cudnn"], DEVICE, {}), entries))
    recs = fr.load_file(path)
    assert [r.kind for r in recs] == ["decode"] * 3
    proc = run_tool("bench_summary.py", path)
    assert proc.returncode == 0, proc.stderr
    first = problems[0]
    tbps = sb.min_bytes(first) / 0.2e-3 / 1e12
    assert f"200.0 us {tbps:.2f} TB/s" in proc.stdout
    # A counter that contradicts the name is an error, as for the standard set.
    bad = json.loads(path.read_text())
    for e in bad["benchmarks"]:
        if e.get("heads_kv") is not None:
            e["heads_kv"] = 32.0
    path.write_text(json.dumps(bad))
    with pytest.raises(fr.ResultsError, match="heads_kv"):
        fr.load_file(path)


def test_decode_set_has_files_of_its_own():
    flash = sb.BACKENDS["flash"]
    assert flash.file_for("standard") == "sdpa-flash.json" == flash.filename
    assert flash.file_for("decode") == "sdpa-flash-decode.json"


def test_parse_args_decode_set():
    args = sb.parse_args(["--set", "decode", "--dtype", "bf16", "--head-dim", "128"])
    names = [p.name for p in sb.selected_problems(args)]
    assert len(names) == 2 * 13 and all(n.startswith("decode/bf16/hd128/") for n in names)


def test_minilm_problem_is_the_fixture_and_ends_the_standard_set():
    p = sb.minilm_problem()
    assert p is not None, "tests/data/minilm_qkv.json is part of the repository"
    assert (p.name, p.batch, p.heads, p.seqlen, p.head_dim, p.dtype, p.causal) == \
        ("minilm/fp16/layers6", 6, 12, 128, 32, "fp16", False)
    assert sb.flops(p) == 4.0 * 6 * 12 * 32 * 128 * 128
    assert sb.min_bytes(p) == 2 * 4 * (6 * 12 * 128 * 32) + 4 * 6 * 12 * 128
    assert sb.selected_problems(sb.parse_args([]))[-1] == p
    for argv in (["--no-minilm"], ["--dtype", "bf16"], ["--filter", "attention/"]):
        assert p not in sb.selected_problems(sb.parse_args(argv)), argv
    assert sb.selected_problems(sb.parse_args(["--filter", "minilm"])) == [p]
    assert sb.minilm_problem(Path("/nonexistent/minilm_qkv.json")) is None


# --- timing ---------------------------------------------------------------------------

class _FakeCuda:
    """torch.cuda as timed_calls() uses it, with a GPU that runs what the host queued, in
    order, asynchronously: a queued operation starts when the GPU is free and the host has
    queued it. A call takes ``gpu_ms(i)`` on the GPU (i counts the calls) and ``host_ms`` of
    host time to queue; _sleep takes its cycles at ``cycles_per_ms``; an event completes when
    the GPU reaches it, and elapsed_time() needs both ends complete (as torch's does)."""

    def __init__(self, gpu_ms, host_ms: float = 0.001, cycles_per_ms: float = 1.98e6):
        self.gpu_ms = gpu_ms if callable(gpu_ms) else (lambda i, ms=gpu_ms: ms)
        self.host_ms, self.cycles_per_ms = host_ms, cycles_per_ms
        self.host, self.gpu_free, self.calls, self.sleeps, self.idle = 0.0, 0.0, 0, [], 0.0
        cuda = self

        class Event:
            def __init__(self, enable_timing: bool):
                assert enable_timing
                self.t = None

            def record(self):
                self.t = cuda._run(0.0)

            def synchronize(self):
                cuda.host = max(cuda.host, self.t)

            def elapsed_time(self, other):
                assert cuda.host >= other.t, "elapsed_time() before the stop event completed"
                return other.t - self.t

        self.Event = Event

    def _run(self, ms: float) -> float:
        start = max(self.gpu_free, self.host)
        self.idle += start - self.gpu_free
        self.gpu_free = start + ms
        return self.gpu_free

    def current_device(self):
        return 0

    def synchronize(self):
        self.host = max(self.host, self.gpu_free)

    def _sleep(self, cycles):
        self.sleeps.append(cycles)
        self._run(cycles / self.cycles_per_ms)

    def call(self):
        self.host += self.host_ms
        self._run(self.gpu_ms(self.calls))
        self.calls += 1


def _timed(monkeypatch, cuda, timing):
    monkeypatch.setattr(sb.time, "perf_counter", lambda: cuda.host / 1e3)
    monkeypatch.setattr(sb, "_SLEEP_CYCLES_PER_S", {})
    return sb.timed_calls(type("FakeTorch", (), {"cuda": cuda}), cuda.call, sb.Timing(*timing))


def test_next_iterations_is_google_benchmarks():
    assert sb.next_iterations(1, 0.002, 0.05) == 10     # under a tenth of min_time: at most x10
    assert sb.next_iterations(10, 0.02, 0.05) == 35     # enough for 1.4 x min_time
    assert sb.next_iterations(10, 0.02, 0.2) == 100     # exactly a tenth: still at most x10
    assert sb.next_iterations(100, 0.19, 0.2) == 147    # 1.4 x 0.2 / 0.19
    assert sb.next_iterations(100, 0.3, 0.2) == 200     # a multiplier under 1.0 becomes 2


def test_timed_calls_follows_google_benchmarks_runs(monkeypatch):
    # 2 ms calls: one call per pair. Warm-up runs of 1, 10, 35 calls (70 ms >= 50 ms); the first
    # repetition's runs of 1, 10, 100 calls (200 ms); two more repetitions of 100 calls.
    cuda = _FakeCuda(2.0)
    times = _timed(monkeypatch, cuda, (1, 0.05, 0.2, 3))
    assert times == pytest.approx([2.0] * 3)
    assert cuda.calls == 1 + 3 + 2 + (1 + 10 + 35) + (1 + 10 + 100) + 100 + 100
    # The wait before a single call is 0.05 ms; the sizing calls wait 0.5 ms; the calibration
    # of _sleep is two more (its first launch and the timed one).
    single, sizing = int(0.05 * 1.98e6), int(0.5 * 1.98e6)
    assert cuda.sleeps[2:5] == [sizing] * 3 and set(cuda.sleeps[5:]) == {single}


@pytest.mark.parametrize("gpu_ms, batch", [(0.3, 4), (0.25, 4), (1.0, 1), (0.001, 64)])
def test_batch_is_about_a_millisecond(monkeypatch, gpu_ms, batch):
    cuda = _FakeCuda(gpu_ms)
    times = _timed(monkeypatch, cuda, (1, 0.0, 0.0, 1))
    assert times == pytest.approx([gpu_ms])
    assert cuda.calls == 1 + 3 + 2 * batch + batch  # warm-up, sizing, host timing, one batch


def test_batch_from_the_fastest_sizing_call(monkeypatch):
    # Sizing calls 1 and 2 (after one warm-up call) take 5 ms, the third 0.3 ms: batch of 4.
    cuda = _FakeCuda(lambda i: 5.0 if i in (1, 2) else 0.3)
    _timed(monkeypatch, cuda, (1, 0.0, 0.0, 1))
    assert cuda.calls == 1 + 3 + 2 * 4 + 4


def test_events_time_the_gpu_not_a_slow_host(monkeypatch):
    # 64 calls of 7.8 us that the host queues at 30 us each: the host lags 1.42 ms per batch,
    # so each batch waits 0.5 + 2.84 ms, and the events still time the GPU alone.
    cuda = _FakeCuda(2.0 ** -7, host_ms=0.03)
    times = _timed(monkeypatch, cuda, (1, 0.01, 0.02, 3))
    assert times == pytest.approx([2.0 ** -7] * 3)
    lag = 64 * (0.03 - 2.0 ** -7)
    assert cuda.sleeps[-1] == pytest.approx((0.5 + 2 * lag) * 1.98e6, abs=1)


def test_a_wait_too_short_would_time_the_host(monkeypatch):
    # The same calls behind the benchmark's plain 0.5 ms: the host falls behind, and the
    # events would time its queueing. The fake shows it, so the test above can fail.
    cuda = _FakeCuda(2.0 ** -7, host_ms=0.03)
    monkeypatch.setattr(sb.time, "perf_counter", lambda: 0.0)  # the host seems instant
    monkeypatch.setattr(sb, "_SLEEP_CYCLES_PER_S", {})
    times = sb.timed_calls(type("FakeTorch", (), {"cuda": cuda}), cuda.call, sb.Timing(1, 0.0, 0.0, 1))
    assert times[0] > 2 * 2.0 ** -7


def test_sleep_is_calibrated_per_device(monkeypatch):
    # A counter at 100 MHz (as AMD's): a 0.5 ms wait is 50,000 cycles, not 1,000,000.
    cuda = _FakeCuda(0.3, cycles_per_ms=1e5)
    _timed(monkeypatch, cuda, (1, 0.0, 0.0, 1))
    assert cuda.sleeps[2:5] == [50_000] * 3


def test_timed_calls_needs_sleep():
    torch = type("FakeTorch", (), {"cuda": type("NoSleep", (), {})()})
    with pytest.raises(RuntimeError, match="_sleep"):
        sb.timed_calls(torch, lambda: None, sb.Timing())


def test_timing_flags():
    args = sb.parse_args(["--warmup-time", "0", "--min-time", "1.5", "--repetitions", "5"])
    assert sb.timing_of(args) == sb.Timing(1, 0.0, 1.5, 5)
    assert "5 repetitions of at least 1.5 s of calls" in sb.timing_of(args).text()
    for argv in (["--min-time", "-1"], ["--warmup-time", "nan"], ["--min-time", "100"]):
        with pytest.raises(SystemExit):
            sb.parse_args(argv)


# --- inputs rotated past L2 ----------------------------------------------------------------

@pytest.mark.parametrize("set_bytes,l2,copies", [
    (256 * 2**20, 60 * 2**20, 1),     # a standard problem: Q, K, V and O far past the L2
    (2.36e6, 60 * 2**20, 54),         # MiniLM with O and the LSE: ceil(2 * 60 MiB / 2.36 MB)
    (1000, 60 * 2**20, 64),           # capped at 64
    (40 * 2**20, 60 * 2**20, 3),      # ceil(2 * 60 / 40)
    (1000, 0, 1),                     # L2 unknown: no copies
])
def test_copies_against_l2_is_the_benchmarks_rule(set_bytes, l2, copies):
    assert sb.copies_against_l2(set_bytes, l2) == copies


class _Tensor:
    """What rotated() reads of a [B, H, N, D] tensor: its shape, size and device, clone()."""

    def __init__(self, shape: tuple[int, ...], name: str):
        self.shape, self.name, self.device = shape, name, 0

    def numel(self):
        return math.prod(self.shape)

    def element_size(self):
        return 2

    def clone(self):
        return _Tensor(self.shape, self.name + "'")


def _rotated(l2: int, shape=(1, 1, 50, 5)):
    props = type("Props", (), {"L2_cache_size": l2})
    cuda = type("Cuda", (), {"get_device_properties": staticmethod(lambda dev: props)})
    q, k, v = (_Tensor(shape, n) for n in "qkv")
    seen = []

    class Output:  # what a call returns; weakly referable, and held by nobody else here
        pass

    def call(q, k, v):
        seen.append((q, k, v))
        return Output()

    wrapped, n = sb.rotated(type("FakeTorch", (), {"cuda": cuda}), call, q, k, v)
    return wrapped, n, (q, k, v), seen


def test_rotated_counts_the_benchmarks_bytes():
    # Q, K, V and O of 250 two-byte elements each, and a 4-byte LSE for each of 50 rows: 2200.
    assert _rotated(l2=2200)[1] == 2      # two sets reach twice the L2 (without the LSE: three)
    assert _rotated(l2=2201)[1] == 3      # a byte more: three


def test_rotated_cycles_over_copies_starting_with_the_callers():
    wrapped, n, qkv, seen = _rotated(l2=2200)
    outs = [wrapped() for _ in range(5)]
    assert n == 2
    assert seen[0] == qkv and seen[2] == qkv and seen[4] == qkv
    assert seen[1][0] is not qkv[0] and [t.name for t in seen[1]] == ["q'", "k'", "v'"] and seen[3] == seen[1]
    assert len(set(map(id, outs))) == 5   # each call's own output, returned


def test_rotated_keeps_each_copys_output_until_its_next_call():
    """The output of a copy lives until that copy runs again, so the allocator cannot give the
    next call the memory of the previous one: O rotates with the inputs."""
    import weakref
    wrapped, n, _, _ = _rotated(l2=2200)
    assert n == 2
    made = [weakref.ref(wrapped()) for _ in range(3)]
    # After three calls: the first output was dropped when copy 0 ran again; the second and
    # the third are still held.
    assert [r() is None for r in made] == [True, False, False]
