# SPDX-License-Identifier: Apache-2.0
"""Step 02's figure for the book: the Q/K/V tiling and who owns which scores and outputs,
for the tile constants of steps/02_tiled/step.cu.

tools/book/stage_book.py calls generate() for every step folder that has a book_figures.py.
The constants (the 16 x 8 thread grid kThreadRows x kThreadCols, and TileShape<D>'s TM and TN)
are read from step.cu, so the figure follows the code. The ownership rule drawn is the one
tile_config's comment states and score_tile() and the P V loop index by: thread (ty, tx)
holds rows ty + kThreadRows i (i < TM), score columns tx + kThreadCols j (j < TN) and output
columns tx + kThreadCols c (c < DV = D / kThreadCols)."""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

HEAD_DIM = 128  # the head dim of the course's headline benchmark
SEQLEN = 256    # a short sequence, so that every tile of the head is visible


def tile_constants(repo: Path, head_dim: int = HEAD_DIM) -> dict[str, int]:
    """kThreadRows, kThreadCols, TM, TN, BLOCK_M, BLOCK_N and DV of step 02 at @p head_dim."""
    text = (repo / "steps" / "02_tiled" / "step.cu").read_text(encoding="utf-8")
    grid = re.search(r"constexpr int kThreadRows = (\d+), kThreadCols = (\d+)", text)
    shape = re.search(rf"struct TileShape<{head_dim}> {{ static constexpr int TM = (\d+), TN = (\d+); }};", text)
    if not (grid and shape):
        raise RuntimeError(f"steps/02_tiled/step.cu: no thread grid or TileShape<{head_dim}>")
    rows, cols = int(grid.group(1)), int(grid.group(2))
    tm, tn = int(shape.group(1)), int(shape.group(2))
    return {"thread_rows": rows, "thread_cols": cols, "TM": tm, "TN": tn, "BLOCK_M": rows * tm,
            "BLOCK_N": cols * tn, "DV": head_dim // cols, "head_dim": head_dim, "threads": rows * cols}


def owner(c: dict[str, int], row: int, col: int) -> tuple[int, int]:
    """(ty, tx) of the thread that holds element (row, col) of a block's S or O tile."""
    return row % c["thread_rows"], col % c["thread_cols"]


def elements_of(c: dict[str, int], ty: int, tx: int, cols: int) -> list[tuple[int, int]]:
    """The (row, col) elements of a BLOCK_M x cols tile that thread (ty, tx) holds."""
    per_thread = cols // c["thread_cols"]
    return [(ty + c["thread_rows"] * i, tx + c["thread_cols"] * j) for i in range(c["TM"]) for j in range(per_thread)]


def draw(c: dict[str, int], path: Path, seqlen: int = SEQLEN) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    matplotlib.rcParams["svg.hashsalt"] = "flashsteps"  # deterministic SVG ids
    bm, bn, d = c["BLOCK_M"], c["BLOCK_N"], c["head_dim"]
    q_tiles, kv_tiles = seqlen // bm, seqlen // bn
    fig = plt.figure(figsize=(11.0, 6.2))
    gs = fig.add_gridspec(1, 3, width_ratios=[1.5, 0.7, 2.6], wspace=0.3)

    # (a) one head: Q and O split into query tiles (one block each), K and V into KV tiles.
    ax = fig.add_subplot(gs[0, 0])
    block = 1  # the block drawn in detail
    step_tile = 3  # the KV tile in shared memory in this snapshot
    for name, x, tiles, rows, w in (("Q", 0, q_tiles, bm, 1.0), ("K", 1.6, kv_tiles, bn, 1.0),
                                    ("V", 3.0, kv_tiles, bn, 1.0), ("O", 4.4, q_tiles, bm, 1.0)):
        for t in range(tiles):
            mine = (name in "QO" and t == block) or (name in "KV" and t == step_tile)
            done = name in "KV" and t < step_tile
            face = ("#3182bd" if name in "QO" else "#e6550d") if mine else ("#fdd0a2" if done else "#f0f0f0")
            ax.add_patch(Rectangle((x, t * rows), w, rows, facecolor=face, edgecolor="black", lw=0.6))
        ax.text(x + w / 2, -6, name, ha="center", va="bottom", fontsize=10, weight="bold")
    ax.text(0.5, block * bm + bm / 2, f"block {block}", rotation=90, ha="center", va="center", fontsize=7,
            color="white")
    ax.text(4.9, block * bm + bm / 2, f"block {block}", rotation=90, ha="center", va="center", fontsize=7,
            color="white")
    ax.annotate("in shared\nmemory now", xy=(2.6, step_tile * bn + bn / 2), xytext=(2.3, seqlen + 40),
                fontsize=7, ha="center", arrowprops=dict(arrowstyle="->", lw=0.7), annotation_clip=False)
    ax.set_xlim(-0.2, 5.6)
    ax.set_ylim(seqlen + 70, -20)
    ax.set_yticks(range(0, seqlen + 1, bm))
    ax.set_xticks([])
    ax.set_ylabel("row (query or key) of one (batch, head)", fontsize=8)
    ax.set_title(f"One head, N = {seqlen}: {q_tiles} blocks\nof BLOCK_M = {bm} query rows;\n"
                 f"K, V in tiles of BLOCK_N = {bn}", fontsize=8)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)

    # (b) and (c): which thread holds which scores (BLOCK_M x BLOCK_N) and outputs (BLOCK_M x D).
    cmap = plt.get_cmap("tab10")
    picked = [(0, 0), (1, 2), (5, 7)]  # (ty, tx) of the threads drawn in colour
    for k, (cols, title, xlabel) in enumerate(((bn, f"S tile ({bm} x {bn}):\nTM x TN = {c['TM']} x {c['TN']}\n"
                                                    "scores per thread", "key of the KV tile"),
                                                   (d, f"O accumulator ({bm} x {d}):\nTM x DV = {c['TM']} x "
                                                       f"{c['DV']} outputs per thread", "column of O (0 .. D - 1)"))):
        ax = fig.add_subplot(gs[0, 1 + k])
        grid = [[(owner(c, r, col)[1]) for col in range(cols)] for r in range(bm)]
        ax.imshow(grid, cmap="Greys", vmin=-6, vmax=3 * c["thread_cols"], aspect="auto",
                  extent=(0, cols, bm, 0), interpolation="nearest")
        for n, (ty, tx) in enumerate(picked):
            for r, col in elements_of(c, ty, tx, cols):
                ax.add_patch(Rectangle((col, r), 1, 1, facecolor=cmap(n), edgecolor="none"))
        ax.set_xlim(0, cols)
        ax.set_ylim(bm, 0)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel("query row of the block" if k == 0 else "", fontsize=8)
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=7)
    handles = [Rectangle((0, 0), 1, 1, color=cmap(n)) for n in range(len(picked))]
    fig.legend(handles, [f"thread (ty, tx) = ({ty}, {tx}), threadIdx.x = {ty * c['thread_cols'] + tx}"
                         for ty, tx in picked], loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Step 02 at D = {d}: {c['threads']} threads as a {c['thread_rows']} x {c['thread_cols']} grid; "
                 "grey shade = tx of the owner", fontsize=9)
    fig.subplots_adjust(bottom=0.16, top=0.83)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)


def generate(repo: Path, out: Path, generated_url: str) -> dict[str, bytes | str]:
    """{file name: content} for the step's folder of the generated book sources."""
    c = tile_constants(repo)
    with tempfile.TemporaryDirectory() as tmp:
        svg = Path(tmp) / "tiling.svg"
        draw(c, svg)
        figure = svg.read_bytes()
    md = (
        "<!-- generated by steps/02_tiled/book_figures.py from steps/02_tiled/step.cu; do not edit -->\n\n"
        f"```{{figure}} {generated_url}/tiling.svg\n"
        ":alt: Left: Q, K, V and O of one head cut into tiles, one query tile per block, one KV tile in "
        "shared memory. Middle and right: the score tile and the output tile of a block, with the "
        "elements of three threads coloured\n:width: 100%\n\n"
        f"Step 02's tiling at D = {c['head_dim']}, with the constants read from `steps/02_tiled/step.cu` "
        f"when the book was built (`kThreadRows` x `kThreadCols` = {c['thread_rows']} x "
        f"{c['thread_cols']}, `TileShape<{c['head_dim']}>`: `TM` = {c['TM']}, `TN` = {c['TN']}). Left: a "
        f"block owns `BLOCK_M` = {c['BLOCK_M']} rows of Q and of O; K and V pass through shared memory "
        f"`BLOCK_N` = {c['BLOCK_N']} keys at a time (sweep 1 reads only K, sweep 2 K and V). Middle and "
        f"right: thread (ty, tx) holds rows ty + {c['thread_rows']} i of both tiles, score columns "
        f"tx + {c['thread_cols']} j and output columns tx + {c['thread_cols']} c "
        f"(`DV` = {c['DV']} of them); three threads are coloured, the grey shade is the owner's tx.\n```\n")
    return {"tiling.svg": figure, "tiling.md": md}
