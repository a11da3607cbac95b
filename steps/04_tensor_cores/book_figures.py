# SPDX-License-Identifier: Apache-2.0
"""Step 04's figures for the book, drawn from the code's own index maps and rules.

tools/book/stage_book.py calls generate() for every step folder that has a book_figures.py.

- The fragment figures compile a short host program against
  common/include/flashsteps/fragment_layout.h (the lane -> (row, column) maps that tile_cuda.h
  and tile_hip.h index registers and shared memory with; plain C++, no GPU runtime), run it,
  and draw which lane holds which element of the mma.sync m16n8k16 A, B and C fragments,
  which lane gives which row address to ldmatrix.x4 (and .trans), and the MFMA 16x16x16 A, B
  and D layouts.
- The ring figure schedules step 04's cp.async ring with the kernel's own rules, read from
  steps/04_tensor_cores/step.cu: the stage count (NVIDIA's DefaultTile at D = 128), the
  prologue's tile count, how far ahead each iteration issues, and the depth of its
  cp.async.wait_group. The durations are illustrative, not measured."""
from __future__ import annotations

import ast
import operator
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "book"))
from host_program import run_json  # noqa: E402  (compiles and runs a host program)

DUMP = r"""
#include <cstdio>
#include "flashsteps/fragment_layout.h"
using namespace flashsteps::fragment;
// Prints {"name": [[lane, element, row, col], ...], ...}.
template <typename F>
void dump(const char* name, int lanes, int elements, F f, bool last = false) {
  std::printf("\"%s\": [", name);
  for (int lane = 0; lane < lanes; ++lane)
    for (int e = 0; e < elements; ++e) {
      const RowCol p = f(lane, e);
      std::printf("%s[%d, %d, %d, %d]", lane || e ? ", " : "", lane, e, p.row, p.col);
    }
  std::printf(last ? "]" : "], ");
}
int main() {
  std::printf("{");
  dump("mma_a", 32, 8, [](int l, int i) { return mma_a(l, i); });
  dump("mma_b", 32, 4, [](int l, int i) { return mma_b(l, i); });
  dump("mma_c", 32, 4, [](int l, int i) { return mma_c(l, i); });
  dump("ldmatrix_a", 32, 1, [](int l, int) { return ldmatrix_x4_a_address(l); });
  dump("ldmatrix_b", 32, 1, [](int l, int) { return ldmatrix_x4_b_address(l); });
  dump("ldmatrix_trans_b", 32, 1, [](int l, int) { return ldmatrix_x4_trans_b_address(l); });
  dump("mfma_a", 64, 4, [](int l, int e) { return mfma_a(l, e); });
  dump("mfma_b", 64, 4, [](int l, int e) { return mfma_b(l, e); });
  dump("mfma_d", 64, 4, [](int l, int e) { return mfma_d(l, e); }, true);
  std::printf("}\n");
}
"""


def layouts(repo: Path) -> dict[str, list[list[int]]]:
    """{map name: [[lane, element, row, col], ...]}, evaluated by fragment_layout.h itself."""
    return run_json(repo, DUMP, "step 04's fragment figures")


# ----------------------------------------------------------------------------- fragments

def _grid(ax, entries, rows, cols, title, label, colour, fontsize=5.0):
    """A rows x cols grid, each cell labelled label(lane, element) and coloured colour(lane)."""
    import matplotlib.pyplot as plt
    seen = set()
    for lane, e, r, c in entries:
        seen.add((r, c))
        ax.add_patch(plt.Rectangle((c, r), 1, 1, facecolor=colour(lane), edgecolor="white", lw=0.6))
        ax.text(c + 0.5, r + 0.5, label(lane, e), ha="center", va="center", fontsize=fontsize, linespacing=0.9)
    if len(seen) != rows * cols:
        raise RuntimeError(f"{title}: {len(seen)} of {rows * cols} elements have an owner")
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.set_xticks([c + 0.5 for c in range(cols)], [str(c) for c in range(cols)], fontsize=6)
    ax.set_yticks([r + 0.5 for r in range(rows)], [str(r) for r in range(rows)], fontsize=6)
    ax.tick_params(length=0)
    ax.set_title(title, fontsize=8)


def draw_nvidia(maps: dict, path: Path) -> None:
    """mma.m16n8k16 A, B, C and the three ldmatrix.x4 address maps."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    matplotlib.rcParams["svg.hashsalt"] = "flashsteps"  # deterministic SVG ids
    cmap = plt.get_cmap("tab10")
    by_group = lambda lane: (*cmap((lane >> 2) % 10)[:3], 0.55)  # noqa: E731 (lanes 4g..4g+3 share a colour)
    fig = plt.figure(figsize=(11.0, 9.6))
    top = fig.add_gridspec(1, 3, width_ratios=[16, 8, 8], wspace=0.25, top=0.9, bottom=0.5)
    bottom = fig.add_gridspec(1, 3, wspace=0.25, top=0.42, bottom=0.04)
    gs = [top, bottom]
    _grid(fig.add_subplot(gs[0][0, 0]), maps["mma_a"], 16, 16, "A (16 x 16, row-major): lane T, element a_i",
          lambda l, i: f"T{l}\na{i}", by_group)
    _grid(fig.add_subplot(gs[0][0, 1]), maps["mma_b"], 16, 8, "B (16 x 8, k x n)",
          lambda l, i: f"T{l}\nb{i}", by_group)
    _grid(fig.add_subplot(gs[0][0, 2]), maps["mma_c"], 16, 8, "C, D (16 x 8, fp32)",
          lambda l, i: f"T{l}\nc{i}", by_group)
    # ldmatrix: which lane gives the address of which 8-element row, coloured by the matrix
    # (= destination register) it lands in.
    reg = lambda lane: (*plt.get_cmap("Set2")(lane // 8)[:3], 0.8)  # noqa: E731
    for k, (name, title, rows, cols) in enumerate((
            ("ldmatrix_a", "ldmatrix.x4, Q (A of S = Q K^T):\nrow address given by lane", 16, 16),
            ("ldmatrix_b", "ldmatrix.x4, K (B of S):\nrows = keys n, cols = k", 16, 16),
            ("ldmatrix_trans_b", "ldmatrix.x4.trans, V (B of O += P V):\nrows = keys k, cols = n", 16, 16))):
        ax = fig.add_subplot(gs[1][0, k])
        for lane, _, r, c in maps[name]:
            ax.add_patch(plt.Rectangle((c, r), 8, 1, facecolor=reg(lane), edgecolor="white", lw=0.8))
            ax.text(c + 4, r + 0.5, f"lane {lane} -> reg {lane // 8}", ha="center", va="center", fontsize=5.5)
        ax.set_xlim(0, cols)
        ax.set_ylim(rows, 0)
        ax.set_aspect("equal")
        ax.set_xticks([0, 8, 16])
        ax.set_yticks(range(0, 17, 4))
        ax.tick_params(labelsize=6)
        ax.set_title(title, fontsize=8)
    fig.suptitle("mma.sync m16n8k16 fragments (T = lane; lanes 4g .. 4g+3 share a colour) and the ldmatrix.x4 "
                 "row addresses of tile_cuda.h", fontsize=9, y=0.97)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None, bbox_inches="tight")
    plt.close(fig)


def draw_amd(maps: dict, path: Path) -> None:
    """MFMA 16x16x16 A, B and D, wave64."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    matplotlib.rcParams["svg.hashsalt"] = "flashsteps"
    cmap = plt.get_cmap("Set2")
    by_quad = lambda lane: (*cmap(lane // 16)[:3], 0.75)  # noqa: E731 (q = lane / 16)
    fig, axes = plt.subplots(1, 3, figsize=(13.0, 5.0))
    for ax, name, title in zip(axes, ("mfma_a", "mfma_b", "mfma_d"),
                               ("A (16 x 16): lane, element", "B (16 x 16, k x n)", "D (16 x 16, fp32)")):
        _grid(ax, maps[name], 16, 16, title, lambda l, e: f"{l}\n.{e}", by_quad, fontsize=5.0)
    fig.suptitle("v_mfma_f32_16x16x16 (f16, bf16_1k) operands of tile_hip.h: lane 16q + r, element .e; colour = q",
                 fontsize=9)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None, bbox_inches="tight")
    plt.close(fig)


# ----------------------------------------------------------------------------- cp.async ring

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}


def _eval(expr: str, names: dict[str, int]) -> int:
    """An integer expression of the kernel (e.g. ``STAGES - 2``) with its names bound."""
    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        raise RuntimeError(f"steps/04_tensor_cores/step.cu: cannot evaluate {expr!r}")
    return walk(ast.parse(expr.replace("/", "//"), mode="eval"))


def ring_rules(repo: Path, head_dim: int = 128) -> dict:
    """The ring's rules as step 04's kernel states them: STAGES (NVIDIA's DefaultTile at
    @p head_dim), the tiles the prologue issues, how far ahead an iteration issues, and the
    cp.async.wait_group depth at the top of an iteration."""
    text = (repo / "steps" / "04_tensor_cores" / "step.cu").read_text(encoding="utf-8")
    nvidia = text.split("#else", 1)[1].split("#endif", 1)[0]
    special = re.search(rf"struct DefaultTile<{head_dim}>\s*{{\s*using type = TileConfig<([^>]*)>", nvidia)
    generic = re.search(r"template <int HEAD_DIM> struct DefaultTile\s*{\s*using type = TileConfig<([^>]*)>", nvidia)
    m = special or generic
    if not m:
        raise RuntimeError("steps/04_tensor_cores/step.cu: no NVIDIA DefaultTile")
    block_m, block_n, warps, stages = (int(x) for x in m.group(1).split(","))
    kernel = text[text.index("[start:kernel]"):text.index("[end:kernel]")]
    prologue = re.search(r"for \(int j = 0; j < ([^;]+); \+\+j\) \{\s*if \(j < n_tiles\) load_kv\(j\);", kernel)
    ahead = re.search(r"if \(j \+ ([^<]+?) < n_tiles\) load_kv\(j \+ ([^)]+)\);", kernel)
    wait = re.search(r"for \(std::int64_t j = 0; j < n_tiles; \+\+j\) \{\s*tile::wait_pending<([^>]+)>\(\);", kernel)
    if not (prologue and ahead and wait):
        raise RuntimeError("steps/04_tensor_cores/step.cu: the ring's prologue, issue or wait was not found")
    names = {"STAGES": stages}
    return {"block_m": block_m, "block_n": block_n, "warps": warps, "stages": stages, "head_dim": head_dim,
            "prologue": _eval(prologue.group(1), names), "ahead": _eval(ahead.group(2), names),
            "wait": _eval(wait.group(1), names), "wait_expr": wait.group(1).strip(),
            "prologue_expr": prologue.group(1).strip(),
            "ahead_expr": ahead.group(2).strip()}


def ring_schedule(stages: int, prologue: int, ahead: int, wait: int, n_tiles: int = 6,
                  copy: float = 1.5, gap: float = 0.6, compute: float = 1.0) -> dict:
    """Step 04's ring for one block, event by event. Each commit closes one group; a group's
    copies land ``copy`` after they are issued (the latency), and at least ``gap`` after the
    previous group's (the bandwidth the block gets).
    Iteration j waits until at most ``wait`` groups are in flight (cp.async.wait_group), passes
    the barrier, issues tile j + ``ahead`` into buffer (j + ahead) % stages if there is one, commits
    (an empty group otherwise) and computes tile j from buffer j % stages for ``compute``."""
    groups: list[dict] = []  # {"tile": t or None, "issue": x, "land": y}
    pipe = 0.0

    def commit(tile, now):
        nonlocal pipe
        if tile is None:
            groups.append({"tile": None, "issue": now, "land": now})
            return
        land = max(now + copy, pipe + gap)
        pipe = land
        groups.append({"tile": tile, "issue": now, "land": land, "buffer": tile % stages})

    now = 0.0
    for t in range(prologue):
        commit(t if t < n_tiles else None, now)
    work, waits = [], []
    for j in range(n_tiles):
        # wait_group: all but the newest `wait` committed groups have landed
        done = [g["land"] for g in groups[:len(groups) - wait]] if wait else [g["land"] for g in groups]
        ready = max([now] + done)
        if ready > now:
            waits.append((now, ready, j))
        now = ready
        t = j + ahead
        commit(t if t < n_tiles else None, now)
        work.append({"tile": j, "buffer": j % stages, "start": now, "end": now + compute})
        now += compute
    loads = [g for g in groups if g["tile"] is not None]
    return {"stages": stages, "wait": wait, "ahead": ahead, "loads": loads, "work": work, "waits": waits,
            "end": now, "groups": groups}


def draw_ring(rules: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    matplotlib.rcParams["svg.hashsalt"] = "flashsteps"
    cmap = plt.get_cmap("tab10")
    variants = [rules["stages"], rules["stages"] + 1]
    fig, axes = plt.subplots(len(variants), 1, figsize=(9.5, 2.0 + 1.3 * sum(s + 1 for s in variants) / 2),
                             sharex=True)
    for ax, stages in zip(axes, variants):
        names = {"STAGES": stages}
        r = dict(rules, stages=stages)
        for key in ("wait", "ahead", "prologue"):
            r[key] = _eval(rules[f"{key}_expr"], names)
        sched = ring_schedule(stages, r["prologue"], r["ahead"], r["wait"])
        for g in sched["loads"]:
            y = g["buffer"]
            ax.barh(y, g["land"] - g["issue"], left=g["issue"], height=0.55, color=cmap(g["tile"] % 10), alpha=0.35,
                    hatch="///", edgecolor="black", lw=0.6)
            ax.text((g["issue"] + g["land"]) / 2, y, f"cp.async K,V {g['tile']}", ha="center", va="center", fontsize=7)
        for w in sched["work"]:
            for y in (w["buffer"], stages):
                ax.barh(y, w["end"] - w["start"], left=w["start"], height=0.55, color=cmap(w["tile"] % 10),
                        edgecolor="black", lw=0.6)
                ax.text((w["start"] + w["end"]) / 2, y, f"tile {w['tile']}", ha="center", va="center", fontsize=7)
        for a, b, j in sched["waits"]:
            ax.barh(stages, b - a, left=a, height=0.55, color="#dddddd", edgecolor="#888888", lw=0.6)
            ax.text((a + b) / 2, stages, "wait", ha="center", va="center", fontsize=6, color="#444444")
        ax.set_yticks(range(stages + 1), [f"buffer {s}" for s in range(stages)] + ["warps: S, softmax, PV"],
                      fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"STAGES = {stages}{' (step 04)' if stages == rules['stages'] else ' (one buffer more)'}: "
                     f"prologue issues {r['prologue']} tile(s), iteration j issues tile j + {r['ahead']} and "
                     f"waits with cp.async.wait_group {r['wait']}", fontsize=8)
        ax.axvline(sched["end"], color="black", lw=0.8)
    axes[-1].set_xlabel("time (illustrative units: a tile's copy lands 1.5 after it is issued, at least 0.6 after "
                        "the previous one; its S, softmax and PV take 1)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)


# ----------------------------------------------------------------------------- generate

def generate(repo: Path, out: Path, generated_url: str) -> dict[str, bytes | str]:
    """{file name: content} for the step's folder of the generated book sources."""
    maps = layouts(repo)
    rules = ring_rules(repo)
    files: dict[str, bytes | str] = {}
    import matplotlib
    # Hundreds of labels: SVG text rather than glyph outlines. rc_context keeps the setting from
    # leaking into the other steps' figures drawn in the same process.
    with tempfile.TemporaryDirectory() as tmp, matplotlib.rc_context({"svg.fonttype": "none"}):
        for name, draw in (("fragments_nvidia.svg", lambda p: draw_nvidia(maps, p)),
                           ("fragments_amd.svg", lambda p: draw_amd(maps, p)),
                           ("cp_async_ring.svg", lambda p: draw_ring(rules, p))):
            draw(Path(tmp) / name)
            files[name] = (Path(tmp) / name).read_bytes()
    header = "<!-- generated by steps/04_tensor_cores/book_figures.py; do not edit -->\n\n"
    files["fragments_nvidia.md"] = header + (
        f"```{{figure}} {generated_url}/fragments_nvidia.svg\n"
        ":alt: Grids of the mma.m16n8k16 A (16 by 16), B (16 by 8) and C (16 by 8) fragments, each element "
        "labelled with the lane that holds it, and three 16 by 16 tiles showing which lane gives each "
        "row address to ldmatrix.x4\n:width: 100%\n\n"
        "Which lane holds which element of `mma.sync.aligned.m16n8k16` (top) and which lane gives "
        "`ldmatrix.x4` the address of which 8-element row (bottom; the colour is the matrix, so the "
        "register, the row lands in), drawn from `fragment::mma_a/b/c()` and "
        "`fragment::ldmatrix_x4_*_address()` (`common/include/flashsteps/fragment_layout.h`, the "
        "functions `tile_cuda.h` calls) when the book was built. `tests/fragment_layout_test.cpp` checks "
        "them against the PTX ISA's formulas and that the ldmatrix addresses deliver exactly these "
        "fragments. The labels number 16-bit *elements*, as the PTX ISA does (A: a0 to a7, B: b0 to b3; "
        "C's c0 to c3 are float32): the text's 32-bit registers hold two each, register a*k* the elements "
        "a2*k* and a2*k*+1, register b*k* the elements b2*k* and b2*k*+1.\n```\n")
    files["fragments_amd.md"] = header + (
        f"```{{figure}} {generated_url}/fragments_amd.svg\n"
        ":alt: Three 16 by 16 grids, the MFMA A, B and D operands, each element labelled with its "
        "lane and element index\n:width: 100%\n\n"
        "The operands of `v_mfma_f32_16x16x16f16` / `bf16_1k` in a wave of 64 lanes, drawn from "
        "`fragment::mfma_a/b/d()` (`fragment_layout.h`, the functions `tile_hip.h` calls) when the book "
        "was built: lane $16q + r$ holds row $r$ of A, column $r$ of B and of D, four consecutive "
        "elements each. D and B have the same layout, which is why $S^T$'s accumulator is $P^T$'s B "
        "operand without a shuffle.\n```\n")
    files["cp_async_ring.md"] = header + (
        f"```{{figure}} {generated_url}/cp_async_ring.svg\n"
        ":alt: Two timelines of step 04's K/V ring, one per stage count: the copies of each tile into "
        "its buffer (hatched), the warps computing each tile, and the waits\n:width: 100%\n\n"
        f"Step 04's ring for one block, scheduled by `ring_schedule()` "
        "(`steps/04_tensor_cores/book_figures.py`) with the rules read from `step.cu` when the book was "
        f"built: `STAGES` = {rules['stages']} (NVIDIA, D = {rules['head_dim']}), a prologue of "
        f"{rules['prologue']} tile(s), tile j + `{rules['ahead_expr']}` issued into the buffer tile j - 1 "
        f"used, and `wait_pending<{rules['wait_expr']}>()` at the top of each iteration. Hatched: a "
        "tile's `cp.async` copies in flight into its buffer; solid: the warps computing it from that "
        "buffer; grey: waiting for a copy to land. Below, the same rules with one buffer more. The "
        "durations are illustrative (a copy's latency 1.5 times a tile's arithmetic), not measured, and "
        "chosen to show the case where a copy takes longer than a tile's arithmetic: then two buffers "
        "leave the warps waiting at every tile and three hide the latency. Exercise 1 asks which case "
        "step 04 is in at D = 128 (there a tile's products and softmax outlast its copy, and the third "
        "buffer costs the second block per SM).\n"
        "```\n")
    return files
