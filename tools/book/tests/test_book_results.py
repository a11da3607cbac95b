# SPDX-License-Identifier: Apache-2.0
"""Tests of the book's generated results: the traffic model (ncu_traffic.py), the
sentences with measured numbers (facts.py) and what stage_book.py writes from them, on the
synthetic trees of tools/tests/synth.py.

    python3 -m pytest tools/book/tests -q
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

BOOK_TOOLS = Path(__file__).resolve().parents[1]
REPO = BOOK_TOOLS.parents[1]
sys.path[:0] = [str(BOOK_TOOLS), str(REPO / "tools"), str(REPO / "tools" / "tests")]

import browser_check  # noqa: E402
import facts  # noqa: E402
import flashsteps_results as fr  # noqa: E402
import ncu_traffic  # noqa: E402
import plot_roofline as pr  # noqa: E402
import stage_book  # noqa: E402
import synth  # noqa: E402

B, H, N, D, E = synth.B, synth.H, synth.N, synth.D, 2  # bf16


def loaded(root: Path):
    records, kernels = fr.load_results(root), fr.load_ncu(root)
    return records, fr.load_ceilings(root), kernels, pr.roofline_points(records, kernels)


# --- traffic model -------------------------------------------------------------------------

def test_fused_steps_model_matches_the_loop_structure(tmp_path):
    records, _, kernels, _ = loaded(synth.make_tree(tmp_path / "r"))
    problem = pr.problem_of(next(r for r in records if r.name == synth.HEADLINE))
    tiles = B * H * N // 64
    for step, k_times in (("02", 2), ("03", 1)):
        (k,) = [x for x in kernels if x.step == step]
        exp = ncu_traffic.expected(k, problem)
        assert exp[ncu_traffic.LOADS].value == tiles * (64 * D * E + (k_times + 1) * N * D * E)
        assert exp[ncu_traffic.DRAM_READ].value == 3 * B * H * N * D * E     # Q, K, V once
        assert exp[ncu_traffic.DRAM_WRITE].value == B * H * N * D * E + B * H * N * 4
        assert f"{tiles:,} query tiles" in exp[ncu_traffic.LOADS].how


def test_naive_step_model_counts_sectors(tmp_path):
    records, _, kernels, _ = loaded(synth.make_tree(tmp_path / "r"))
    problem = pr.problem_of(next(r for r in records if r.name == synth.HEADLINE))
    by_name = {k.name: ncu_traffic.expected(k, problem) for k in kernels if k.step == "01"}
    pairs = B * H * N * N
    assert by_name["s_kernel"][ncu_traffic.LOADS].value == pairs * D * 33    # 32 + 32/32
    assert by_name["softmax_kernel"][ncu_traffic.LOADS].value == 3 * pairs * 32
    warps = B * H * N * D // 32
    assert by_name["pv_kernel"][ncu_traffic.LOADS].value == warps * N * (32 + 32 * E)
    assert by_name["s_kernel"][ncu_traffic.DRAM_WRITE].value == pairs * 4     # S, fp32


def test_traffic_tables(tmp_path):
    records, _, kernels, _ = loaded(synth.make_tree(tmp_path / "r"))
    text = ncu_traffic.step_table(records, kernels, "03")
    assert "`results/test-gpu/ncu/step03.csv`" in text
    row = next(line for line in text.splitlines() if line.startswith("| global loads"))
    assert row.endswith("| 1 (exact) |") and "`attention_kernel`, 512 blocks × 128 threads" in text
    assert "- *global loads requested by the SMs*: 512 query tiles" in text
    assert "kernel time" not in text                                # in the comparison only
    compare = ncu_traffic.compare_table(records, kernels, ["01", "02"])
    assert "| 01 naive | 3 |" in compare and "| 02 tiled | 1 |" in compare
    assert "03 online_softmax" not in compare
    assert "Not measured yet" in ncu_traffic.step_table(records, kernels, "05")
    assert "Not measured yet" in ncu_traffic.compare_table([], [], ["01"])
    # a step without a model: measured counters only, and said so
    for k in kernels:
        if k.step == "03":
            kernels.append(fr.NcuKernel(**{**k.__dict__, "step": "09"}))
            break
    nine = ncu_traffic.step_table(records, kernels, "09")
    assert "No traffic model for step 09" in nine and "(exact)" not in nine


# --- facts ---------------------------------------------------------------------------------

def test_facts_from_synthetic_results(tmp_path):
    records, ceilings, _, points = loaded(synth.make_tree(tmp_path / "r"))
    f = facts.facts(records, ceilings, points, ["01", "02", "03", "04"])
    assert f["step03_headline"] == (
        f"On the NVIDIA Test GPU (synthetic), step 03 runs `{synth.HEADLINE}` at 20.0 TFLOPS, "
        "2.00 times as fast as step 02 (10.0 TFLOPS).")
    assert "40 % of the fp32 FMA ceiling measured on the same GPU (50 TFLOP/s)" in \
        f["step03_fma"]
    assert "meets the course's target of at least 25 % of the fp32 FMA ceiling (40.0 %)" \
        in f["step03_fma_target"]
    assert "falls short of" in f["step02_fma_target"]              # 10 of 50 = 20 %
    assert "ranges from 2.00 to 2.00" in f["step03_speedups"]       # 20/10 and 18/9
    # causal: 5 against 10 TFLOPS; FLOPs (N+1)/2N of the full ones, so time ~1.00x
    assert "a ratio of 0.50: the causal call takes 1.00 times as long" in f["step02_causal"]
    assert "3,617 FLOP per byte" in f["step03_roofline"]
    assert "meets the fp32 FMA ceiling (50.00 TFLOP/s) at 50.0 FLOP per byte" in \
        f["roofline_ridges"]
    assert f["step04_headline"].startswith("Step 04 is not measured yet")


def test_facts_with_nothing_measured():
    f = facts.facts([], [], [], ["01", "02"])
    assert all("not measured yet" in v or "No ceilings" in v or "no measured" in v
               for v in f.values()), f


def test_every_substitution_a_chapter_uses_is_generated():
    steps = [num for num, _, _ in stage_book.find_steps(REPO)]
    keys = set(facts.facts([], [], [], steps))
    used = set()
    for md in (REPO / "book").rglob("*.md"):
        used |= set(re.findall(r"\{\{\s*(\w+)\s*\}\}", md.read_text(encoding="utf-8")))
    assert used and used <= keys, sorted(used - keys)


# --- stage_book ----------------------------------------------------------------------------

@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")
def test_stage_generates_the_roofline_traffic_and_facts(tmp_path):
    results = synth.make_tree(tmp_path / "results")
    gen, keep = tmp_path / "gen", set()
    stage_book.generate_results(REPO, gen, results, keep)
    stage_book.generate_step_results(REPO, gen, results, keep)
    ceilings = (gen / "results" / "ceilings.md").read_text()
    assert "| Test GPU (synthetic) | fp32 FMA rate (no tensor cores) | 50 TFLOP/s |" in ceilings
    assert "synthetic FMA chains" in ceilings and "PyTorch 0.0" in ceilings
    assert (gen / "results" / "roofline.svg").read_bytes().lstrip().startswith((b"<?xml", b"<svg"))
    assert "roofline.svg" in (gen / "results" / "roofline.md").read_text()
    assert "| 03 online_softmax |" in (gen / "results" / "roofline_table.md").read_text()
    assert "| 02 tiled | 1 |" in (gen / "results" / "traffic.md").read_text()
    subs = json.loads((gen / "facts.json").read_text())
    assert "20.0 TFLOPS" in subs["step03_headline"]
    step = gen / "steps" / "03_online_softmax"
    assert "(×2.00)" in (step / "results.md").read_text()
    assert "1 (exact)" in (step / "traffic.md").read_text()
    assert "01 naive" in (step / "traffic_compare.md").read_text()
    assert {gen / "facts.json", step / "traffic.md"} <= keep


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")
def test_stage_with_no_results_says_not_measured(tmp_path):
    gen, keep = tmp_path / "gen", set()
    stage_book.generate_results(REPO, gen, tmp_path / "none", keep)
    stage_book.generate_step_results(REPO, gen, tmp_path / "none", keep)
    assert "Not measured yet" in (gen / "results" / "roofline_table.md").read_text()
    assert "Not measured yet" in (gen / "results" / "traffic.md").read_text()
    assert "not measured" in (gen / "steps" / "02_tiled" / "results.md").read_text()
    assert "Not measured yet" in (gen / "steps" / "02_tiled" / "traffic.md").read_text()


def test_browser_check_skips_linked_repository_files(tmp_path):
    src = tmp_path / "src"
    (src / "steps").mkdir(parents=True)
    (src / "index.md").write_text("# Index\n")
    (src / "steps" / "01_naive.md").write_text("# Step `01`\n")
    (tmp_path / "README.md").write_text("# Not a chapter\n")
    (src / "README.md").symlink_to(tmp_path / "README.md")
    assert browser_check.chapter_titles(src) == {"index.html": "Index",
                                                 "steps/01_naive.html": "Step 01"}
