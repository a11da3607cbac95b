#!/usr/bin/env python3
"""Plain-text TFLOPS summary of one or more bench_stepNN JSON files.

    python3 tools/results/bench_summary.py build/step01.json build/step02.json

Rows are benchmark names, columns are the given files (one step run each,
sorted numbered steps first, then baselines), cells are median TFLOPS; on the
rows of the decode set (``decode/...``, ``bench_stepNN --set decode``) they are
the time per call and the effective bandwidth instead (bytes of Q, K, V and O
over the time: at Nq = 1 attention is a streaming read of K and V).  The
last column is the largest ``rel_fro_err`` of the row, the last row the
largest per column.  "—" marks a skipped benchmark (reasons listed below the
table), a blank cell one the file does not contain.  Device context follows,
one line per column.  Standard library only: it runs on bare GPU machines.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashsteps_results as fr  # noqa: E402


def _labels(runs: list[list[fr.Record]], paths: list[Path]) -> list[str]:
    """Step labels, disambiguated by GPU and then by file name when repeated."""
    labels = [fr.step_label(r[0].step, r[0].step_name) if r else p.stem
              for r, p in zip(runs, paths)]
    if len(set(labels)) < len(labels):
        labels = [f"{lab}@{r[0].gpu}" if r else lab for lab, r in zip(labels, runs)]
    if len(set(labels)) < len(labels):
        labels = [f"{lab} ({p.name})" for lab, p in zip(labels, paths)]
    return labels


def _max_err(recs) -> str:
    errs = [r.counters["rel_fro_err"] for r in recs
            if r is not None and not r.skipped and "rel_fro_err" in r.counters]
    return f"{max(errs):.1e}" if errs else ""


def _cell(rec) -> str:
    """One cell: "" (not in the file), "—" (skipped), TFLOPS, or for the decode set
    "<us> us <TB/s> TB/s"."""
    if rec is None:
        return ""
    if rec.skipped:
        return "—"
    if rec.kind == "decode" and "GBps" in rec.counters:
        us = rec.counters.get("us_per_call")
        tbps = f"{rec.counters['GBps'] / 1e3:.2f} TB/s"
        return f"{us:.1f} us {tbps}" if us is not None else tbps
    return fr.fmt_tflops(rec.tflops)


def summarize(paths: list[Path]) -> str:
    """The whole report as text."""
    loaded = [(fr.load_file(p), p) for p in paths]
    loaded.sort(key=lambda rp: fr.step_sort_key(rp[0][0].step) if rp[0] else (2,))
    runs, paths = [r for r, _ in loaded], [p for _, p in loaded]
    labels = _labels(runs, paths)
    tables = [{r.name: r for r in recs} for recs in runs]
    names = sorted({n for t in tables for n in t}, key=fr.name_sort_key)

    header = ["benchmark", *labels, "max rel err"]
    rows = []
    for name in names:
        cells = [t.get(name) for t in tables]
        rows.append([name, *(_cell(c) for c in cells), _max_err(cells)])
    rows.append(["max rel err", *(_max_err(recs) for recs in runs), ""])
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    out = [line(header), "  ".join("-" * w for w in widths), *map(line, rows[:-1]),
           "  ".join("-" * w for w in widths), line(rows[-1]), "",
           "cells: median TFLOPS (decode/ rows: time per call and effective bandwidth, "
           "bytes of Q, K, V, O over time); — = skipped; blank = not in that file; "
           "max rel err = largest rel_fro_err"]
    skipped = []
    for label, recs in zip(labels, runs):
        reasons: dict[str, int] = {}
        for r in recs:
            if r.skipped:
                reasons[r.error] = reasons.get(r.error, 0) + 1
        skipped += [f"  {label}: {n} skipped: {why}" for why, n in reasons.items()]
    if skipped:
        out += ["", "skipped:", *skipped]
    out += ["", "devices:"]
    for label, recs, path in zip(labels, runs, paths):
        mhz = recs[0].context.get("gpu_max_clock_mhz") if recs else None
        clock = f" · max clock {mhz} MHz" if mhz else ""
        out.append(f"  {label}: {fr.describe_gpu(recs)}{clock} [{path}]")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    try:
        sys.stdout.write(summarize([Path(a) for a in args]))
    except fr.ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
