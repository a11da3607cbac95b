"""Tests for the results tools, on the synthetic fixtures in tools/results/tests/data/."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
RESULTS = DATA / "results"
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_summary  # noqa: E402
import decode_synth as ds  # noqa: E402
import flashsteps_results as fr  # noqa: E402
import results_table  # noqa: E402


def by(records, step, name):
    (rec,) = [r for r in records if r.step == step and r.name == name]
    return rec


def copy_results(tmp_path: Path) -> Path:
    dst = tmp_path / "results"
    shutil.copytree(RESULTS, dst)
    return dst


def run_tool(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOLS / script), *map(str, args)],
                          capture_output=True, text=True, check=False)


# --- parsing --------------------------------------------------------------------------

def test_parse_name():
    assert fr.parse_name("attention/bf16/hd128/n4096/causal") == {
        "kind": "attention", "dtype": "bf16", "head_dim": 128, "seqlen": 4096, "mask": "causal"}
    assert fr.parse_name("minilm/fp16/layers6")["kind"] == "minilm"
    assert fr.parse_name("attention/bf16/hd128/n4096") == {}
    assert fr.parse_name("attention/int8/hd128/n4096/full") == {}


def test_base_name_strips_gbench_suffixes():
    assert fr.base_name({"run_name": "attention/fp16/hd64/n512/full/repeats:5/real_time"}) \
        == "attention/fp16/hd64/n512/full"


def test_load_results_fields_and_medians():
    recs = fr.load_results(RESULTS)
    assert {r.gpu for r in recs} == {"test-gpu"}
    assert {r.vendor for r in recs} == {"nvidia"}
    assert len(recs) == 13 + 13 + 12
    r = by(recs, "01", "attention/bf16/hd64/n512/full")
    assert (r.dtype, r.head_dim, r.seqlen, r.mask, r.kind) == ("bf16", 64, 512, "full", "attention")
    assert r.tflops == 2.0            # the median aggregate, not the mean (2.1)
    assert r.counters["batch"] == 32 and r.counters["rel_fro_err"] == pytest.approx(2e-4)
    assert r.context["gpu_name"] == "Test GPU (synthetic)" and r.step_name == "naive"
    # Iteration entries only: median of 0.9x, 1.0x, 1.2x.
    assert by(recs, "02", "attention/bf16/hd64/n512/full").tflops == 4.0
    m = by(recs, "02", "minilm/fp16/layers6")
    assert (m.kind, m.dtype, m.head_dim, m.seqlen, m.tflops) == ("minilm", "fp16", None, None, 1.6)


def test_skipped_entries_are_errors_not_zero():
    recs = fr.load_results(RESULTS)
    r = by(recs, "01", "attention/bf16/hd128/n16384/causal")
    assert r.skipped and r.tflops is None
    assert r.error == "synthetic: seqlen above 2048 not supported"


def test_partly_failed_repetitions_and_skip_message(tmp_path):
    base = {"run_name": "attention/fp16/hd64/n512/full", "run_type": "iteration"}
    doc = json.loads((RESULTS / "test-gpu" / "step02.json").read_text())
    doc["benchmarks"] = [
        {**base, "error_occurred": True, "error_message": "flaky"},
        {**base, "TFLOPS": 3.0}, {**base, "TFLOPS": 5.0},
        {**base, "run_name": "attention/fp16/hd64/n1024/full", "skipped": True,
         "skip_message": "not built"},
    ]
    path = tmp_path / "x.json"
    path.write_text(json.dumps(doc))
    a, b = fr.load_file(path)
    assert a.tflops == 4.0 and not a.skipped
    assert b.skipped and b.error == "not built"


def test_step_order_puts_baselines_last():
    steps = ["sdpa-cudnn", "10", "02", "sdpa-flash", "01"]
    assert sorted(steps, key=fr.step_sort_key) == ["01", "02", "10", "sdpa-cudnn", "sdpa-flash"]


# --- malformed input ------------------------------------------------------------------

def _set(path, value):
    def edit(doc):
        node = doc
        for key in path[:-1]:
            node = node[key]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit, field", [
    (_set(("context", "gpu_vendor"), KeyError), "context.gpu_vendor"),
    (_set(("context", "gpu_vendor"), "intel"), "context.gpu_vendor"),
    (_set(("context", "flashsteps_step"), 1), "context.flashsteps_step"),
    (_set(("benchmarks",), {}), "benchmarks"),
    (_set(("benchmarks", 1, "TFLOPS"), "fast"), "TFLOPS"),
    (_set(("benchmarks", 1, "TFLOPS"), KeyError), "TFLOPS"),
    (_set(("benchmarks", 1, "head_dim"), 96), "head_dim"),
    (_set(("benchmarks", 1, "run_name"), "attention/bf16/n512"), "name"),
])
def test_malformed_input_names_file_and_field(tmp_path, edit, field):
    doc = json.loads((RESULTS / "test-gpu" / "step01.json").read_text())
    edit(doc)
    path = tmp_path / "test-gpu" / "bad.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    with pytest.raises(fr.ResultsError) as exc:
        fr.load_results(tmp_path)
    assert str(path) in str(exc.value) and field in str(exc.value)


def test_invalid_json_and_duplicates(tmp_path):
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "broken.json").write_text("{not json")
    with pytest.raises(fr.ResultsError, match="broken.json: file: cannot read JSON"):
        fr.load_results(tmp_path)
    results = copy_results(tmp_path / "dup")
    shutil.copy(results / "test-gpu" / "step01.json", results / "test-gpu" / "again.json")
    with pytest.raises(fr.ResultsError, match="already loaded from"):
        fr.load_results(results)


def test_cli_reports_malformed_input(tmp_path):
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "x.json").write_text(json.dumps({"context": {}, "benchmarks": []}))
    proc = run_tool("results_table.py", tmp_path)
    assert proc.returncode == 2 and "x.json: context.flashsteps_step" in proc.stderr


# --- Markdown table -------------------------------------------------------------------

def test_table_content():
    # The synthetic tree's longest size is 16384 (the default N, 8192, is the README's).
    table = results_table.make_table(fr.load_results(RESULTS), seqlen=16384)
    lines = table.splitlines()
    header = next(line for line in lines if line.startswith("| Step"))
    assert header == ("| Step | bf16 D=64 full | bf16 D=64 causal | bf16 D=128 full "
                      "| bf16 D=128 causal | minilm/fp16/layers6 |")
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| Step")]
    assert rows == ["| 01 naive | — [1] | — [1] | — [1] | — [1] | 0.80 |",
                    "| 02 tiled | 5.00 | 2.50 | 10.0 | 5.00 | 1.60 |",
                    "| *sdpa-flash* (baseline) | 12.5 | 6.25 | 25.0 | 12.5 | n/a |"]
    assert "[1] skipped: synthetic: seqlen above 2048 not supported" in lines
    assert "**AMD**: not measured." in lines
    assert "driver 0.0.test · CUDA 0.0 · commit 0000000synth" in table


def test_table_options():
    out = run_tool("results_table.py", RESULTS, "--seqlen", "2048", "--head-dim", "128",
                   "--mask", "causal")
    assert out.returncode == 0
    assert "| 01 naive | 2.20 | 0.80 |" in out.stdout and "[1]" not in out.stdout


def test_table_rejects_values_not_measured():
    # A seqlen or head dim the results do not hold is named, not printed as a table of n/a.
    out = run_tool("results_table.py", RESULTS, "--seqlen", "100")
    assert out.returncode == 2 and "--seqlen 100: not measured in bf16" in out.stderr
    out = run_tool("results_table.py", RESULTS, "--head-dim", "77", "128")
    assert out.returncode == 2 and "--head-dim 77: not measured in bf16" in out.stderr
    out = run_tool("results_table.py", RESULTS, "--step", "02", "--head-dim", "77")
    assert out.returncode == 2 and "--head-dim 77" in out.stderr


def test_table_update_check_round_trip(tmp_path):
    doc = tmp_path / "doc.md"
    shutil.copy(DATA / "table_doc.md", doc)
    n = ("--seqlen", "16384")  # the synthetic tree's longest size
    stale = run_tool("results_table.py", RESULTS, "--check", doc, *n)
    assert stale.returncode == 1 and "-This stale text" in stale.stdout
    assert run_tool("results_table.py", RESULTS, "--update", doc, *n).returncode == 0
    text = doc.read_text()
    assert text.startswith("# Synthetic document") and text.endswith("must survive too.\n")
    assert "| 02 tiled | 5.00 |" in text and "stale text" not in text
    assert run_tool("results_table.py", RESULTS, "--check", doc, *n).returncode == 0
    assert run_tool("results_table.py", RESULTS, "--update", doc, *n).returncode == 0
    assert doc.read_text() == text                      # idempotent
    # A changed result makes the table stale again.
    results = copy_results(tmp_path)
    step02 = results / "test-gpu" / "step02.json"
    step02.write_text(step02.read_text().replace('"TFLOPS": 10.0', '"TFLOPS": 11.0'))
    assert run_tool("results_table.py", results, "--check", doc, *n).returncode == 1


def test_table_markers_required(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("no markers here\n")
    for mode in ("--update", "--check"):
        proc = run_tool("results_table.py", RESULTS, mode, doc)
        assert proc.returncode == 2 and "results-table:begin" in proc.stderr
    assert doc.read_text() == "no markers here\n"
    with pytest.raises(ValueError):
        results_table.splice(f"{results_table.END}\n{results_table.BEGIN}\n", "x\n")


# --- plain-text summary ---------------------------------------------------------------

def test_bench_summary():
    files = [RESULTS / "test-gpu" / n for n in ("sdpa-flash.json", "step02.json", "step01.json")]
    proc = run_tool("bench_summary.py", *files)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["benchmark", "01", "naive", "02", "tiled", "sdpa-flash",
                                "max", "rel", "err"]
    row = next(line for line in lines if line.startswith("attention/bf16/hd128/n16384/full"))
    assert row.split() == ["attention/bf16/hd128/n16384/full", "—", "10.0", "25.0", "2.0e-04"]
    assert next(line for line in lines if line.startswith("minilm")).split() == \
        ["minilm/fp16/layers6", "0.80", "1.60", "2.0e-04"]
    assert "  01 naive: 4 skipped: synthetic: seqlen above 2048 not supported" in lines
    assert any(line.startswith("  02 tiled: Test GPU (synthetic) (sm_00, 8 SMs)")
               for line in lines)


def test_bench_summary_same_step_twice():
    step01 = RESULTS / "test-gpu" / "step01.json"
    header = bench_summary.summarize([step01, step01]).splitlines()[0]
    assert header.count("01 naive@test-gpu-synthetic (step01.json)") == 2


def test_bench_summary_bad_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    proc = run_tool("bench_summary.py", bad)
    assert proc.returncode == 2 and "bad.json: top level" in proc.stderr


# --- plot ------------------------------------------------------------------------------

def test_panel_series_gaps():
    import plot_results
    recs = [r for r in fr.load_results(RESULTS)
            if r.name.startswith("attention/bf16/hd64/") and r.mask == "full"]
    series = plot_results.panel_series(recs)
    assert list(series) == ["01", "02", "sdpa-flash"]
    xs, ys = series["01"]
    assert xs == [512, 2048, 16384] and ys[:2] == [2.0, 2.2] and math.isnan(ys[2])


def test_plot_not_measured_and_deterministic(tmp_path):
    proc = run_tool("plot_results.py", RESULTS, "-o", tmp_path / "a" / "fig")
    assert proc.returncode == 0, proc.stderr
    png, svg = tmp_path / "a" / "fig.png", tmp_path / "a" / "fig.svg"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text()
    assert ">not measured<" not in text                 # no empty AMD row ...
    assert "AMD: not measured" in text                  # ... a line says so
    assert "mathdefault{10^{" in text                   # TFLOPS on a log axis
    assert "Test GPU (synthetic)" in text and "driver 0.0.test" in text
    assert "sdpa-flash" in text and "02 tiled" in text
    assert run_tool("plot_results.py", RESULTS, "-o", tmp_path / "b").returncode == 0
    assert (tmp_path / "b.svg").read_bytes() == svg.read_bytes()
    assert (tmp_path / "b.png").read_bytes() == png.read_bytes()


def test_plot_with_amd_results(tmp_path):
    results = copy_results(tmp_path)
    amd = results / "test-amd-gpu"
    amd.mkdir()
    for src in (results / "test-gpu").glob("*.json"):
        doc = json.loads(src.read_text())
        doc["context"].update(gpu_vendor="amd", gpu_name="Test AMD GPU (synthetic)")
        (amd / src.name).write_text(json.dumps(doc))
    proc = run_tool("plot_results.py", results, "-o", tmp_path / "fig")
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "fig.svg").read_text()
    assert "not measured" not in text and "Test AMD GPU (synthetic)" in text
    assert "HIP 0.0" in text


def test_plot_empty_results_dir(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = run_tool("plot_results.py", tmp_path / "empty", "-o", tmp_path / "fig")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "fig.svg").read_text().count(">not measured<") == 4   # one row


def test_lettered_steps_are_steps_in_reading_order():
    steps = ["05", "sdpa-flash", "04", "04b", "03", "04a"]
    assert sorted(steps, key=fr.step_sort_key) == ["03", "04a", "04b", "04", "05", "sdpa-flash"]
    assert not fr.is_baseline("04a") and fr.is_baseline("sdpa-flash") and fr.is_baseline("4a")


def test_previous_step_skips_steps_not_measured(tmp_path):
    root = copy_results(tmp_path)
    records = fr.load_results(root)
    numbered = [s for s, _ in fr.steps_of(records) if not fr.is_baseline(s)]
    last = numbered[-1]
    assert results_table.previous_step(records, last) == (numbered[-2] if len(numbered) > 1 else None)
    # A lettered step between two measured ones: 04 compares with 04b once 04b is measured.
    gpu_dir = next(p for p in root.iterdir() if p.is_dir())
    src = next(gpu_dir.glob("step*.json"))
    doc = json.loads(src.read_text())
    doc["context"]["flashsteps_step"], doc["context"]["flashsteps_step_name"] = "09b", "lettered"
    (gpu_dir / "step09b.json").write_text(json.dumps(doc))
    records = fr.load_results(root)
    assert results_table.previous_step(records, "10") == "09b"
    assert results_table.previous_step(records, "09b") == max(
        (s for s in numbered if fr.step_sort_key(s) < fr.step_sort_key("09b")), key=fr.step_sort_key)


# --- command-line defaults and argument errors --------------------------------------------

REPO = TOOLS.parents[1]


def test_default_seqlen_is_the_readmes():
    # The README's Results section says which N its table is at, and the table it holds is at
    # that N: the tool's default must be it, or `--check README.md` reports it stale and
    # `--update README.md` rewrites it at another N.
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Results"):readme.index(results_table.BEGIN)]
    (prose,) = set(re.findall(r"at N = (\d+)", section))
    block = readme[readme.index(results_table.BEGIN):readme.index(results_table.END)]
    assert set(re.findall(r"TFLOPS at N = (\d+)", block)) == {prose}
    out = run_tool("results_table.py", RESULTS)
    assert out.returncode == 0, out.stderr
    assert f"TFLOPS at N = {prose} (median" in out.stdout
    assert "at N = 16384" not in out.stdout


@pytest.mark.parametrize("args", [("--seqlen", "0"), ("--seqlen", "-5"),
                                  ("--step", "02", "--seqlen", "0")])
def test_a_seqlen_that_is_no_length_is_rejected(args):
    out = run_tool("results_table.py", RESULTS, *args)
    assert out.returncode == 2 and "argument --seqlen" in out.stderr, out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize("step", ["99", "abc", "04c", "x02"])
def test_an_unknown_step_is_an_error(step):
    out = run_tool("results_table.py", RESULTS, "--step", step)
    assert out.returncode == 2, out.stdout
    assert f"argument --step: '{step}' is not a step" in out.stderr
    assert "01 02" in out.stderr and out.stdout == ""


def test_a_project_step_not_measured_yet_gets_its_table():
    # A step folder of the project with no results: the "not measured" table, rc 0 (the book
    # stages one per step folder before anything is measured); "2" is step 02 (make step2).
    out = run_tool("results_table.py", RESULTS, "--step", "07")
    assert out.returncode == 0 and "**NVIDIA**: step 07 not measured." in out.stdout
    short = run_tool("results_table.py", RESULTS, "--step", "2")
    assert short.returncode == 0 and short.stdout == run_tool(
        "results_table.py", RESULTS, "--step", "02").stdout


@pytest.mark.parametrize("versus,why", [("99", "'99' is not a step"),
                                        ("abc", "'abc' is not a step"),
                                        ("03", "step 03 is not measured on test-gpu, where step 02 is")])
def test_an_unknown_or_unmeasured_versus_is_an_error(versus, why):
    out = run_tool("results_table.py", RESULTS, "--step", "02", "--versus", versus)
    assert out.returncode == 2 and f"argument --versus: {why}" in out.stderr, out.stderr
    assert out.stdout == ""


def test_versus_counts_only_what_the_step_table_compares(tmp_path):
    # Step 10 with decode-set results only, step 03 with fp16 attention only: neither gives
    # --step 02 (bf16 attention) a speed-up, though both are "measured" on its GPU.
    root = copy_results(tmp_path)
    gpu = root / "test-gpu"
    ds.write(gpu / "step10-decode.json", ds.decode_json("10", {ds.B1: 25.0, ds.B8: 500.0}))
    ds.write(gpu / "step06-decode.json", ds.decode_json("06", {ds.B1: 100.0}))
    doc = json.loads((gpu / "step01.json").read_text())
    doc["context"]["flashsteps_step"], doc["context"]["flashsteps_step_name"] = "03", "online"
    for b in doc["benchmarks"]:
        for key in ("name", "run_name"):
            b[key] = b[key].replace("/bf16/", "/fp16/")
    (gpu / "step03.json").write_text(json.dumps(doc))
    for args, why in ((("--step", "02", "--versus", "10"), "step 10 is not measured on test-gpu, "
                       "where step 02 is: no bf16 attention speed-up to show"),
                      (("--step", "10", "--versus", "02"), "step 02 is not measured on test-gpu, "
                       "where step 10 is: no bf16 decode speed-up to show"),
                      (("--step", "03", "--versus", "02", "--dtype", "fp16"),
                       "step 02 is not measured on test-gpu, where step 03 is: no fp16 attention")):
        out = run_tool("results_table.py", root, *args)
        assert out.returncode == 2 and f"argument --versus: {why}" in out.stderr, (args, out.stderr)
        assert out.stdout == ""
    # What the table does compare: decode with decode, attention in the dtype asked for.
    out = run_tool("results_table.py", root, "--step", "10", "--versus", "06")
    assert out.returncode == 0 and "| 06 autotuned TB/s |" in out.stdout, out.stderr
    out = run_tool("results_table.py", root, "--step", "02", "--versus", "01")
    assert out.returncode == 0 and "speed-up over step 01" in out.stdout, out.stderr
    recs = fr.load_results(root)
    assert results_table.step_arg_error(recs, "01", "03", dtype="fp16") is None
    assert results_table.step_arg_error(recs, "01", "03") == (
        "argument --versus: step 03 is not measured on test-gpu, where step 01 is: no bf16 "
        "attention speed-up to show")


@pytest.mark.parametrize("versus", ["02", "2"])
def test_versus_the_step_itself_is_an_error(versus):
    out = run_tool("results_table.py", RESULTS, "--step", "02", "--versus", versus)
    assert out.returncode == 2, out.stdout
    assert "argument --versus: '02' is --step itself: no speed-up to show" in out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize("seqlen", ["999", "8192", "512"])
def test_seqlen_with_step_is_an_error(seqlen):
    # The --step table has a row per N; a --seqlen beside it was ignored (999 too).
    out = run_tool("results_table.py", RESULTS, "--step", "02", "--seqlen", seqlen)
    assert out.returncode == 2, out.stdout
    assert "argument --seqlen: the --step table shows every N" in out.stderr
    assert out.stdout == ""


def test_versus_needs_step_and_takes_the_short_spelling():
    out = run_tool("results_table.py", RESULTS, "--versus", "01")
    assert out.returncode == 2 and "argument --versus: goes with --step" in out.stderr
    out = run_tool("results_table.py", RESULTS, "--step", "02", "--versus", "1")
    assert out.returncode == 0 and "speed-up over step 01 naive" in out.stdout
    # A baseline is not a step: "over PyTorch SDPA flash", not "over step PyTorch SDPA flash"
    # (this data's baseline record has no display name, so its id is the label).
    out = run_tool("results_table.py", RESULTS, "--step", "02", "--versus", "sdpa-flash")
    assert out.returncode == 0, out.stderr
    assert "in brackets the speed-up over sdpa-flash on the same benchmark" in out.stdout, out.stdout


def test_step_arg_error_with_and_without_step_folders(tmp_path):
    recs = fr.load_results(RESULTS)
    err = results_table.step_arg_error
    assert {"01", "04a", "04", "10"} <= results_table.project_steps()
    # Step folders without step 07: it is no step (the results' steps and baselines are).
    steps = tmp_path / "steps"
    for name in ("01_naive", "02_tiled", "03_online_softmax", "07_not_a_step_yet"):
        (steps / name).mkdir(parents=True)
    for name in ("01_naive", "02_tiled", "03_online_softmax"):
        (steps / name / "step.cu").write_text("")
    assert results_table.project_steps(steps) == {"01", "02", "03"}
    assert err(recs, "sdpa-flash", "02", steps) is None
    assert err(recs, "07", None, steps) == "argument --step: '07' is not a step (steps: 01 02 03 sdpa-flash)"
    assert err(recs, "02", "03", steps) == ("argument --versus: step 03 is not measured on "
                                            "test-gpu, where step 02 is: no bf16 attention "
                                            "speed-up to show")
    # The tool copied away from steps/: any well-formed id is a step.
    assert results_table.project_steps(tmp_path / "none") is None
    assert err(recs, "07", None, tmp_path / "none") is None
    assert err(recs, "7x", None, tmp_path / "none").startswith("argument --step: '7x' is not a step")
