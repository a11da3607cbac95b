#!/usr/bin/env python3
"""Plot FlashSteps TFLOPS per step, per GPU vendor.

    python3 tools/results/plot_results.py results -o docs/_static/tflops [--dtype bf16]

writes ``<OUT_PREFIX>.png`` and ``<OUT_PREFIX>.svg``.  One row of panels per measured GPU,
NVIDIA rows first, then AMD; a vendor without results gets no empty row, only a line
"<vendor>: not measured" under the figure (with no results at all, one row says
"not measured").  Columns are head_dim 64/128 x full/causal, x is the sequence
length (log2), y is TFLOPS on a log axis (the steps span three orders of magnitude:
steps 01-03 would sit on zero on a linear one), one solid line per step and one grey dashed or
dotted reference line per baseline (a result file whose ``flashsteps_step`` is
not a number, e.g. ``sdpa-flash`` from tools/baselines/sdpa_bench.py, labelled with its
``flashsteps_step_name``, "PyTorch SDPA flash").  Skipped benchmarks are gaps,
never zeros.

The output is deterministic: the same input gives byte-identical SVG/PNG.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashsteps_results as fr  # noqa: E402

COLUMNS = [(64, "full"), (64, "causal"), (128, "full"), (128, "causal")]
SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
STEP_COLORS = plt.get_cmap("tab10").colors
# Baselines (reference lines): grey, thinner, each with its own dash pattern and marker so
# that several (PyTorch SDPA flash / cuDNN / efficient) stay apart in print.
BASELINE_COLORS = ["#444444", "#888888", "#222222", "#aaaaaa"]
BASELINE_LINES = ["--", ":", "-.", (0, (5, 1, 1, 1, 1, 1))]
BASELINE_MARKERS = "x+1*"
MARKERS = "osD^v<>ph*"


def _rows(records: list[fr.Record]) -> list[tuple[str, str | None]]:
    """(vendor, gpu) per panel row, measured GPUs only; with none at all, one row
    (first vendor, None) that says "not measured"."""
    rows = [(v, g) for v, g in fr.gpus_of(records)]
    return rows or [(fr.VENDORS[0], None)]


def unmeasured_vendors(records: list[fr.Record]) -> list[str]:
    """Vendors with no results (named in a line under the figure, not drawn as panels)."""
    measured = {v for v, _ in fr.gpus_of(records)}
    return [v for v in fr.VENDORS if v not in measured]


def _styles(records: list[fr.Record]) -> dict[str, dict]:
    """Line style per step, stable across panels and rows."""
    styles, n_step, n_base = {}, 0, 0
    for step, _ in fr.steps_of(records):
        if fr.is_baseline(step):
            styles[step] = dict(color=BASELINE_COLORS[n_base % len(BASELINE_COLORS)],
                                linestyle=BASELINE_LINES[n_base % len(BASELINE_LINES)],
                                marker=BASELINE_MARKERS[n_base % len(BASELINE_MARKERS)],
                                linewidth=1.2, zorder=1.5)
            n_base += 1
        else:
            styles[step] = dict(color=STEP_COLORS[n_step % len(STEP_COLORS)], linestyle="-",
                                marker=MARKERS[n_step % len(MARKERS)])
            n_step += 1
    return styles


def panel_series(panel: list[fr.Record]) -> dict[str, tuple[list[int], list[float]]]:
    """{step: (seqlens, TFLOPS)} in step order; skipped points are NaN (a gap), not 0."""
    out = {}
    for step in sorted({r.step for r in panel}, key=fr.step_sort_key):
        pts = sorted((r.seqlen, r.tflops) for r in panel if r.step == step)
        out[step] = ([n for n, _ in pts], [math.nan if t is None else t for _, t in pts])
    return out


def _note(ax, text: str, size: int) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center",
            fontsize=size, color="#888888")


def plot(records: list[fr.Record], out_prefix: Path, dtype: str = "bf16") -> list[Path]:
    """Draw the figure for ``dtype`` and write PNG + SVG; returns the paths written."""
    plt.rcParams.update({"svg.hashsalt": "flashsteps", "svg.fonttype": "none",
                         "font.size": 9})
    attn = [r for r in records if r.kind == "attention" and r.dtype == dtype]
    rows, styles = _rows(records), _styles(attn)
    labels = dict(fr.steps_of(attn))
    height = 3.2 * len(rows) + 1.6          # panels, plus title and legend above, footer below
    fig, axes = plt.subplots(len(rows), len(COLUMNS), figsize=(4 * len(COLUMNS), height),
                             squeeze=False, sharex=True)
    footer = []
    for row, (vendor, gpu) in enumerate(rows):
        mine = [r for r in attn if r.gpu == gpu]
        everything = [r for r in records if r.gpu == gpu]
        name = everything[0].context["gpu_name"] if everything else ""
        footer.append(f"{fr.VENDOR_LABELS[vendor]} {gpu}: {fr.describe_gpu(everything)}"
                      if gpu else f"{fr.VENDOR_LABELS[vendor]}: not measured")
        values = [r.tflops for r in mine if r.tflops is not None and r.tflops > 0]
        top, bottom = max(values, default=1.0), min(values, default=1.0)
        for col, (hd, mask) in enumerate(COLUMNS):
            ax = axes[row][col]
            ax.set_xscale("log", base=2)
            ax.set_xticks(SEQLENS, [f"{n // 1024}k" if n >= 1024 else str(n) for n in SEQLENS])
            ax.minorticks_off()
            ax.grid(True, alpha=0.3)
            if row == 0:
                ax.set_title(f"head_dim {hd}, {mask}")
            if row == len(rows) - 1:
                ax.set_xlabel("sequence length N")
            if col == 0:
                title = fr.gpu_title(vendor, name) if name else fr.VENDOR_LABELS[vendor]
                ax.set_ylabel(f"{title}\nTFLOPS ({dtype})")
            if gpu is None:
                ax.set_yticks([])
                _note(ax, "not measured", 22)
                continue
            ax.set_yscale("log")
            ax.set_ylim(bottom / 1.5, top * 1.5)
            panel = [r for r in mine if r.head_dim == hd and r.mask == mask]
            if not panel:
                _note(ax, f"no {dtype} results", 12)
            for step, (xs, ys) in panel_series(panel).items():
                ax.plot(xs, ys, label=fr.step_label(step, labels[step]), **styles[step])
    handles = {}
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="upper center",
                   ncol=min(len(handles), 5), bbox_to_anchor=(0.5, 1 - 0.3 / height),
                   frameon=False)
    fig.suptitle(f"FlashSteps forward attention, {dtype}, B·N = 16384 tokens, Hq·D = 2048 "
                 "(gaps = skipped)", y=1 - 0.02 / height)
    footer += [f"{fr.VENDOR_LABELS[v]}: not measured (no results/<gpu>/ files)"
               for v in unmeasured_vendors(records) if rows[0][1] is not None]
    fig.text(0.01, 0.005, "\n".join(footer), fontsize=7, va="bottom", ha="left", color="#444444")
    fig.tight_layout(rect=(0, (0.1 + 0.13 * len(footer)) / height, 1,
                           1 - (0.9 if handles else 0.4) / height))

    return save_figure(fig, out_prefix)


def save_figure(fig, out_prefix: Path) -> list[Path]:
    """Writes PREFIX.png and PREFIX.svg without dates or tool versions (so an unchanged
    figure regenerates byte-identically), closes the figure, returns the two paths."""
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    written = [out_prefix.with_name(out_prefix.name + ext) for ext in (".png", ".svg")]
    fig.savefig(written[0], dpi=110, metadata={"Software": None})
    fig.savefig(written[1], metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", type=Path, help="folder with <gpu>/<file>.json results")
    ap.add_argument("-o", "--out", required=True, type=Path,
                    help="output prefix; writes PREFIX.png and PREFIX.svg")
    ap.add_argument("--dtype", default="bf16", choices=["fp16", "bf16", "fp32"])
    args = ap.parse_args(argv)
    try:
        records = fr.load_results(args.results_dir)
    except fr.ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in plot(records, args.out, args.dtype):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
