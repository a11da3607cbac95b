#!/usr/bin/env python3
"""Plot a split sweep: step 10's time per call and effective bandwidth over its split count.

    bench_step10 --split-sweep 1,2,4,8,16,32,64,128,256 --results-dir OUT \\
        --benchmark_filter='decode/bf16/hd128/b(1|8)/hq32/hkv8/nq1/nk(16384|65536)/full'
    python3 tools/results/plot_split_sweep.py OUT/<gpu>/runs/step10-split-sweep -o split_sweep [--table]

reads the sweep's Google Benchmark JSON (files, or folders searched for ``*.json``): each
decode problem once at the count the step's heuristic picks (its plain name,
``decode/bf16/hd128/b8/hq32/hkv8/nq1/nk65536/full``) and once per forced count
(``.../full/splits:8``), with the counters ``num_splits``, ``heuristic_splits`` and
``key_tiles`` (the most splits that all see keys). It writes ``<OUT_PREFIX>.png`` and
``<OUT_PREFIX>.svg``: one column per problem, the time per call (top) and the effective TB/s
(bottom) over the split count (log2 axis), the heuristic's count marked by a red star and a
dashed line, the key-tile count by a dotted line. ``--table`` prints the points as Markdown.
Skipped counts are gaps, never zeros. The output is deterministic: the same input gives
byte-identical files.

The book draws the chapter-10 figure with it from ``results/<gpu>/runs/*split-sweep*/``
(steps/10_split_kv/book_figures.py); tools/gpu/decode_session.sh runs the sweep.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashsteps_results as fr  # noqa: E402

SWEEP_FOLDER_GLOB = "*/runs/*split-sweep*"  # under results/: the sweeps the book draws


@dataclass(frozen=True)
class Point:
    """One forced split count of a sweep."""

    splits: int
    us: float      # time per call, microseconds (median of repetitions)
    tbps: float    # effective bandwidth, TB/s


@dataclass
class Sweep:
    """One decode problem of one step on one GPU, at every count it was timed at."""

    gpu: str
    step: str
    step_name: str
    name: str                       # the decode problem's name, without /splits:<N>
    points: list[Point] = field(default_factory=list)   # forced counts, ascending
    skipped: dict[int, str] = field(default_factory=dict)  # forced count -> reason
    heuristic: int | None = None    # the count the step's heuristic picks
    heuristic_us: float | None = None  # the time at it (the plain-name run), if timed
    key_tiles: int | None = None
    context: dict = field(default_factory=dict, repr=False)

    @property
    def title(self) -> str:
        """"B=8, Nk=65536" (and Nq when it is not 1, causal when masked)."""
        z = fr.decode_sizes(self.name)
        parts = [f"B={z['batch']}"] + ([f"Nq={z['seqlen_q']}"] if z["seqlen_q"] != 1 else [])
        parts.append(f"Nk={z['seqlen_k']}")
        if fr.parse_name(self.name)["mask"] == "causal":
            parts.append("causal")
        return ", ".join(parts)

    @property
    def shape(self) -> str:
        """"bf16, D=128, Hq=32, Hkv=8"."""
        f, z = fr.parse_name(self.name), fr.decode_sizes(self.name)
        return f"{f['dtype']}, D={f['head_dim']}, Hq={z['heads_q']}, Hkv={z['heads_kv']}"


def _paths(inputs: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in inputs:
        out += sorted(p.rglob("*.json")) if p.is_dir() else [p]
    return out


def load_sweeps(inputs: list[Path | str]) -> list[Sweep]:
    """Every sweep in the given files and folders (loaded and validated by
    flashsteps_results.load_file), by GPU, step and problem order. Raises ResultsError on a
    malformed file, and when a file holds decode records without any forced count."""
    sweeps: dict[tuple[str, str, str], Sweep] = {}
    for path in _paths([Path(p) for p in inputs]):
        # results/<gpu>/runs/<set>/x.json is <gpu>'s (as load_runs() names it); elsewhere the
        # GPU's name decides.
        gpu = path.parent.parent.parent.name if path.parent.parent.name == fr.RUNS_FOLDER else None
        records = [r for r in fr.load_file(path, gpu=gpu) if r.kind == "decode"]
        if records and not any(r.splits is not None for r in records):
            raise fr.ResultsError(path, "benchmarks", "no forced split count (.../splits:<N>): "
                                  "not a split sweep (bench_stepNN --split-sweep)")
        for r in records:
            base = fr.decode_base(r.name)
            sw = sweeps.setdefault((r.gpu, r.step, base), Sweep(r.gpu, r.step, r.step_name, base,
                                                                context=dict(r.context)))
            c = r.counters
            if c.get("heuristic_splits") and sw.heuristic is None:
                sw.heuristic = int(c["heuristic_splits"])
            if c.get("key_tiles") and sw.key_tiles is None:
                sw.key_tiles = int(c["key_tiles"])
            if r.splits is None:  # the heuristic's own run
                if r.skipped:
                    continue
                if "num_splits" in c:
                    sw.heuristic = int(c["num_splits"])
                sw.heuristic_us = _us(r)
            elif r.skipped:
                sw.skipped[r.splits] = r.error or "skipped"
            else:
                sw.points.append(Point(r.splits, _us(r), c.get("GBps", 0.0) / 1e3))
    for sw in sweeps.values():
        sw.points.sort(key=lambda p: p.splits)
    return sorted(sweeps.values(), key=lambda s: (s.gpu, fr.step_sort_key(s.step), fr.name_sort_key(s.name)))


def _us(r: fr.Record) -> float:
    """Time per call in microseconds: the counter us_per_call, which every decode-set entry
    carries (bench_stepNN and sdpa_bench.py alike)."""
    if "us_per_call" not in r.counters:
        raise fr.ResultsError(r.source, f"benchmark {r.name!r}.us_per_call", "missing")
    return r.counters["us_per_call"]


def find_sweeps(results: Path | str) -> list[Path]:
    """The sweep folders under a results tree: ``results/<gpu>/runs/*split-sweep*/``."""
    root = Path(results)
    return sorted(p for p in root.glob(SWEEP_FOLDER_GLOB) if p.is_dir()) if root.is_dir() else []


def best(sw: Sweep) -> Point | None:
    """The fastest forced count (the smallest count among equal times)."""
    return min(sw.points, key=lambda p: (p.us, p.splits)) if sw.points else None


def sweep_table(sweeps: list[Sweep]) -> str:
    """Markdown: a row per split count, per problem a column of "time (TB/s)"; the heuristic's
    count in bold, the fastest marked with a star."""
    counts = sorted({p.splits for s in sweeps for p in s.points} | {k for s in sweeps for k in s.skipped})
    heads = [f"{s.title} ({s.shape})" for s in sweeps]
    lines = ["| Splits | " + " | ".join(heads) + " |", "|--:|" + "--:|" * len(sweeps)]
    for n in counts:
        cells = []
        for s in sweeps:
            pt = next((p for p in s.points if p.splits == n), None)
            if pt is None:
                cells.append("—" if n in s.skipped else "")
                continue
            cell = f"{pt.us:.1f} µs ({pt.tbps:.2f} TB/s)"
            if best(s) is not None and best(s).splits == n:
                cell += " ★"
            cells.append(f"**{cell}**" if s.heuristic == n else cell)
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    heur = [f"{s.title}: {s.heuristic}" + (f" ({s.heuristic_us:.1f} µs)" if s.heuristic_us else "")
            for s in sweeps if s.heuristic]
    notes = ["", "Bold: the heuristic's count (" + "; ".join(heur) + "). ★: the fastest forced count."] if heur \
        else ["", "★: the fastest forced count."]
    return "\n".join(lines + notes) + "\n"


def plot(sweeps: list[Sweep], out_prefix: Path) -> list[Path]:
    """Draws the figure (see the module docstring); returns the PNG and SVG paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from plot_results import save_figure

    plt.rcParams.update({"svg.hashsalt": "flashsteps", "svg.fonttype": "none", "font.size": 9})
    cols = max(1, len(sweeps))
    fig, axes = plt.subplots(2, cols, figsize=(3.6 * cols + 0.6, 5.6), squeeze=False, sharex="col")
    if not sweeps:
        for ax in axes.flat:
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
    for col, sw in enumerate(sweeps):
        top, bottom = axes[0, col], axes[1, col]
        xs = [p.splits for p in sw.points]
        top.plot(xs, [p.us for p in sw.points], marker="o", color="#1f77b4", lw=1.5)
        bottom.plot(xs, [p.tbps for p in sw.points], marker="o", color="#2ca02c", lw=1.5)
        skipped = f"\nskipped: {', '.join(str(k) for k in sorted(sw.skipped))}" if sw.skipped else ""
        top.set_title(f"{sw.title}\n{sw.shape}{skipped}", fontsize=9)
        ticks = sorted(set(xs) | set(sw.skipped))  # the heuristic has its line and legend entry
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
            ax.minorticks_off()
            ax.grid(True, which="major", color="#dddddd", lw=0.6)
            if sw.key_tiles and xs and sw.key_tiles <= 2 * max(xs):
                ax.axvline(sw.key_tiles, color="#888888", ls=":", lw=1.2,
                           label=f"key tiles: {sw.key_tiles}")
            if sw.heuristic:
                ax.axvline(sw.heuristic, color="#d62728", ls="--", lw=1.0,
                           label=f"heuristic: {sw.heuristic} splits")
        if sw.heuristic and sw.heuristic_us:
            top.plot([sw.heuristic], [sw.heuristic_us], marker="*", ms=13, color="#d62728", ls="none")
            tbps = _heuristic_tbps(sw)
            if tbps:
                bottom.plot([sw.heuristic], [tbps], marker="*", ms=13, color="#d62728", ls="none")
        top.set_ylim(bottom=0)
        bottom.set_ylim(bottom=0)
        top.legend(loc="upper right", fontsize=7, frameon=False)
        bottom.set_xlabel("splits (forced)")
        if col == 0:
            top.set_ylabel("time per call (µs)")
            bottom.set_ylabel("effective TB/s")
    steps = sorted({(s.step, s.step_name) for s in sweeps})
    who = ", ".join(fr.step_label(s, n) for s, n in steps) or "step 10"
    gpus = sorted({s.context.get("gpu_name", s.gpu) for s in sweeps})
    fig.suptitle(f"Step {who} on {', '.join(gpus) or 'no GPU'}:\ntime and bandwidth over the "
                 "forced split count", fontsize=10)
    footer = []
    for gpu in sorted({s.gpu for s in sweeps}):
        footer.append(_describe([s for s in sweeps if s.gpu == gpu]))
    if footer:
        fig.text(0.01, 0.005, "\n".join(footer), fontsize=7, va="bottom", ha="left", color="#444444")
    fig.tight_layout(rect=(0, 0.02 + 0.03 * len(footer), 1, 0.93))
    return save_figure(fig, Path(out_prefix))


def _heuristic_tbps(sw: Sweep) -> float | None:
    """The heuristic run's TB/s, from its time and a forced point's bytes (the same problem)."""
    if not sw.heuristic_us or not sw.points:
        return None
    p = sw.points[0]
    return p.tbps * p.us / sw.heuristic_us


def _describe(sweeps: list[Sweep]) -> str:
    ctx = sweeps[0].context
    keys = [("gpu_name", ""), ("gpu_arch", ""), ("runtime_version", ""), ("git_commit", "commit "),
            ("date", "")]
    return " · ".join(f"{label}{str(ctx[k])[:12] if k == 'git_commit' else ctx[k]}"
                      for k, label in keys if ctx.get(k))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", type=Path,
                    help="sweep JSON files, or folders holding them (e.g. results/<gpu>/runs/step10-split-sweep)")
    ap.add_argument("-o", "--out", type=Path, help="output prefix; writes PREFIX.png and PREFIX.svg")
    ap.add_argument("--table", action="store_true", help="print the points as a Markdown table")
    args = ap.parse_args(argv)
    try:
        sweeps = load_sweeps(args.inputs)
    except fr.ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not sweeps:
        print("error: no decode-set entries in the inputs", file=sys.stderr)
        return 2
    if args.table:
        sys.stdout.write(sweep_table(sweeps))
    if args.out:
        for path in plot(sweeps, args.out):
            print(path)
    if not args.table and not args.out:
        for sw in sweeps:
            b = best(sw)
            print(f"{sw.name}: heuristic {sw.heuristic}, fastest "
                  f"{b.splits if b else '?'} ({b.us:.1f} µs)" if b else f"{sw.name}: no timed count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
