# SPDX-License-Identifier: Apache-2.0
"""Tests of the figure generators of steps 02, 04, 05 and 09 (steps/NN_slug/book_figures.py):
that what they draw obeys the kernels' rules and the chapters' formulas, or (step 09) the
measured samples it names.

    python3 -m pytest tools/book/tests -q

The layout and tile-map tests compile a short host program against the repository's headers
(skipped without a C++ compiler); the drawing tests need matplotlib.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HAVE_CXX = shutil.which("c++") or shutil.which("g++")
needs_cxx = pytest.mark.skipif(not HAVE_CXX, reason="needs a C++ compiler (c++)")


def load(step: str):
    path = REPO / "steps" / step / "book_figures.py"
    spec = importlib.util.spec_from_file_location(f"book_figures_{step}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------- step 02

def test_step02_constants_come_from_the_code_and_every_element_has_one_owner():
    fig = load("02_tiled")
    c = fig.tile_constants(REPO)
    text = (REPO / "steps" / "02_tiled" / "step.cu").read_text()
    assert f"kThreadRows = {c['thread_rows']}, kThreadCols = {c['thread_cols']}" in text
    assert c["BLOCK_M"] == c["thread_rows"] * c["TM"] and c["BLOCK_N"] == c["thread_cols"] * c["TN"]
    for cols, per_thread in ((c["BLOCK_N"], c["TM"] * c["TN"]), (c["head_dim"], c["TM"] * c["DV"])):
        owners = Counter()
        for ty in range(c["thread_rows"]):
            for tx in range(c["thread_cols"]):
                mine = fig.elements_of(c, ty, tx, cols)
                assert len(mine) == per_thread
                assert all(fig.owner(c, r, col) == (ty, tx) for r, col in mine)
                owners.update(mine)
        assert len(owners) == c["BLOCK_M"] * cols and set(owners.values()) == {1}


# ----------------------------------------------------------------------------- step 04

def test_step04_ring_rules_are_read_from_the_kernel():
    fig = load("04_tensor_cores")
    r = fig.ring_rules(REPO)
    assert r["stages"] >= 2
    assert (r["wait_expr"], r["ahead_expr"], r["prologue_expr"]) == ("STAGES - 2", "STAGES - 1", "STAGES - 1")
    assert (r["wait"], r["ahead"], r["prologue"]) == (r["stages"] - 2, r["stages"] - 1, r["stages"] - 1)


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("copy,compute", [(1.5, 1.0), (0.5, 1.0), (3.0, 1.0)])
def test_step04_ring_schedule_obeys_the_rings_rules(stages, copy, compute):
    fig = load("04_tensor_cores")
    n = 7
    s = fig.ring_schedule(stages, stages - 1, stages - 1, stages - 2, n_tiles=n, copy=copy, compute=compute)
    land = {g["tile"]: g["land"] for g in s["loads"]}
    issue = {g["tile"]: g["issue"] for g in s["loads"]}
    work = {w["tile"]: w for w in s["work"]}
    assert sorted(land) == list(range(n)) and sorted(work) == list(range(n))
    for j, w in work.items():
        assert w["buffer"] == j % stages
        assert w["start"] >= land[j]                      # a tile is computed only once it has landed
        if j:
            assert w["start"] >= work[j - 1]["end"]       # one tile after the other
    for t in range(stages, n):                            # a buffer is refilled only once it is free:
        assert issue[t] >= work[t - stages]["end"]        # tile t reuses tile t - STAGES's buffer
    # every iteration commits exactly one group, the prologue STAGES - 1
    assert len(s["groups"]) == stages - 1 + n
    # at the wait of iteration j, at most STAGES - 2 committed groups are still in flight
    for j, w in work.items():
        committed = s["groups"][:stages - 1 + j]
        assert sum(1 for g in committed if g["land"] > w["start"]) <= stages - 2


@needs_cxx
def test_step04_fragment_maps_cover_every_element_and_p_reuses_s():
    fig = load("04_tensor_cores")
    maps = fig.layouts(REPO)
    for name, lanes, per_lane, shape in (("mma_a", 32, 8, (16, 16)), ("mma_b", 32, 4, (16, 8)),
                                         ("mma_c", 32, 4, (16, 8)), ("mfma_a", 64, 4, (16, 16)),
                                         ("mfma_b", 64, 4, (16, 16)), ("mfma_d", 64, 4, (16, 16))):
        cells = Counter((r, c) for _, _, r, c in maps[name])
        assert len(maps[name]) == lanes * per_lane
        assert len(cells) == shape[0] * shape[1] and set(cells.values()) == {1}, name
    # two C atoms (keys 0-7, 8-15) side by side are the A fragment of P
    c = {(lane, e): (r, col) for lane, e, r, col in maps["mma_c"]}
    for lane, i, r, col in maps["mma_a"]:
        atom, e = i // 4, i % 2 + 2 * ((i // 2) % 2)
        assert (r, col) == (c[(lane, e)][0], c[(lane, e)][1] + 8 * atom)
    # ldmatrix: the 32 row addresses start every 8-element row of the 16 x 16 tile once
    for name in ("ldmatrix_a", "ldmatrix_b", "ldmatrix_trans_b"):
        starts = {(r, col) for _, _, r, col in maps[name]}
        assert starts == {(r, col) for r in range(16) for col in (0, 8)}, name


# ----------------------------------------------------------------------------- step 05

@needs_cxx
def test_step05_tile_map_counts_match_the_chapters_formula():
    fig = load("05_causal")
    data = fig.tile_map(REPO)
    T, r = data["m_tiles"], data["block_m"] // data["block_n"]
    assert T == data["seqlen"] // data["block_m"]
    visited = sum(n for n, _ in data["tiles"])
    masked = sum(n - full for n, full in data["tiles"])
    assert visited == r * T * (T + 1) // 2                # chapter 05, "Counting tiles"
    assert masked == r * T                                # r masked tiles per query tile (the diagonal)
    for t, (n, full) in enumerate(data["tiles"]):
        assert (n, full) == ((t + 1) * r, t * r)


@needs_cxx
def test_step05_orders_are_permutations_and_lpt_starts_with_the_heaviest():
    fig = load("05_causal")
    data = fig.tile_map(REPO)
    bh, T = data["batch"] * data["heads"], data["m_tiles"]
    every = {(h, m) for h in range(bh) for m in range(T)}
    for name in ("lpt", "head_by_head"):
        assert len(data[name]) == bh * T and {tuple(x) for x in data[name]} == every
    cost = [n for n, _ in data["tiles"]]
    lpt_costs = [cost[m] for _, m in data["lpt"]]
    assert lpt_costs == sorted(lpt_costs, reverse=True)  # heaviest first, never a heavier one later
    assert [m for _, m in data["head_by_head"][:T]] == list(range(T))
    sched = fig.schedules(data)
    bound = fig.lower_bound(data)
    assert bound <= sched["lpt"]["makespan"] <= sched["head_by_head"]["makespan"]
    # Graham: a list schedule in LPT order ends within 4/3 - 1/(3m) of the optimum
    assert sched["lpt"]["makespan"] <= (4 / 3 - 1 / (3 * fig.SMS)) * bound + max(cost)


def test_step05_list_schedule_puts_each_block_on_the_first_free_slot():
    fig = load("05_causal")
    placed, makespan = fig.list_schedule([5, 3, 3, 2, 2, 1], slots=2)
    assert placed == [(0, 0, 5), (1, 0, 3), (1, 3, 6), (0, 5, 7), (1, 6, 8), (0, 7, 8)]
    assert makespan == 8


# ----------------------------------------------------------------------------- all

@needs_cxx
@pytest.mark.parametrize("step,names", [
    ("02_tiled", {"tiling.svg", "tiling.md"}),
    ("04_tensor_cores", {"fragments_nvidia.svg", "fragments_nvidia.md", "fragments_amd.svg", "fragments_amd.md",
                         "cp_async_ring.svg", "cp_async_ring.md"}),
    ("05_causal", {"causal_tiles.svg", "causal_tiles.md"}),
    ("09_persistent", {"clocks.svg", "clocks.md"}),
])
def test_figures_are_deterministic_and_captioned(step, names, tmp_path):
    pytest.importorskip("matplotlib")
    fig = load(step)
    url = f"/_generated/steps/{step}"
    first = fig.generate(REPO, tmp_path, url)
    second = fig.generate(REPO, tmp_path, url)
    assert set(first) == names
    assert first == second  # byte for byte: the SVGs have fixed ids and no date
    for name, content in first.items():
        if name.endswith(".md"):
            svg = name.replace(".md", ".svg")
            assert f"{{figure}} {url}/{svg}" in content
            assert "when the book was built" in content  # the caption says what it is drawn from
        else:
            assert content.lstrip().startswith(b"<?xml") and b"<svg" in content


# ----------------------------------------------------------------------------- step 09

def test_step09_clock_figure_reads_the_runs_samples_and_parts():
    fig = load("09_persistent")
    run = REPO / fig.RUN
    parts = fig.read_parts(run)
    assert [(who, n) for who, n, _, _ in parts] == [
        ("step09", 4096), ("cudnn", 4096), ("step09", 8192), ("cudnn", 8192), ("step09", 16384), ("cudnn", 16384)]
    assert all(0 < end - start < 10 for _, _, start, end in parts)
    samples = fig.read_samples(run)
    assert len(samples) == sum(1 for line in (run / "smi.csv").read_text().splitlines()[1:] if line.strip())
    # Step 09's timing at N = 8192: the samples at over 300 W read about 1710 MHz (the README).
    start, end = parts[2][2], parts[2][3]
    hot = sorted(mhz for t, mhz, w in samples if start <= t <= end and w > 300)
    assert hot and 1650 <= hot[len(hot) // 2] <= 1750


def test_step09_clock_figure_without_its_run(tmp_path):
    files = load("09_persistent").generate(tmp_path, tmp_path, "/x")
    assert set(files) == {"clocks.md"} and "not measured yet" in files["clocks.md"]


# The kernels of steps 05 and 06 spell step 05's two index maps inline (the lesson of step
# 05's diff); causal_schedule.h restates them for the figure. Every expression of the maps
# must appear in the header (with the block index named `block`) and in the kernels' schedule
# and early-exit snippets (with `blockIdx.x`), so that the figure cannot drift from the code.
# Step 06 orders its causal blocks in L2 sections of heads (one section is step 05's order),
# so it shares every expression but the causal map's two, and divides the full map's indices
# in 32 bits (the same map: STEP06_FULL_MAP names its spelling).
CAUSAL_MAP = [
    "{block} % BH",
    "p.m_tiles - 1 - static_cast<std::int64_t>({block} / BH)",
]
SCHEDULE_EXPRESSIONS = [
    "const std::int64_t BH = p.B * p.Hq;",
    *CAUSAL_MAP,
    "{block} / p.m_tiles",
    "{block} % p.m_tiles",
    "(m0 + BLOCK_M < p.Nq ? m0 + BLOCK_M : p.Nq) - 1",
    "(last_visible_key(p.mask, last_row, p.Nq, p.Nk) + BLOCK_N) / BLOCK_N",
    "last_visible_key(p.mask, m0, p.Nq, p.Nk)",
    "(first_row_last_key + 1) / BLOCK_N",
]
STEP06_FULL_MAP = {
    "{block} / p.m_tiles": "{block} / m_tiles",
    "{block} % p.m_tiles": "{block} % m_tiles",
}
STEP06_M_TILES = "const unsigned m_tiles = static_cast<unsigned>(p.m_tiles);"


def _snippet(text: str, start: str, end: str) -> str:
    return " ".join(text[text.index(start):text.index(end)].split())


@pytest.mark.parametrize("step", ["05_causal", "06_autotuned"])
def test_causal_schedule_restates_the_kernels_maps(step):
    header = " ".join((REPO / "common/include/flashsteps/causal_schedule.h").read_text().split())
    kernel = _snippet((REPO / "steps" / step / "step.cu").read_text(), "[start:schedule]", "[end:early_exit]")
    for expr in SCHEDULE_EXPRESSIONS:
        assert expr.format(block="block") in header, f"causal_schedule.h lacks {expr.format(block='block')!r}"
        if step == "06_autotuned" and expr in CAUSAL_MAP:
            continue
        if step == "06_autotuned":
            expr = STEP06_FULL_MAP.get(expr, expr)
        assert expr.format(block="blockIdx.x") in kernel, f"step {step}'s schedule lacks {expr.format(block='blockIdx.x')!r}"
    if step == "06_autotuned":
        assert STEP06_M_TILES in kernel, f"step 06's schedule lacks {STEP06_M_TILES!r}"
