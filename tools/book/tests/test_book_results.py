# SPDX-License-Identifier: Apache-2.0
"""Tests of the book's generated results: the traffic model (ncu_traffic.py), the
measured values (facts.py), the chapters' sentences rendered with them, and what
stage_book.py writes, on the
synthetic trees of tools/results/tests/synth.py.

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
sys.path[:0] = [str(BOOK_TOOLS), str(REPO / "tools" / "results"),
                str(REPO / "tools" / "results" / "tests")]

import browser_check  # noqa: E402
import facts  # noqa: E402
import flashsteps_results as fr  # noqa: E402
import ncu_traffic  # noqa: E402
import rendered  # noqa: E402
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


# --- facts and the chapters' sentences ----------------------------------------------------

def test_facts_from_synthetic_results(tmp_path):
    records, ceilings, _, points = loaded(synth.make_tree(tmp_path / "r"))
    v = rendered.values(records, ceilings, points)
    text = rendered.prose(v)
    assert (f"On the NVIDIA Test GPU (synthetic), step 03 runs `{synth.HEADLINE}` at 20.0 TFLOPS, "
            "2.00 times as fast as step 02 (10.0 TFLOPS).") in text
    assert "40 % of the fp32 FMA ceiling measured on the same GPU (50 TFLOP/s)" in text
    assert "step 03 meets the course's target of at least 25 % of the fp32 FMA ceiling " \
           "(40.0 %)" in text
    assert v["step02"]["fma"][0]["met"] is False                  # 10 of 50 = 20 %
    assert v["step03"]["speedups"][0]["low"] == v["step03"]["speedups"][0]["high"] == "2.00"
    assert "the speed-up of step 03 ranges from 2.00 to 2.00" in text  # 20/10 and 18/9
    # causal: 5 against 10 TFLOPS; FLOPs (N+1)/2N of the full ones, so time ~1.00x
    assert "a ratio of 0.50: the causal call takes 1.00 times as long" in text
    assert "3,617 FLOP per byte" in text
    assert "meets the fp32 FMA ceiling (50.00 TFLOP/s) at 50.0 FLOP per byte" in text
    assert v["step04"]["headline"] == []
    assert "Step 04 is not measured yet: no `results/<gpu>/step04.json` holds" in text


def test_facts_with_nothing_measured():
    v = rendered.values()
    text = rendered.prose(v)
    for step in ("01", "02", "03", "04", "05", "06"):
        assert f"Step {step} is not measured yet" in text
    assert "No ceilings are measured yet." in text
    assert "Which results were timed one call per event pair and which in batches is not " \
           "measured yet" in text
    assert "TFLOPS" not in " ".join(str(x) for x in v["step01"].values())


def test_an_unknown_name_in_a_chapter_fails_the_build(tmp_path):
    chapter = tmp_path / "x.md"
    chapter.write_text("# X\n\nText.\n{{ step03.no_such_value }}\n")
    with pytest.raises(stage_book.StageError, match=r"x.md:4: .*no_such_value"):
        stage_book.render_chapter(chapter, rendered.values(), facts.FILTERS)
    chapter.write_text("# X\n\n{% if step03.headline %}\n")
    with pytest.raises(stage_book.StageError, match=r"x.md:3: "):
        stage_book.render_chapter(chapter, rendered.values(), facts.FILTERS)


def test_a_block_tag_on_its_own_line_leaves_no_line(tmp_path):
    """Tags on their own lines vanish, so a "not measured" branch stays inside its paragraph."""
    chapter = tmp_path / "x.md"
    chapter.write_text("Before.\n{% for g in step01.headline %}\nOn {{ g.title }}.\n"
                       "{% else %}\n  Not yet.\n{% endfor %}\nAfter.\n")
    assert stage_book.render_chapter(chapter, rendered.values(), facts.FILTERS) == \
        "Before.\n  Not yet.\nAfter.\n"


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
    values = json.loads((gen / "facts.json").read_text())
    assert values["step03"]["headline"][0]["tflops"] == "20.0"
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


# --- Nsight Compute text reports (facts.load_profiles) and combined captured output -------

def ncu_text(kernel: str, grid: str, instructions: int, ipc: float, cycles: float,
             fixed_pct: float, fused: int, nonfused: int, commit: str | None = None) -> str:
    """A made-up report in the layout of `ncu` without --csv (the "details" page)."""
    head = [f"git_commit: {commit}"] if commit else []
    return "\n".join(head + [
        "==PROF== Connected to process 1 (bench)",
        f"  void {kernel}(Params) ({grid})x(128, 1, 1), Context 1, Stream 7, Device 0, CC 9.0",
        "    Section: GPU Speed Of Light Throughput",
        "    ----------------------- ----------- ------------",
        "    Metric Name             Metric Unit Metric Value",
        "    ----------------------- ----------- ------------",
        "    SM Frequency                    Ghz         1.00",
        "    Elapsed Cycles                cycle    1,000,000",
        "    Duration                         ms         2.50",
        "    Section: Compute Workload Analysis",
        f"    Executed Ipc Active   inst/cycle         {ipc:.2f}",
        "    Section: Warp State Statistics",
        f"    Warp Cycles Per Issued Instruction             cycle         {cycles:.2f}",
        "    Avg. Active Threads Per Warp                                32",
        "    OPT   Est. Local Speedup: 10%",
        "          On average, each warp of this workload spends 1.0 cycles being stalled waiting",
        "          on a fixed latency execution dependency. Typically, this stall reason should be",
        f"          low. This stall type represents about {fixed_pct}% of the total average of",
        f"          {cycles:.1f} cycles between issuing two instructions.",
        "    Section: Instruction Statistics",
        f"    Executed Instructions                           inst  {instructions:,}",
        f"    OPT   This kernel executes {fused} fused and {nonfused} non-fused FP32 instructions.",
        "    Section: Occupancy",
        "    Block Limit Registers                 block            2",
        "    Block Limit Shared Mem                block            3",
        "    Block Limit Warps                     block           16",
        "    Theoretical Active Warps per SM        warp            8",
        "    Theoretical Occupancy                     %        12.50",
        "    OPT   Est. Local Speedup: 87.5%",
        "          The 2.00 theoretical warps per scheduler this kernel can issue according to its",
        "          occupancy are below the hardware maximum of 16.",
        ""])


def test_profile_facts_from_text_reports(tmp_path):
    ncu = tmp_path / "results" / synth.GPU / "ncu"
    ncu.mkdir(parents=True)
    mine, theirs = facts.PROFILE_PAIR
    (ncu / f"{mine}.ncu.txt").write_text(ncu_text(
        "unnamed>::attention_kernel<__nv_bfloat16, 128, unnamed>::TileConfig<128, 64, 4, 2, 0>>",
        "2048, 1, 1", 1000, 1.5, 5.0, 40.0, 100, 300, commit="0000synth1234567"))
    (ncu / f"{theirs}.ncu.txt").write_text(ncu_text(
        "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, 0, 0, bfloat16_t>>",
        "16, 8, 16", 1200, 2.0, 4.0, 30.0, 10, 540))
    profiles = facts.load_profiles(tmp_path / "results")
    assert [p.stem for p in profiles] == sorted([mine, theirs])
    p = next(x for x in profiles if x.stem == mine)
    assert p.config == "m128_n64_w4_s2" and p.grid == (2048, 1, 1)
    assert p.commit == "0000synth1234567"
    assert p.metrics["Executed Instructions"] == 1000 and p.units["Duration"] == "ms"
    assert p.fixed_latency_pct == 40.0 and p.fp32 == (100, 300) and p.warps_per_scheduler == 2
    text = rendered.prose(rendered.values(profiles=profiles))
    assert f"one launch of each on `{synth.GPU}`" in text and "commit `0000synth123`" in text
    assert "Both launch 2,048 blocks of 128 threads, with the same tile shape (step 06's " \
           "`m128_n64_w4_s2`, FlashAttention-2's `m128_n64_w4`" in text
    assert "Both have a theoretical occupancy of 12.5 % (8 warps per SM, 2 per scheduler; " \
           "the limit of 2 blocks per SM is set by registers)" in text
    assert "executes 1,000 instructions at 1.50 per active cycle" in text
    assert "executes 1,200, 1.20 times as many, at 2.00 per cycle, one every 4.00" in text
    assert "150 of the 200 instructions that FlashAttention-2 executes more are FP32" in text
    assert "take 2.5 ms and 2.5 ms" in text
    assert "40.0 % of step 06's cycles" in text and "30.0 % of FlashAttention-2's" in text
    assert "not measured yet" not in text.split("compare the two kernels in Nsight Compute")[1][:3000]
    one = rendered.prose(rendered.values(profiles=profiles[:1]))
    assert "The Nsight Compute comparison of step 06 with FlashAttention-2 is not measured " \
           f"yet: it needs `results/<gpu>/ncu/{mine}.ncu.txt`" in one
    assert facts.load_profiles(tmp_path / "none") == []
    (ncu / "broken.ncu.txt").write_text("==PROF== nothing profiled\n")
    with pytest.raises(facts.ProfileError, match="broken.ncu.txt"):
        facts.load_profiles(tmp_path / "results")


def test_capture_sections_split_a_combined_run():
    text = "\n".join(["== bench_step04", "Running bench_step04", "attention/... 1 ms",
                      "results: /tmp/r/step04.json", "== bench_step05", "Running bench_step05",
                      "== bench_step06", "Running bench_step06", "results: /tmp/r/step06.json",
                      "benchmark   04   05   06", "table of all three"])
    parts = stage_book.capture_sections(text)
    assert sorted(parts) == ["04", "05", "06"]
    assert parts["04"].splitlines() == ["== bench_step04", "Running bench_step04",
                                        "attention/... 1 ms", "results: /tmp/r/step04.json"]
    assert parts["05"] == "== bench_step05\nRunning bench_step05\n"
    assert "table of all three" not in parts["06"]


def test_run_output_includes_the_step_part_of_a_combined_capture(tmp_path):
    repo = tmp_path / "repo"
    for num, slug in (("04", "tensor_cores"), ("05", "causal")):
        (repo / "steps" / f"{num}_{slug}").mkdir(parents=True)
        (repo / "steps" / f"{num}_{slug}" / "step.cu").write_text(f"// step {num}\n")
    results = repo / "results"
    (results / "gpu-a").mkdir(parents=True)
    (results / "gpu-a" / "steps04-05.txt").write_text(
        "== bench_step04\nstep 4 output\nresults: x/step04.json\n== bench_step05\nstep 5\n")
    (results / "gpu-a" / "sdpa.txt").write_text("no step parts here\n")
    gen, keep = tmp_path / "gen", set()
    stage_book.generate_steps(repo, gen, results, keep)
    run = (gen / "steps" / "04_tensor_cores" / "run.md").read_text()
    assert "/_generated/steps/04_tensor_cores/run_gpu-a_steps04-05.txt" in run
    assert "the bench_step04 part of results/gpu-a/steps04-05.txt" in run
    assert "Not measured yet" not in run
    copy = gen / "steps" / "04_tensor_cores" / "run_gpu-a_steps04-05.txt"
    assert copy.read_text() == "== bench_step04\nstep 4 output\nresults: x/step04.json\n"
    assert copy in keep
    assert "step 5" in (gen / "steps" / "05_causal" / "run_gpu-a_steps04-05.txt").read_text()


def test_no_chapter_line_of_text_ends_with_a_tag():
    """Jinja removes the line break after a block tag: text ending in one would run into the
    next line. A tag ends a line only when the line holds nothing else."""
    bad = []
    for md in sorted((REPO / "book").rglob("*.md")):
        for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            if line.rstrip().endswith("%}") and not re.fullmatch(r"\s*\{%.*?%\}\s*", line):
                bad.append(f"{md.relative_to(REPO)}:{n}")
    assert not bad, bad


def test_naive_intensity_side_of_the_ridge_follows_the_ceilings(tmp_path):
    """Chapter 01 puts step 01's D/6 FLOP per byte on the side of the fp32 FMA ridge that the
    measured ceilings give: left of the synthetic 50 FLOP/B, right of the H200's 13.5."""
    records, ceilings, _, points = loaded(synth.make_tree(tmp_path / "r"))
    text = rendered.prose(rendered.values(records, ceilings, points))
    assert "about 21.3 at $D = 128$" in text
    assert "so even by this count step 01 lies left of that ridge, on the memory-bound " \
           "side" in text
    records, ceilings, _, points = loaded(REPO / "results")
    v = rendered.values(records, ceilings, points)
    for g in v["naive_model"]["gpus"]:
        ridge = float(g["ridge"])
        assert g["side"] == ("right" if 128 / 6 >= ridge else "left")
    for g in v["step01"]["roofline"]:
        assert g["fma_side"] == ("right" if float(g["intensity"]) >= float(g["fma_ridge"])
                                 else "left")
    text = rendered.prose(v)
    assert "memory-bound side of the roofline" not in text
    if any(g["side"] == "right" for g in v["naive_model"]["gpus"]):
        assert "step 01 lies right of that ridge: on the compute-bound side" in text


def test_rescale_count():
    """Chapter 04's rescale counts: the i.i.d. formula against a brute-force count, and the
    chapter prints rescale_count.py's numbers instead of 'a new maximum is rare'."""
    import numpy as np
    import rescale_count as rc
    rng = np.random.default_rng(1)
    v = rc.votes(rng.standard_normal((32 * 2000, 16 * 8)), warp_m=32, block_n=8)
    assert v.shape == (2000, 15)
    assert abs(v.sum(axis=1).mean() - rc.expected_iid(16, 32)) < 0.15
    assert rc.expected_iid(2, 1) == 0.5                  # tile 2 of 2: 1/2 for one row
    s = rc.summary()
    assert s["tiles"] == rc.SEQLEN // rc.BLOCK_N == 64
    assert abs(float(s["iid"]["expected"]) - sum(1 - (1 - 1 / t) ** 32 for t in range(2, 65))) < 0.05
    text = rendered.prose(rendered.values())
    assert "a new maximum is rare" not in text
    assert (f"{s['iid']['expected']} of the 63 tiles rescale on average ({s['iid']['pct']} %)"
            in text)
    assert f"{s['random']['rescaled']} of {s['random']['votes']} votes over" in text
    assert f"{s['fixture']['rescaled']} of {s['fixture']['votes']} warps rescale" in text
    assert "probability $1 - (1 - 1/t)^{32}$" in text
    m, n, w = (int(x) for x in re.match(r"m(\d+)_n(\d+)_w(\d+)",
                                        facts.HEURISTIC_NVIDIA["06"][rc.HEAD_DIM]).groups())
    assert (rc.WARP_M, rc.BLOCK_N) == (m // w, n)        # step 04's tile at D = 128


def test_clock_peak_is_named_for_what_it_is():
    """pct_peak is relative to SMs x max boost clock x FLOP/clk (1070.5 on the H200), not to
    the datasheet's 989: measuring.md says so with the numbers of results/."""
    records, ceilings, _, points = loaded(REPO / "results")
    v = rendered.values(records, ceilings, points)
    text = rendered.prose(v)
    assert "datasheet peak" not in text
    for g in v["clock_peak"]:
        tflops = float(g["tflops"].replace(",", ""))
        per_clk = float(g["per_clk"].replace(",", ""))
        assert abs(g["sm_count"] * g["clock"] * per_clk / 1e6 - tflops) < 0.1
        assert (f"it is {g['sm_count']} SMs × {g['clock']} MHz × {g['per_clk']} FLOP per clock "
                f"= {g['tflops']} TFLOP/s") in text
    h200 = next((g for g in v["clock_peak"] if g["title"] == "the NVIDIA H200"), None)
    if h200 is not None:
        assert h200["tflops"] == "1,070.5" and h200["datasheet"] == "989"
        assert h200["over_datasheet"] == "1.08"


def test_chapter01_lists_every_step_that_saves_time_under_causal():
    """Chapter 01 no longer says step 01 is the only step that saves time under the causal
    mask; which steps do comes from the results (time ratio at most facts.CAUSAL_SAVES)."""
    records, ceilings, _, points = loaded(REPO / "results")
    v = rendered.values(records, ceilings, points)
    text = rendered.prose(v)
    assert "Unlike the later steps" not in text
    for g in v["causal_time"]:
        for x in g["steps"]:
            assert (x["step"] in g["savers"]) == (float(x["time_ratio"]) <= facts.CAUSAL_SAVES)
        if len(g["savers"]) > 1:
            assert f"steps {facts.and_list(g['savers'])} take at most" in text
    h200 = next((g for g in v["causal_time"] if g["title"] == "the NVIDIA H200"), None)
    if h200 is not None:
        assert {"01", "05", "06"} <= set(h200["savers"])
        assert {"02", "03", "04"} <= set(h200["others"])


def test_measuring_explains_the_debug_library_warning():
    records, ceilings, _, points = loaded(REPO / "results")
    v = rendered.values(records, ceilings, points)
    text = rendered.prose(v)
    assert "Library was built as DEBUG" in text and "manual time (`UseManualTime`)" in text
    for g in v["library_build"]:
        for step in g["debug"]:
            assert any(r.step == step and r.context.get("library_build_type") == "debug"
                       for r in records)


def test_front_page_table_of_numbers():
    """The front page's table comes from the results: a row per step with its TFLOPS, the
    ratio to its base step and to SDPA flash, the share of the GEMM ceiling, the limit."""
    records, ceilings, _, points = loaded(REPO / "results")
    v = rendered.values(records, ceilings, points)
    index = stage_book.render_chapter(REPO / "book" / "index.md", v, facts.FILTERS)
    for g in v["overview"]:
        assert f"| Step | TFLOP/s | × previous step | × PyTorch SDPA flash" in index
        for r in g["rows"]:
            if r["step"]:
                assert f"| {r['tflops']} | {r['ratio']} | {r['sdpa']} | {r['gemm']} | {r['limit']} |" in index
        six = next(r for r in g["rows"] if r["step"] == "06")
        rec = next(x for x in records if x.gpu == g["gpu"] and x.step == "06"
                   and x.name == facts.HEADLINE)
        assert six["tflops"] == fr.fmt_tflops(rec.tflops)
    assert "| 01 naive | three kernels" not in index          # no copy of the sidebar
    empty = stage_book.render_chapter(REPO / "book" / "index.md", rendered.values(), facts.FILTERS)
    assert "No step is measured yet" in empty


def test_a_step_is_compared_with_the_sdpa_of_its_own_run():
    """facts.sdpa_run: a step's ratio to SDPA uses the SDPA files measured in the session of
    its published file, not the published SDPA files (made in another session)."""
    results = REPO / "results"
    runs = fr.load_runs(results)
    records = fr.load_results(results)
    run = facts.sdpa_run(records, runs, "04")
    if run is None:
        pytest.skip("no same-run set under results/*/runs/ holds the published step 04")
    v = facts.facts(records, [], [], ["03", "04"], runs=runs)
    same = next(r for r in runs[run] if r.step == facts.SDPA_BASELINE and r.name == facts.HEADLINE)
    published = next(r for r in records if r.step == facts.SDPA_BASELINE and r.name == facts.HEADLINE)
    assert same.tflops != published.tflops, "the two SDPA files should differ for this test to mean anything"
    assert v["step04"]["sdpa"][0]["base_tflops"] == fr.fmt_tflops(same.tflops)
    assert v["step04"]["sdpa"][0]["base_tflops"] != fr.fmt_tflops(published.tflops)


def test_a_steps_sdpa_target_is_judged_on_its_own_run():
    """facts: the target against SDPA (SDPA_TARGETS) counts the same ratios as "sdpa", those
    of the run that holds the published file, not the published SDPA files."""
    results = REPO / "results"
    runs = fr.load_runs(results)
    records = fr.load_results(results)
    run = facts.sdpa_run(records, runs, "06")
    if run is None:
        pytest.skip("no same-run set under results/*/runs/ holds the published step 06")
    v = facts.facts(records, [], [], ["05", "06"], runs=runs)
    expected = facts.sdpa_target(runs[run], "06", facts.SDPA_TARGETS["06"])
    published = facts.sdpa_target(records, "06", facts.SDPA_TARGETS["06"])
    assert expected["gpus"] != published["gpus"], "the two SDPA files should differ for this test to mean anything"
    assert v["step06"]["sdpa_target"] == expected


def test_a_steps_results_table_takes_the_baselines_of_its_run(tmp_path):
    """stage_book.with_run_baselines: the published files, with the run's sdpa-*.json and the
    other steps' files in place of the published ones where the run has them; the step's own
    file and everything else stay the published ones."""
    results = tmp_path / "results"
    gpu = results / "some-gpu"
    (gpu / "runs" / "setA").mkdir(parents=True)
    for name, text in {"step03.json": "published 03", "step04.json": "published 04",
                       "step04-decode.json": "published 04 decode", "sdpa-flash.json": "published flash",
                       "sdpa-cudnn.json": "published cudnn"}.items():
        (gpu / name).write_text(text)
    for name, text in {"sdpa-flash.json": "run flash", "step03.json": "run 03", "step04.json": "run 04",
                       "step04-decode.json": "run 04 decode"}.items():
        (gpu / "runs" / "setA" / name).write_text(text)
    tree = stage_book.with_run_baselines(results, "setA", tmp_path / "tree", "04")
    got = {f.name: f.read_text() for f in (tree / "some-gpu").iterdir()}
    assert got == {"step03.json": "run 03", "step04.json": "published 04",
                   "step04-decode.json": "published 04 decode", "sdpa-flash.json": "run flash",
                   "sdpa-cudnn.json": "published cudnn"}
