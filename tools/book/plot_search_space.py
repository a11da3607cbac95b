#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A tuned step's search space: the TFLOPS of every tile configuration, from a tuning table.

    python3 tools/book/plot_search_space.py steps/06_autotuned/tuned/nvidia-h200.json \\
        -o build/search_space [--dtype bf16] [--seqlen 1024 4096 16384] [--markdown FILE]

writes ``<OUT_PREFIX>.png`` and ``<OUT_PREFIX>.svg`` (and, with --markdown, a table of the
choices). The input is a tuning table as ``tune_step06`` or ``tune_step09`` writes it (the
shared tuner, common/include/flashsteps/tuner.h; formats ``flashsteps-step06-tuning/1`` and
``flashsteps-step09-tuning/1``)::

    {"format": "flashsteps-step06-tuning/1", "meta": {"command": ..., "date": ...},
     "entries": [{"device": "NVIDIA H200", "dtype": "bf16", "head_dim": 128, "causal": true,
                  "seqlen_bucket": 4096, "choice": "m128_n64_w4_s2",
                  "median_ms": {"m64_n32_w4_s2": 1.9, "m128_n64_w4_s2": 1.2, ...}}]}

A configuration of step 06 is named ``mBLOCK_M_nBLOCK_N_wWARPS_sSTAGES``, with ``_ov`` appended
when its OVERLAP knob is on (S of the next KV tile computed during the softmax of this one), as
``TileChoice::name()`` writes it; one of step 09 ``mBLOCK_M_nBLOCK_N_sSTAGES``
(``step09::TileShape::name()``).

Every entry is one problem of the standard set (B * N = 16384 tokens, Hq * D = 2048; the
seqlen bucket of a standard problem is its N), timed once per configuration of the space.
The times become TFLOPS with the course's FLOP rule, 4 * B * Hq * D * visible pairs, where
the pairs are N^2, or N (N + 1) / 2 for a causal mask (both alignments agree at Nq = Nk).
An entry that is not a standard-set shape (a head dim or a bucket that does not divide the
set's totals) is left out of the figure, and the table says how many were.

The figure is a heatmap per (head dim, mask): a row per configuration (in the order of
its parameters, so neighbours differ in one), a column per sequence length. A cell's colour
is the configuration's TFLOPS as a fraction of the fastest at that length, its number the
TFLOPS; the tuner's choice has a red box. (A bar per configuration needed 21 colours.) Nothing in the figure is typed: it is drawn from the table alone, and the same
table gives byte-identical SVG and PNG.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

FORMAT = "flashsteps-step06-tuning/1"
TOKENS = 16384  # B * N of every standard problem
WIDTH = 2048    # Hq * D of every standard problem
CHOICE_RE = re.compile(r"^m(\d+)_n(\d+)_w(\d+)_s(\d+)(_ov)?$")
# Step 09's shapes (steps/09_persistent/shapes.h): BLOCK_M, BLOCK_N, STAGES.
STEP09_RE = re.compile(r"^m(\d+)_n(\d+)_s(\d+)$")
# The table formats drawn here: each step's name pattern, its form for messages and titles.
FORMATS = {
    FORMAT: ("06", CHOICE_RE, "mBLOCK_M_nBLOCK_N_wWARPS_sSTAGES[_ov]"),
    "flashsteps-step09-tuning/1": ("09", STEP09_RE, "mBLOCK_M_nBLOCK_N_sSTAGES"),
}
DTYPES = ("fp16", "bf16")


class TableError(ValueError):
    """A tuning table is malformed; the message names the file and the field."""

    def __init__(self, path: Path | str, where: str, problem: str):
        super().__init__(f"{path}: {where}: {problem}")


def config_key(name: str) -> tuple[int, ...]:
    """Sort key of a configuration name: (BLOCK_M, BLOCK_N, WARPS, STAGES, OVERLAP), the
    order in which step 06 declares its space (step 09's names have no WARPS or OVERLAP: 0)."""
    m = CHOICE_RE.match(name)
    if m:
        return tuple(int(x) for x in m.groups()[:4]) + (1 if m[5] else 0,)
    m = STEP09_RE.match(name)
    if m:
        return (int(m[1]), int(m[2]), 0, int(m[3]), 0)
    return (1 << 30,)


def overlapped(name: str) -> bool:
    """True for a configuration with the OVERLAP knob on (name ends in ``_ov``)."""
    m = CHOICE_RE.match(name)
    return bool(m and m[5])


@dataclass(frozen=True)
class Shape:
    """The problem of one tuning entry."""

    dtype: str
    head_dim: int
    causal: bool
    seqlen: int

    @property
    def standard(self) -> bool:
        """True when B = 16384 / N and Hq = 2048 / D are whole numbers."""
        return (self.seqlen > 0 and self.head_dim > 0 and TOKENS % self.seqlen == 0
                and WIDTH % self.head_dim == 0)

    @property
    def batch(self) -> int:
        return TOKENS // self.seqlen

    @property
    def heads(self) -> int:
        return WIDTH // self.head_dim

    @property
    def visible_pairs(self) -> int:
        n = self.seqlen
        return n * (n + 1) // 2 if self.causal else n * n

    @property
    def flops(self) -> int:
        """4 * B * Hq * D * visible pairs (see book/measuring.md, "Counting FLOPs")."""
        return 4 * self.batch * self.heads * self.head_dim * self.visible_pairs

    @property
    def mask(self) -> str:
        return "causal" if self.causal else "full"

    @property
    def label(self) -> str:
        return f"{self.dtype}, D = {self.head_dim}, {self.mask}, N = {self.seqlen}"


@dataclass(frozen=True)
class Entry:
    """One tuned key: its problem, the chosen configuration and every configuration's time."""

    device: str
    shape: Shape
    choice: str
    median_ms: dict[str, float] = field(default_factory=dict)

    def tflops(self, config: str) -> float:
        return self.shape.flops / (self.median_ms[config] * 1e-3) / 1e12

    @property
    def spread(self) -> float:
        """How many times as fast the fastest configuration is as the slowest."""
        return max(self.median_ms.values()) / min(self.median_ms.values())


@dataclass
class Table:
    path: Path
    meta: dict[str, str]
    entries: list[Entry]
    format: str = FORMAT

    @property
    def step(self) -> str:
        """The step whose table this is ("06", "09")."""
        return FORMATS[self.format][0]

    @property
    def devices(self) -> list[str]:
        return sorted({e.device for e in self.entries})

    @property
    def dtypes(self) -> list[str]:
        return [d for d in DTYPES if any(e.shape.dtype == d for e in self.entries)]

    def standard(self, dtype: str | None = None) -> list[Entry]:
        return [e for e in self.entries if e.shape.standard
                and (dtype is None or e.shape.dtype == dtype)]


def _get(path, obj: dict, where: str, key: str, kind):
    value = obj.get(key)
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise TableError(path, f"{where}.{key}", f"missing or not {kind.__name__}: {value!r}")
    return value


def parse_table(data, path: Path | str = "<table>") -> Table:
    """A Table from the parsed JSON of a tuning table; every field is checked."""
    if not isinstance(data, dict):
        raise TableError(path, "top level", "expected a JSON object")
    fmt = data.get("format")
    if fmt not in FORMATS:
        raise TableError(path, "format", f"expected one of {sorted(FORMATS)!r}, got {fmt!r}")
    _, name_re, form = FORMATS[fmt]
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise TableError(path, "meta", "not an object")
    entries_json = data.get("entries")
    if not isinstance(entries_json, list):
        raise TableError(path, "entries", "missing or not a list")
    entries = []
    for i, e in enumerate(entries_json):
        where = f"entries[{i}]"
        if not isinstance(e, dict):
            raise TableError(path, where, "expected an object")
        dtype = _get(path, e, where, "dtype", str)
        if dtype not in DTYPES:
            raise TableError(path, f"{where}.dtype", f"expected fp16 or bf16, got {dtype!r}")
        shape = Shape(dtype, _get(path, e, where, "head_dim", int),
                      _get(path, e, where, "causal", bool),
                      _get(path, e, where, "seqlen_bucket", int))
        choice = _get(path, e, where, "choice", str)
        if not name_re.match(choice):
            raise TableError(path, f"{where}.choice", f"not of the form {form}: {choice!r}")
        times = e.get("median_ms", {})
        if not isinstance(times, dict) or not times:
            raise TableError(path, f"{where}.median_ms", "missing, empty or not an object")
        for name, ms in times.items():
            if not name_re.match(name):
                raise TableError(path, f"{where}.median_ms", f"not a configuration: {name!r}")
            if isinstance(ms, bool) or not isinstance(ms, (int, float)) or \
                    not math.isfinite(ms) or ms <= 0:
                raise TableError(path, f"{where}.median_ms.{name}",
                                 f"expected a positive time in ms, got {ms!r}")
        if choice not in times:
            raise TableError(path, f"{where}.choice", f"{choice} has no time in median_ms")
        entries.append(Entry(_get(path, e, where, "device", str), shape, choice,
                             {k: float(v) for k, v in times.items()}))
    return Table(Path(path), {str(k): str(v) for k, v in meta.items()}, entries, fmt)


def load_table(path: Path | str) -> Table:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TableError(path, "file", f"cannot read JSON ({exc})") from None
    return parse_table(data, path)


def load_tables(folder: Path | str) -> list[Table]:
    """Every ``*.json`` in ``folder`` (sorted by name); none when it does not exist."""
    folder = Path(folder)
    return [load_table(p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def fmt_tflops(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def panels(entries: list[Entry]) -> list[tuple[int, bool]]:
    return sorted({(e.shape.head_dim, e.shape.causal) for e in entries})


def choices_markdown(table: Table, dtype: str, seqlens: list[int] | None = None) -> str:
    """The tuner's choice per (head dim, mask) and sequence length, with its TFLOPS and how
    many times as fast as the slowest configuration it is."""
    entries = [e for e in table.standard(dtype)
               if seqlens is None or e.shape.seqlen in seqlens]
    name = table.path.name
    if not entries:
        return f"`{name}` holds no {dtype} entry of the standard set.\n"
    ns = sorted({e.shape.seqlen for e in entries})
    by = {(e.shape.head_dim, e.shape.causal, e.shape.seqlen): e for e in entries}
    lines = [f"Choices of `{name}` ({', '.join(table.devices)}, {dtype}): the fastest "
             "configuration, its TFLOPS and, in brackets, how many times as fast as the "
             "slowest configuration it is.", "",
             "| D, mask | " + " | ".join(f"N = {n}" for n in ns) + " |",
             "|:--|" + "--:|" * len(ns)]
    for d, causal in panels(entries):
        cells = []
        for n in ns:
            e = by.get((d, causal, n))
            cells.append("n/a" if e is None else
                         f"`{e.choice}` {fmt_tflops(e.tflops(e.choice))} (×{e.spread:.2f})")
        lines.append(f"| {d}, {'causal' if causal else 'full'} | " + " | ".join(cells) + " |")
    left_out = len([e for e in table.entries if not e.shape.standard])
    if left_out:
        lines += ["", f"{left_out} entries of the table are not standard-set shapes and are "
                      "not shown."]
    return "\n".join(lines) + "\n"


def plot(table: Table, out_prefix: Path, dtype: str = "bf16",
         seqlens: list[int] | None = None) -> list[Path]:
    """Draw the figure for ``dtype`` and write PNG + SVG; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tools = str(Path(__file__).resolve().parents[1] / "results")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    from plot_results import save_figure  # the repository's deterministic figure writer

    plt.rcParams.update({"svg.hashsalt": "flashsteps", "svg.fonttype": "none", "font.size": 9})
    entries = [e for e in table.standard(dtype) if seqlens is None or e.shape.seqlen in seqlens]
    keys = panels(entries) or [(0, False)]
    dims = sorted({d for d, _ in keys})
    masks = [False, True] if any(c for _, c in keys) and any(not c for _, c in keys) else \
        sorted({c for _, c in keys})
    # A heatmap per head dim and mask: a row per configuration, a column per N; the colour
    # is the configuration's TFLOPS as a fraction of the fastest at that N, the number in
    # the cell its TFLOPS, and the tuner's choice is outlined.
    n_rows = {d: len({c for e in entries if e.shape.head_dim == d for c in e.median_ms}) or 1
              for d in dims}
    height = sum(0.26 * n_rows[d] + 0.9 for d in dims) + 1.4
    fig, axes = plt.subplots(len(dims), len(masks), figsize=(5.6 * len(masks) + 1.2, height),
                             squeeze=False,
                             gridspec_kw={"height_ratios": [n_rows[d] + 3 for d in dims]})
    cmap = plt.get_cmap("viridis")
    image = None
    for r, d in enumerate(dims):
        for col, causal in enumerate(masks):
            ax = axes[r][col]
            mine = sorted((e for e in entries if (e.shape.head_dim, e.shape.causal) == (d, causal)),
                          key=lambda e: e.shape.seqlen)
            if not mine:
                ax.set_xticks([])
                ax.set_yticks([])
                ax.text(0.5, 0.5, f"no {dtype} entries of the standard set", transform=ax.transAxes,
                        ha="center", va="center", fontsize=12, color="#888888")
                continue
            configs = sorted({c for e in mine for c in e.median_ms}, key=config_key)
            grid = [[math.nan] * len(mine) for _ in configs]
            for j, e in enumerate(mine):
                best = max(e.tflops(c) for c in e.median_ms)
                for i, c in enumerate(configs):
                    if c in e.median_ms:
                        grid[i][j] = e.tflops(c) / best
            image = ax.imshow(grid, cmap=cmap, vmin=0.5, vmax=1.0, aspect="auto",
                              interpolation="nearest")
            for j, e in enumerate(mine):
                for i, c in enumerate(configs):
                    if c not in e.median_ms:
                        continue
                    frac = grid[i][j]
                    ax.text(j, i, fmt_tflops(e.tflops(c)), ha="center", va="center", fontsize=6.5,
                            color="black" if frac > 0.75 else "white")
                    if c == e.choice:
                        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False,
                                                   edgecolor="#d62728", linewidth=1.8))
            ax.set_xticks(range(len(mine)), [f"N = {e.shape.seqlen}" for e in mine], fontsize=7)
            ax.set_yticks(range(len(configs)), configs, fontsize=7)
            ax.set_title(f"head_dim {d}, {'causal' if causal else 'full'}", fontsize=10)
    if image is not None:
        bar = fig.colorbar(image, cax=fig.add_axes((0.89, 0.3, 0.015, 0.4)))
        bar.set_label("TFLOPS / fastest at this N\n(cells: TFLOPS; red box: the tuner's choice)",
                      fontsize=8)
    devices = ", ".join(table.devices) or "no device"
    fig.suptitle(f"Step {table.step} search space on {devices}: TFLOPS of every configuration "
                 f"({FORMATS[table.format][2]}), {dtype}, B·N = 16384, Hq·D = 2048",
                 fontsize=10, y=1 - 0.1 / height)
    meta = table.meta
    footer = (f"{table.path.name}: " + " · ".join(
        f"{k} {meta[k]}" for k in ("date", "git_commit", "command") if meta.get(k)))
    fig.text(0.01, 0.004, footer, fontsize=7, va="bottom", ha="left", color="#444444")
    fig.subplots_adjust(left=0.12, right=0.85, top=1 - 0.75 / height, bottom=0.55 / height,
                        hspace=0.9 / (height / len(dims)), wspace=0.35)
    return save_figure(fig, out_prefix)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("table", type=Path, help="tuning table (JSON) written by tune_step06 or tune_step09")
    ap.add_argument("-o", "--out", required=True, type=Path,
                    help="output prefix; writes PREFIX.png and PREFIX.svg")
    ap.add_argument("--dtype", default="bf16", choices=DTYPES)
    ap.add_argument("--seqlen", type=int, nargs="+", help="only these sequence lengths")
    ap.add_argument("--markdown", type=Path, help="also write the choices as a Markdown table")
    args = ap.parse_args(argv)
    try:
        table = load_table(args.table)
    except TableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in plot(table, args.out, args.dtype, args.seqlen):
        print(path)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(choices_markdown(table, args.dtype, args.seqlen),
                                 encoding="utf-8")
        print(args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
