#!/usr/bin/env python3
"""The GPU's SM clock and power during each phase of a GPU session, from nvidia-smi samples.

The H200 lowers its SM clock under sustained load (from 1980 MHz to about 1710 MHz within a
second of the longest standard problems), so two kernels timed at different moments of a run
may be timed at different clocks. tools/gpu/gpu_session.sh samples
``nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,utilization.gpu
--format=csv -lms 100`` into ``clocks.csv`` while it measures, and writes a line
``<timestamp> start <phase>`` / ``<timestamp> end <phase>`` (nvidia-smi's timestamp format,
``YYYY/MM/DD HH:MM:SS.mmm``, local time as nvidia-smi writes it) around each phase into
``phases.txt``. This tool prints, per phase, the samples taken while a kernel ran (utilization
at least ``--busy`` percent: the host-side input generation and reference checks between
problems are left out) and their SM clock and power: median, minimum and maximum.

    python3 tools/gpu/clock_summary.py OUTDIR/clocks.csv OUTDIR/phases.txt [--busy 90]
"""
from __future__ import annotations

import argparse
import csv
import datetime
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

TIME_FORMAT = "%Y/%m/%d %H:%M:%S.%f"


@dataclass(frozen=True)
class Sample:
    t: datetime.datetime
    sm_mhz: float
    power_w: float
    temperature_c: float
    utilization_pct: float


def _number(field: str) -> float:
    """'1710 MHz' -> 1710.0; '[N/A]' and the like -> nan."""
    try:
        return float(field.strip().split()[0])
    except (ValueError, IndexError):
        return float("nan")


def read_samples(path: Path) -> list[Sample]:
    samples = []
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) < 5 or row[0].strip().startswith("timestamp"):
                continue
            try:
                t = datetime.datetime.strptime(row[0].strip(), TIME_FORMAT)
            except ValueError:
                continue
            samples.append(Sample(t, *(_number(x) for x in row[1:5])))
    return samples


def read_phases(path: Path) -> list[tuple[str, datetime.datetime, datetime.datetime]]:
    """(name, start, end) of every phase with both marks, in the order they started."""
    starts: dict[str, datetime.datetime] = {}
    phases = []
    for line in Path(path).read_text().splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[2] not in ("start", "end"):
            continue
        t = datetime.datetime.strptime(f"{parts[0]} {parts[1]}", TIME_FORMAT)
        name = " ".join(parts[3:])
        if parts[2] == "start":
            starts[name] = t
        elif name in starts:
            phases.append((name, starts.pop(name), t))
    return sorted(phases, key=lambda p: p[1])


def summarize(samples: list[Sample], phases, busy: float) -> list[dict]:
    rows = []
    for name, t0, t1 in phases:
        inside = [s for s in samples if t0 <= s.t <= t1]
        hot = [s for s in inside if s.utilization_pct >= busy and s.sm_mhz == s.sm_mhz and s.power_w == s.power_w]
        row = {"phase": name, "seconds": (t1 - t0).total_seconds(), "samples": len(inside), "busy": len(hot)}
        if hot:
            for key, values in (("sm_mhz", [s.sm_mhz for s in hot]), ("power_w", [s.power_w for s in hot])):
                row[key] = (statistics.median(values), min(values), max(values))
        rows.append(row)
    return rows


def table(rows: list[dict], busy: float) -> str:
    out = [f"| Phase | Seconds | Samples (busy >= {busy:g}%) | SM clock, MHz: median (min-max) | "
           "Power, W: median (min-max) |", "|:--|--:|--:|--:|--:|"]
    for r in rows:
        clock = power = "n/a"
        if "sm_mhz" in r:
            clock = "{:.0f} ({:.0f}-{:.0f})".format(*r["sm_mhz"])
            power = "{:.0f} ({:.0f}-{:.0f})".format(*r["power_w"])
        out.append(f"| {r['phase']} | {r['seconds']:.0f} | {r['samples']} ({r['busy']}) | {clock} | {power} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("clocks", type=Path, help="nvidia-smi CSV (see the module docstring)")
    ap.add_argument("phases", type=Path, help="phase marks: '<timestamp> start|end <phase>'")
    ap.add_argument("--busy", type=float, default=90.0,
                    help="count samples with at least this GPU utilization, percent (default 90)")
    args = ap.parse_args(argv)
    try:
        samples, phases = read_samples(args.clocks), read_phases(args.phases)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not phases:
        print(f"error: no phase with a start and an end mark in {args.phases}", file=sys.stderr)
        return 1
    print(table(summarize(samples, phases, args.busy), args.busy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
