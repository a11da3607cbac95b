"""Tests of the decode-set tables (results_table.py) and the split-sweep figure
(plot_split_sweep.py), on the synthetic trees of decode_synth.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import decode_synth as ds  # noqa: E402
import flashsteps_results as fr  # noqa: E402
import plot_split_sweep as pss  # noqa: E402
import results_table  # noqa: E402

README_DOC = """# Doc

<!-- results-table:begin -->
<!-- results-table:end -->
"""


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    return ds.make_tree(tmp_path / "results")


def run_tool(script: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOLS / script), *map(str, args)],
                          capture_output=True, text=True, check=False)


# --- names -----------------------------------------------------------------------------

def test_sweep_names_parse_and_keep_their_count():
    f = fr.parse_name(ds.B8 + "/splits:16")
    assert (f["kind"], f["dtype"], f["head_dim"], f["seqlen"], f["splits"]) == ("decode", "bf16", 128, 65536, 16)
    assert fr.parse_name(ds.B8)["splits"] is None
    assert fr.decode_sizes(ds.B8 + "/splits:16") == fr.decode_sizes(ds.B8)
    assert fr.decode_base(ds.B8 + "/splits:16") == ds.B8
    assert fr.decode_base("attention/bf16/hd128/n4096/full") == "attention/bf16/hd128/n4096/full"
    assert fr.parse_name(ds.B8 + "/splits:x") == {}
    # Google Benchmark's suffixes go, the split count stays.
    assert fr.base_name({"run_name": ds.B8 + "/splits:16" + ds.SUFFIX}) == ds.B8 + "/splits:16"
    assert fr.name_sort_key(ds.B8) < fr.name_sort_key(ds.B8 + "/splits:2")


def test_load_results_leaves_the_sweep_to_load_runs(tree):
    recs = fr.load_results(tree)
    assert all(r.splits is None for r in recs)
    assert {r.step for r in recs} == {"06", "10", "sdpa-cudnn"}
    runs = fr.load_runs(tree)
    assert set(runs) == {"step10-split-sweep"}
    assert len([r for r in runs["step10-split-sweep"] if r.splits is not None]) == 2 * len(ds.COUNTS)


# --- the README's decode table ------------------------------------------------------------

def test_readme_table_gains_the_decode_set(tree):
    table = results_table.make_table(fr.load_results(tree))
    lines = table.splitlines()
    assert "Decode set, bf16, D = 128, Hq = 32, Hkv = 8: effective TB/s" in table
    header = next(line for line in lines if line.startswith("| Problem"))
    assert header == "| Problem | 06 autotuned | 10 split_kv | *PyTorch SDPA cuDNN* |"
    tb = ds.min_bytes(ds.B8) / 500e-6 / 1e12
    assert f"| B=8, Nk=65536 | {ds.min_bytes(ds.B8) / 2000e-6 / 1e12:.2f} (2000 µs) | {tb:.2f} (500 µs) |" in table
    prefill = next(line for line in lines if line.startswith("| B=1, Nq=128, Nk=8192, causal |"))
    assert "— [1]" in prefill and "(80.0 µs)" in prefill
    assert "[1] skipped: synthetic: no" in lines
    # Rows in the set's order: B, then Nk, chunked prefill last; Hkv = 32 is another table.
    rows = [line.split(" |")[0] for line in lines if line.startswith("| B=")]
    assert rows == ["| B=1, Nk=16384", "| B=8, Nk=65536", "| B=1, Nq=128, Nk=8192, causal"]
    # The standard table gets no row for a step with decode results only.
    assert not any(line.startswith("| 10 split_kv |") and "n/a" in line for line in lines)


def test_readme_decode_table_options_and_update(tree, tmp_path):
    out = run_tool("results_table.py", tree, "--decode-heads-kv", "32")
    assert out.returncode == 0, out.stderr
    assert "Hkv = 32" in out.stdout and "| B=1, Nk=16384 |" in out.stdout
    out = run_tool("results_table.py", tree, "--decode-head-dim", "64")
    assert "Decode set: no bf16 results at D = 64, Hkv = 8." in out.stdout
    doc = tmp_path / "doc.md"
    doc.write_text(README_DOC)
    assert run_tool("results_table.py", tree, "--update", doc).returncode == 0
    assert "| B=8, Nk=65536 |" in doc.read_text()
    assert run_tool("results_table.py", tree, "--check", doc).returncode == 0


def test_decode_table_follows_the_standard_table(tmp_path):
    import shutil
    root = tmp_path / "results"
    shutil.copytree(TOOLS / "tests" / "data" / "results", root)
    ds.write(root / ds.GPU / "step10-decode.json", ds.decode_json("10", {ds.B1: 25.0}))
    lines = results_table.make_table(fr.load_results(root), seqlen=16384).splitlines()
    standard = lines.index(next(line for line in lines if line.startswith("| Step")))
    decode = lines.index(next(line for line in lines if line.startswith("| Problem")))
    assert standard < decode < lines.index(next(line for line in lines if line.startswith("<sub>")))
    assert "| 02 tiled | 5.00 | 2.50 | 10.0 | 5.00 | 1.60 |" in lines
    assert not any(line.startswith("| 10 split_kv") for line in lines)  # decode only: not a standard row
    assert lines[decode] == "| Problem | 10 split_kv |"


def test_standard_results_alone_give_no_decode_table():
    table = results_table.make_table(fr.load_results(TOOLS / "tests" / "data" / "results"))
    assert "Decode set" not in table


# --- the step's decode tables ---------------------------------------------------------------

def test_step_table_of_step_10(tree):
    recs = fr.load_results(tree)
    text = results_table.make_step_table(recs, "10", baselines=True)
    assert "No bf16 attention benchmarks." not in text
    assert "Decode set, bf16, D = 128, Hq = 32, Hkv = 8" in text
    assert "Decode set, bf16, D = 128, Hq = 32, Hkv = 32" in text
    header = next(line for line in text.splitlines() if line.startswith("| Problem") and "06" in line)
    assert header == "| Problem | 10 split_kv TB/s (time) | 06 autotuned TB/s | PyTorch SDPA cuDNN TB/s |"
    row = next(line for line in text.splitlines() if line.startswith("| B=8, Nk=65536 |"))
    # Step 10 is 4x step 06 and 480/500 = 96% of cuDNN there.
    assert "(×4.00)" in row and "(96%)" in row
    assert "<sub>PyTorch SDPA cuDNN:" in text
    plain = results_table.make_step_table(recs, "10")
    assert "PyTorch SDPA cuDNN TB/s" not in plain and "06 autotuned TB/s" in plain


# --- the split sweep ----------------------------------------------------------------------

def test_load_sweeps(tree):
    folder = tree / ds.GPU / "runs" / "step10-split-sweep"
    assert pss.find_sweeps(tree) == [folder]
    b1, b8 = pss.load_sweeps([folder])
    assert (b1.name, b8.name) == (ds.B1, ds.B8)
    assert [p.splits for p in b1.points] == list(ds.COUNTS)
    assert b1.heuristic == 33 and b8.heuristic == 8 and b1.key_tiles == 256
    assert b8.skipped == {256: "synthetic: skipped"} and len(b8.points) == len(ds.COUNTS) - 1
    assert b8.heuristic_us == pytest.approx(4000.0 / 8 + 16.0)
    assert pss.best(b8).splits == 32  # 4000/k + 2k is smallest at k = 44.7: 32 among the counts
    assert b1.points[0].tbps == pytest.approx(ds.min_bytes(ds.B1) / (400.2e-6) / 1e12)
    assert b1.title == "B=1, Nk=16384" and b1.shape == "bf16, D=128, Hq=32, Hkv=8"
    assert b1.gpu == ds.GPU  # the folder's name, as load_runs() gives it


def test_sweep_table(tree):
    sweeps = pss.load_sweeps([tree / ds.GPU / "runs"])
    table = pss.sweep_table(sweeps)
    lines = table.splitlines()
    assert lines[0] == "| Splits | B=1, Nk=16384 (bf16, D=128, Hq=32, Hkv=8) | B=8, Nk=65536 (bf16, D=128, Hq=32, Hkv=8) |"
    row8 = next(line for line in lines if line.startswith("| 8 |"))
    assert row8.count("**") == 2  # the heuristic's count of B = 8 in bold
    assert next(line for line in lines if line.startswith("| 256 |")).endswith("| — |")
    assert "★" in next(line for line in lines if line.startswith("| 32 |"))
    assert "B=1, Nk=16384: 33" in table


def test_plot_is_deterministic_and_marks_the_heuristic(tree, tmp_path):
    folder = tree / ds.GPU / "runs" / "step10-split-sweep"
    first = pss.plot(pss.load_sweeps([folder]), tmp_path / "a" / "sweep")
    second = pss.plot(pss.load_sweeps([folder]), tmp_path / "b" / "sweep")
    assert [p.name for p in first] == ["sweep.png", "sweep.svg"]
    for x, y in zip(first, second):
        assert x.read_bytes() == y.read_bytes()
    svg = first[1].read_text()
    assert "heuristic: 33 splits" in svg and "heuristic: 8 splits" in svg
    assert "key tiles: 256" in svg
    assert "skipped: 256" in svg  # in the panel title


def test_cli(tree, tmp_path):
    folder = tree / ds.GPU / "runs" / "step10-split-sweep"
    out = run_tool("plot_split_sweep.py", folder, "-o", tmp_path / "s", "--table")
    assert out.returncode == 0, out.stderr
    assert "| Splits |" in out.stdout and (tmp_path / "s.svg").is_file()
    summary = run_tool("plot_split_sweep.py", folder)
    assert f"{ds.B8}: heuristic 8, fastest 32" in summary.stdout
    # A decode file without forced counts is not a sweep.
    bad = run_tool("plot_split_sweep.py", tree / ds.GPU / "step10-decode.json")
    assert bad.returncode == 2 and "not a split sweep" in bad.stderr
    assert run_tool("plot_split_sweep.py", tmp_path / "missing.json").returncode == 2


# --- the chapter's figure ------------------------------------------------------------------

def test_book_figure_of_chapter_10(tmp_path):
    """steps/10_split_kv/book_figures.py draws the sweeps under results/, or says none is there."""
    import importlib.util
    import shutil
    repo_root = TOOLS.parents[1]
    spec = importlib.util.spec_from_file_location("book_figures_10",
                                                  repo_root / "steps" / "10_split_kv" / "book_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    repo = tmp_path / "repo"
    shutil.copytree(TOOLS, repo / "tools" / "results", ignore=shutil.ignore_patterns("tests", "__pycache__"))
    empty = module.split_sweep(repo, "/_generated/steps/10_split_kv")
    assert set(empty) == {"split_sweep.md"} and "*Not measured yet:*" in empty["split_sweep.md"]
    ds.make_tree(repo / "results")
    files = module.split_sweep(repo, "/_generated/steps/10_split_kv")
    assert set(files) == {"split_sweep.md", "split_sweep.svg"}
    md = files["split_sweep.md"]
    assert "```{figure} /_generated/steps/10_split_kv/split_sweep.svg" in md
    assert f"`results/{ds.GPU}/runs/`" in md and "| Splits |" in md
    assert b"heuristic: 33 splits" in files["split_sweep.svg"]


def test_a_backend_that_skipped_every_decode_problem_is_a_line_not_a_column(tree):
    reason = "For dense input, both fused kernels require query, key and value to have the same num_heads. Aborting"
    ds.write(tree / ds.GPU / "sdpa-efficient-decode.json",
             ds.decode_json("sdpa-efficient", {ds.B1: reason, ds.B8: reason}))
    lines = results_table.make_table(fr.load_results(tree)).splitlines()
    header = next(line for line in lines if line.startswith("| Problem"))
    assert "efficient" not in header
    assert any(line.endswith("efficient*: no number, every problem skipped (For dense input, both fused "
                             "kernels require query, key and value to have the same num_heads).  ") for line in lines)
    # Its reason is not a numbered note either.
    assert not any("skipped: For dense" in line for line in lines)
