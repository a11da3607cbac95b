# SPDX-License-Identifier: Apache-2.0
"""Step 05's figure for the book: the causal tile map and the order of the blocks, drawn from
the kernel's own tile maps.

tools/book/stage_book.py calls generate() for every step folder that has a book_figures.py.
It compiles a short host program against common/include/flashsteps/causal_schedule.h
(block_tile() and kv_tiles(), step 05 kernel's index maps restated in the same expressions; plain C++, no GPU
runtime), runs it for one problem of the standard set, and draws

- which KV tiles each query tile of one head visits without the mask, with it, or skips;
- when each block runs on the 132 SMs of an H200 if the blocks are handed out in blockIdx
  order to the first free SM (a list schedule, one block per SM at a time, a block's cost its
  number of KV tiles), in step 05's order (heaviest first) and in step 04's (head by head).

The tile shape (BLOCK_M, BLOCK_N at the problem's head dim on NVIDIA) is read from
steps/05_causal/step.cu."""
from __future__ import annotations

import heapq
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "book"))
from host_program import run_json  # noqa: E402  (compiles and runs a host program)

# One problem of the standard set (B = 16384 / N, Hq = 2048 / D), causal, on an H200.
SEQLEN, HEAD_DIM = 8192, 128
SMS = 132  # streaming multiprocessors of an H200

DUMP = r"""
#include <cstdio>
#include "flashsteps/causal_schedule.h"
using namespace flashsteps;
// The fields of Params that block_tile() and kv_tiles() read.
struct Problem {
  std::int64_t B, Hq, Nq, Nk;
  int m_tiles;
  Mask mask;
};
int main() {
  // {"m_tiles": T, "tiles": [[n_tiles, n_full_tiles] per query tile],
  //  "lpt" / "head_by_head": [[bh, m_tile] per block] (causal / full order)}
  constexpr int block_m = @BLOCK_M@, block_n = @BLOCK_N@;
  const std::int64_t N = @N@;
  const Problem causal{@B@, @HQ@, N, N, static_cast<int>((N + block_m - 1) / block_m), Mask::causal_bottom_right};
  Problem full = causal;
  full.mask = Mask::none;
  std::printf("{\"m_tiles\": %d, \"tiles\": [", causal.m_tiles);
  for (int t = 0; t < causal.m_tiles; ++t) {
    const schedule::KvTiles v = schedule::kv_tiles<block_m, block_n>(causal, std::int64_t{t} * block_m);
    std::printf("%s[%lld, %lld]", t ? ", " : "", static_cast<long long>(v.n_tiles),
                static_cast<long long>(v.n_full_tiles));
  }
  const Problem* problems[2] = {&causal, &full};
  const char* names[2] = {"lpt", "head_by_head"};
  for (int o = 0; o < 2; ++o) {
    std::printf("], \"%s\": [", names[o]);
    for (std::int64_t blk = 0; blk < causal.B * causal.Hq * causal.m_tiles; ++blk) {
      const schedule::BlockTile w = schedule::block_tile(*problems[o], static_cast<std::uint32_t>(blk));
      std::printf("%s[%lld, %lld]", blk ? ", " : "", static_cast<long long>(w.bh), static_cast<long long>(w.m_tile));
    }
  }
  std::printf("]}\n");
}
"""


def tile_shape(repo: Path, head_dim: int = HEAD_DIM) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) of step 05's NVIDIA DefaultTile at @p head_dim, read from step.cu."""
    text = (repo / "steps" / "05_causal" / "step.cu").read_text(encoding="utf-8")
    nvidia = text.split("#else", 1)[1].split("#endif", 1)[0]  # the NVIDIA branch of tile_config
    special = re.search(rf"struct DefaultTile<{head_dim}>\s*{{\s*using type = TileConfig<(\d+),\s*(\d+),", nvidia)
    generic = re.search(r"template <int HEAD_DIM> struct DefaultTile\s*{\s*using type = TileConfig<(\d+),\s*(\d+),",
                        nvidia)
    m = special or generic
    if not m:
        raise RuntimeError("steps/05_causal/step.cu: no NVIDIA DefaultTile found")
    return int(m.group(1)), int(m.group(2))


def tile_map(repo: Path, seqlen: int = SEQLEN, head_dim: int = HEAD_DIM) -> dict:
    """The kernel's tile maps for the standard problem (B = 16384 / N, Hq = 2048 / D)."""
    block_m, block_n = tile_shape(repo, head_dim)
    batch, heads = 16384 // seqlen, 2048 // head_dim
    source = (DUMP.replace("@B@", str(batch)).replace("@HQ@", str(heads)).replace("@N@", str(seqlen))
              .replace("@BLOCK_M@", str(block_m)).replace("@BLOCK_N@", str(block_n)))
    data = run_json(repo, source, "step 05's causal tile map")
    data.update(batch=batch, heads=heads, seqlen=seqlen, head_dim=head_dim, block_m=block_m, block_n=block_n)
    return data


def list_schedule(costs: list[int], slots: int = SMS) -> tuple[list[tuple[int, int, int]], int]:
    """Blocks handed out in order, each to the slot that frees first (lowest index on ties):
    [(slot, start, end) per block] and the makespan."""
    free = [(0, s) for s in range(slots)]
    heapq.heapify(free)
    placed = []
    for cost in costs:
        start, slot = heapq.heappop(free)
        placed.append((slot, start, start + cost))
        heapq.heappush(free, (start + cost, slot))
    return placed, max(end for _, _, end in placed)


def schedules(data: dict) -> dict[str, dict]:
    """Both orders, list-scheduled on the SMs: per order the placements and the makespan."""
    cost = [n for n, _ in data["tiles"]]
    out = {}
    for name in ("lpt", "head_by_head"):
        order = data[name]
        placed, makespan = list_schedule([cost[m] for _, m in order])
        out[name] = {"placed": placed, "makespan": makespan, "m_tile": [m for _, m in order]}
    return out


def lower_bound(data: dict, slots: int = SMS) -> float:
    """No schedule ends before the total work spread evenly, nor before the longest block."""
    cost = [n for n, _ in data["tiles"]]
    bh = data["batch"] * data["heads"]
    return max(bh * sum(cost) / slots, max(cost))


def draw(data: dict, sched: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    matplotlib.rcParams["svg.hashsalt"] = "flashsteps"  # deterministic SVG ids
    T = data["m_tiles"]
    n_kv = max(n for n, _ in data["tiles"])
    grid = [[0] * n_kv for _ in range(T)]  # 0 skipped, 1 masked, 2 full
    for t, (n, full) in enumerate(data["tiles"]):
        for j in range(n):
            grid[t][j] = 2 if j < full else 1
    fig = plt.figure(figsize=(10.0, 7.6))
    gs = fig.add_gridspec(2, 2, width_ratios=[1.0, 1.25], height_ratios=[1, 1], wspace=0.42, hspace=0.42)
    ax = fig.add_subplot(gs[:, 0])
    colours = ListedColormap(["#f2f2f2", "#e6550d", "#3182bd"])
    ax.pcolormesh(range(n_kv + 1), range(T + 1), grid, cmap=colours, vmin=0, vmax=2, linewidth=0,
                  rasterized=True)  # thousands of cells: one embedded image keeps the SVG small
    ax.set_ylim(T, 0)
    ax.set_xlim(0, n_kv)
    ax.set_xlabel(f"KV tile j ({data['block_n']} keys each)")
    ax.set_ylabel(f"query tile t ({data['block_m']} rows each)")
    lpt_start = {}
    for (slot, start, _), (m_tile) in zip(sched["lpt"]["placed"], sched["lpt"]["m_tile"]):
        lpt_start.setdefault(m_tile, start)
    first_wave = sorted({m for m in sched["lpt"]["m_tile"][:SMS]})
    ax.set_title(f"One head, N = {data['seqlen']}, D = {data['head_dim']}: KV tiles per query tile", fontsize=9)
    ax.legend(handles=[Patch(color="#3182bd", label="visited, no mask (n_full_tiles)"),
                       Patch(color="#e6550d", label="visited, masked (diagonal)"),
                       Patch(color="#f2f2f2", label="skipped")],
              loc="upper right", fontsize=7, framealpha=0.95)
    lo, hi = first_wave[0], first_wave[-1] + 1  # the query tiles of the first SMS blocks
    ax.plot([n_kv * 1.02, n_kv * 1.02], [lo, hi], color="black", lw=3, clip_on=False)
    ax.text(n_kv * 1.04, hi, f"the first {SMS}\nblocks (LPT)\nhold query\ntiles {lo}-{hi - 1}", fontsize=7,
            va="bottom", ha="left", clip_on=False)
    cmap = plt.get_cmap("viridis")
    for row, (name, title) in enumerate((("lpt", "step 05: heaviest query tiles first (LPT)"),
                                         ("head_by_head", "step 04's order: head by head, query tile fastest"))):
        axg = fig.add_subplot(gs[row, 1])
        s = sched[name]
        by_slot: dict[int, list] = {}
        for (slot, start, end), m_tile in zip(s["placed"], s["m_tile"]):
            by_slot.setdefault(slot, []).append((start, end - start, m_tile))
        for slot, bars in by_slot.items():
            axg.broken_barh([(a, w) for a, w, _ in bars], (slot, 1), facecolors=[cmap(m / (T - 1)) for _, _, m in bars],
                            edgecolor="white", linewidth=0.1, rasterized=True)
        axg.axvline(s["makespan"], color="black", lw=1)
        axg.set_xlim(0, max(v["makespan"] for v in sched.values()) * 1.02)
        axg.set_ylim(SMS, 0)
        axg.set_ylabel(f"SM (of {SMS})", fontsize=8)
        axg.set_title(f"{title}: done at {s['makespan']}", fontsize=8)
        axg.tick_params(labelsize=7)
    axg.set_xlabel("time, in KV tiles of work (a block's cost: the tiles it visits)", fontsize=8)
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, T - 1))
    cbar = fig.colorbar(sm, ax=fig.axes[1:], fraction=0.04, pad=0.02)
    cbar.set_label("query tile t of the block", fontsize=8)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None, bbox_inches="tight", dpi=150)
    plt.close(fig)


def generate(repo: Path, out: Path, generated_url: str) -> dict[str, bytes | str]:
    """{file name: content} for the step's folder of the generated book sources."""
    data = tile_map(repo)
    sched = schedules(data)
    with tempfile.TemporaryDirectory() as tmp:
        svg = Path(tmp) / "causal_tiles.svg"
        draw(data, sched, svg)
        figure = svg.read_bytes()
    T, r = data["m_tiles"], data["block_m"] // data["block_n"]
    visited = sum(n for n, _ in data["tiles"])
    masked = sum(n - f for n, f in data["tiles"])
    bh = data["batch"] * data["heads"]
    lpt, h2h = sched["lpt"]["makespan"], sched["head_by_head"]["makespan"]
    bound = lower_bound(data)
    md = (
        "<!-- generated by steps/05_causal/book_figures.py from causal_schedule.h; do not edit -->\n\n"
        f"```{{figure}} {generated_url}/causal_tiles.svg\n"
        ":alt: Left: grid of query tiles by KV tiles of one head, coloured visited without mask, masked, or "
        "skipped. Right: two timelines of the blocks on 132 SMs, heaviest first and head by head\n"
        ":width: 100%\n\n"
        f"Causal attention at N = {data['seqlen']}, D = {data['head_dim']} (B = {data['batch']}, "
        f"H = {data['heads']}; step 05's NVIDIA tiles, `BLOCK_M` = {data['block_m']}, `BLOCK_N` = "
        f"{data['block_n']}), drawn from `schedule::kv_tiles()` and `schedule::block_tile()` "
        "(`common/include/flashsteps/causal_schedule.h`, the kernel's index maps restated) when the book "
        f"was built. Left: the {T} query tiles of one head visit {visited} KV tiles, "
        f"$r T (T + 1) / 2$ with $r$ = {r}, $T$ = {T}; {masked} of them ($r T$) are masked. Right: "
        f"the {bh * T} blocks handed in `blockIdx` order to the first free one of {SMS} SMs, one "
        "block per SM at a time, each costing the KV tiles it visits (a model, not a measurement: "
        "real SMs run several blocks and the hardware's order is not promised). Heaviest first, the "
        f"grid is done at {lpt} tile-times; in step 04's order, at {h2h}. No order can finish "
        f"before {bound:.1f}.\n```\n")
    return {"causal_tiles.svg": figure, "causal_tiles.md": md}
