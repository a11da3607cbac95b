#!/usr/bin/env python3
"""The table of an A/B run of tools/gpu/ab_bench.sh: per benchmark, each variant's TFLOPS
(the median over its repetitions, as bench_stepNN prints it) in every round, and the ratio of
the median over rounds to the first variant's.

    python3 tools/gpu/ab_summary.py OUTDIR NAME [NAME ...]

reads OUTDIR/NAME.rR.log (R = 1, 2, ...): the console output of bench_stepNN, whose lines
ending an aggregate read ``attention/bf16/hd128/n8192/full/...manual_time_median ...
TFLOPS=614.2 ...``. A variant without a number for a benchmark shows "n/a" there (it failed,
was cut short, or skipped the problem), and the tool exits with 1 if any cell is missing.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

MEDIAN_LINE = re.compile(r"^(?P<name>\S+?)(?:/min_time:\S+)?_median\s.*?\bTFLOPS=(?P<tflops>[0-9.]+)(?P<k>k?)")


def read_log(path: Path) -> dict[str, float]:
    """Benchmark name (without its Google Benchmark suffixes) -> median TFLOPS in one log."""
    out: dict[str, float] = {}
    for line in path.read_text(errors="replace").splitlines():
        m = MEDIAN_LINE.match(line)
        if m:
            name = m["name"].split("/repeats:")[0].split("/min_warmup_time:")[0].removesuffix("/manual_time")
            out[name] = float(m["tflops"]) * (1e3 if m["k"] else 1.0)
    return out


def rounds_of(outdir: Path, name: str) -> list[dict[str, float]]:
    """The logs of one variant, round 1 first."""
    paths = sorted(outdir.glob(f"{name}.r*.log"), key=lambda p: int(p.suffixes[-2][2:]))
    return [read_log(p) for p in paths]


def table(outdir: Path, names: list[str]) -> tuple[str, int]:
    """The Markdown table and the number of missing cells."""
    runs = {n: rounds_of(outdir, n) for n in names}
    benchmarks: list[str] = []
    for n in names:
        for r in runs[n]:
            benchmarks += [b for b in r if b not in benchmarks]
    header = ["benchmark"] + [f"{n} (rounds)" if i == 0 else f"{n} (rounds; median / {names[0]})"
                              for i, n in enumerate(names)]
    lines = ["| " + " | ".join(header) + " |", "|:--" + "|--:" * len(names) + "|"]
    missing = 0
    for b in benchmarks:
        cells, base = [b], None
        for i, n in enumerate(names):
            values = [r[b] for r in runs[n] if b in r]
            missing += len(runs[n]) - len(values) if runs[n] else 1
            if not values:
                cells.append("n/a")
                continue
            med = statistics.median(values)
            text = ", ".join(f"{v:.1f}" for v in values)
            if i == 0:
                base = med
            elif base:
                text += f"; {med / base:.3f}"
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("names", nargs="+")
    args = ap.parse_args(argv)
    text, missing = table(args.outdir, args.names)
    print(text)
    if missing:
        print(f"\n{missing} result(s) missing (n/a or fewer rounds than the others): see the logs", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
