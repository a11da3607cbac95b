# SPDX-License-Identifier: Apache-2.0
"""Step 10's figures for the book, drawn from the kernel's own index maps and from measurements.

tools/book/stage_book.py calls generate() for every step folder that has a book_figures.py.
It compiles a short host program against steps/10_split_kv/packing.h (unpack_row() and
split_begin(), the functions the kernel calls; plain C++, no GPU runtime), runs it, and draws
which query row and head each row of a tile holds, and which key tiles each split takes. It
also draws the split sweep measured on each GPU (results/<gpu>/runs/*split-sweep*/, written by
bench_step10 --split-sweep through tools/gpu/decode_session.sh) with
tools/results/plot_split_sweep.py, or says that none is measured yet."""
from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "book"))
from host_program import run_json  # noqa: E402  (compiles and runs a host program)

DUMP = r"""
#include <cstdio>
#include "packing.h"
using flashsteps::step10::unpack_row;
using flashsteps::step10::split_begin;
int main() {
  // {"tiles": [{"group": G, "nq": Nq, "rows": [[i, g] per packed row of the (b, hk)]}],
  //  "splits": [{"n_tiles": n, "num_splits": S, "ranges": [[begin, end] per split]}]}
  const int cases[][2] = {{4, 1}, {4, 6}, {1, 1}};
  std::printf("{\"tiles\": [");
  for (int c = 0; c < 3; ++c) {
    const int G = cases[c][0], nq = cases[c][1];
    std::printf("%s{\"group\": %d, \"nq\": %d, \"rows\": [", c ? ", " : "", G, nq);
    for (int r = 0; r < G * nq; ++r) {
      const auto row = unpack_row(0, 0, r, G);
      std::printf("%s[%lld, %d]", r ? ", " : "", static_cast<long long>(row.query_row), row.head);
    }
    std::printf("]}");
  }
  std::printf("], \"splits\": [");
  const int split_cases[][2] = {{10, 3}, {10, 4}, {3, 5}};
  for (int c = 0; c < 3; ++c) {
    const int n = split_cases[c][0], S = split_cases[c][1];
    std::printf("%s{\"n_tiles\": %d, \"num_splits\": %d, \"ranges\": [", c ? ", " : "", n, S);
    for (int s = 0; s < S; ++s)
      std::printf("%s[%lld, %lld]", s ? ", " : "", static_cast<long long>(split_begin(n, s, S)),
                  static_cast<long long>(split_begin(n, s + 1, S)));
    std::printf("]}");
  }
  std::printf("]}\n");
}
"""

TILE_ROWS = 16  # decode_tile()'s BLOCK_M (splits.h): one 16-row MMA tile


def layout(repo: Path) -> dict:
    """The index maps, evaluated by the kernel's own functions."""
    return run_json(repo, DUMP, "step 10's book figures", include_dirs=(repo / "steps" / "10_split_kv",))


def draw_packing(tiles: list[dict], path: Path) -> None:
    """One column per case: the 16 rows of the decode tile (two tiles for the longer case),
    each coloured by its query head and labelled with query row and head; padding in grey."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    matplotlib.rcParams["svg.hashsalt"] = "flashsteps"  # deterministic SVG ids
    cmap = plt.get_cmap("tab10")
    height = max(-(-len(t["rows"]) // TILE_ROWS) * TILE_ROWS for t in tiles)
    fig, ax = plt.subplots(figsize=(8.0, 0.26 * height + 1.2))
    for c, t in enumerate(tiles):
        x = c * 1.4
        n_rows = -(-len(t["rows"]) // TILE_ROWS) * TILE_ROWS
        for r in range(n_rows):
            if r < len(t["rows"]):
                i, g = t["rows"][r]
                face, label = cmap(g % 10), f"row {i}, head {g}"
            else:
                face, label = "#dddddd", "padding"
            ax.add_patch(plt.Rectangle((x, r), 1.2, 1, facecolor=face, edgecolor="white", alpha=0.85))
            ax.text(x + 0.6, r + 0.5, label, ha="center", va="center", fontsize=6.5)
        for edge in range(0, n_rows + 1, TILE_ROWS):
            ax.plot([x - 0.05, x + 1.25], [edge, edge], color="black", lw=1.2)
        ax.text(x + 0.6, -0.6, f"G = {t['group']}, Nq = {t['nq']}", ha="center", va="bottom", fontsize=8)
    ax.set_xlim(-0.2, 1.4 * len(tiles))
    ax.set_ylim(height, -1.6)
    ax.set_yticks(range(0, height + 1, 4))
    ax.set_ylabel("packed row of one (batch, KV head)")
    ax.set_xticks([])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def splits_markdown(splits: list[dict]) -> str:
    lines = ["| key tiles | splits | tiles of each split |", "|--:|--:|:--|"]
    for s in splits:
        ranges = ", ".join(f"[{b}, {e})" if e > b else "∅" for b, e in s["ranges"])
        lines.append(f"| {s['n_tiles']} | {s['num_splits']} | {ranges} |")
    return "\n".join(lines) + "\n"


def split_sweep(repo: Path, generated_url: str) -> dict[str, bytes | str]:
    """``split_sweep.md`` (the figure and its table, or "not measured yet") and
    ``split_sweep.svg``, from step 10's sweeps under results/."""
    script = repo / "tools" / "results" / "plot_split_sweep.py"
    spec = importlib.util.spec_from_file_location("plot_split_sweep", script)
    pss = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = pss  # its dataclasses look their module up while it loads
    spec.loader.exec_module(pss)
    folders = pss.find_sweeps(repo / "results")
    header = ("<!-- generated by steps/10_split_kv/book_figures.py with tools/results/plot_split_sweep.py "
              "from results/<gpu>/runs/*split-sweep*/; do not edit -->\n\n")
    try:
        sweeps = [s for s in pss.load_sweeps(folders) if s.step == "10"]
    except ValueError as exc:  # flashsteps_results.ResultsError: a malformed file fails the build
        raise RuntimeError(f"split sweep: {exc}") from exc
    if not sweeps:
        return {"split_sweep.md": header + (
            "*Not measured yet:* no split sweep of step 10 under `results/<gpu>/runs/` "
            "(`tools/gpu/decode_session.sh` runs `bench_step10 --split-sweep` and writes "
            "`results/<gpu>/runs/step10-split-sweep/step10.json`; the figure is drawn here "
            "once such a file is committed).\n")}
    with tempfile.TemporaryDirectory() as tmp:
        svg = next(p for p in pss.plot(sweeps, Path(tmp) / "split_sweep") if p.suffix == ".svg")
        figure = svg.read_bytes()
    where = ", ".join(sorted({f"`results/{s.gpu}/runs/`" for s in sweeps}))
    md = (header + f"```{{figure}} {generated_url}/split_sweep.svg\n"
          ":alt: Time per call and effective bandwidth of step 10 over the forced split count, "
          "one column per decode problem, the heuristic's count marked\n:width: 100%\n\n"
          f"Step 10 at forced split counts (`bench_step10 --split-sweep`, {where}): time per call "
          "(top) and effective bandwidth (bottom) over the split count, on a log2 axis. The red "
          "star and dashed line mark the count the heuristic picks (`choose_num_splits()`), the "
          "dotted line the number of key tiles: past it some splits are empty.\n```\n\n"
          + pss.sweep_table(sweeps))
    return {"split_sweep.svg": figure, "split_sweep.md": md}


def generate(repo: Path, out: Path, generated_url: str) -> dict[str, bytes | str]:
    """{file name: content} for the step's folder of the generated book sources."""
    maps = layout(repo)
    files: dict[str, bytes | str] = dict(split_sweep(repo, generated_url))
    with tempfile.TemporaryDirectory() as tmp:
        svg = Path(tmp) / "packing.svg"
        draw_packing(maps["tiles"], svg)
        files["packing.svg"] = svg.read_bytes()
    files["packing.md"] = (
        "<!-- generated by steps/10_split_kv/book_figures.py from unpack_row(); do not edit -->\n\n"
        f"```{{figure}} {generated_url}/packing.svg\n"
        ":alt: Columns of tile rows, each labelled with the query row and query head it holds\n"
        ":width: 90%\n\n"
        "The rows of one (batch, KV head), drawn from `unpack_row()` (`steps/10_split_kv/packing.h`) "
        "when the book was built; black lines cut them into 16-row decode tiles. Left: decode with "
        "G = 4 query heads per KV head (Hq = 32, Hkv = 8): the four heads of the one new token fill "
        "4 of the 16 rows, and one sweep over K and V serves all four. Middle: six query rows "
        "(speculative decoding or a short chunk) pack 24 rows into two tiles. Right: G = 1 "
        "(Hkv = Hq): one real row per tile, as without packing.\n"
        "```\n")
    files["splits.md"] = (
        "<!-- generated by steps/10_split_kv/book_figures.py from split_begin(); do not edit -->\n\n"
        + splits_markdown(maps["splits"]))
    return files
