#!/usr/bin/env python3
"""Where a kernel's warps wait, by SASS opcode: a summary of Nsight Compute's warp-state
sampling per instruction, for one kernel or for several side by side.

    python3 tools/gpu/ncu_stalls.py [--top N] LABEL=SOURCE.csv[.gz] [LABEL=SOURCE.csv[.gz] ...]
    python3 tools/gpu/ncu_stalls.py --parts HMMA 2 LABEL=SOURCE.csv[.gz] [...]

Each SOURCE is the per-instruction table of one profiled launch, exported with
``ncu -i REPORT.ncu-rep --page source --csv --print-source sass`` from a report that has the
SourceCounters and WarpStateStats sections. Its rows are SASS instructions: the ``Source``
column is the instruction text, ``# Samples`` the warp-state samples taken while a warp stood at
it, and ``stall_<reason>`` how many of them gave each reason (``stall_wait``: a fixed-latency
dependency, the wait the compiler encodes after an instruction; ``stall_short_sb``: a
shared-memory or MUFU result; ``stall_math``: the pipe busy; ``stall_selected``: issuing).

An instruction's opcode is its first word without the predicate and the modifiers
(``@!P0 HMMA.16816.F32.BF16 ...`` is ``HMMA``). The table gives, per opcode, the instructions
executed (warp level), the samples and the three largest reasons, for each kernel; opcodes are
sorted by the first kernel's samples, and the last row sums every opcode. Samples are taken at a
fixed interval of cycles per SM, so two kernels profiled alike compare by their counts.

``--parts OPCODE K`` looks at one opcode in order instead: the instructions executed equally
often (a loop body, or a second loop over the same work, e.g. a first iteration the source
writes out on its own) are one code region, and the
OPCODE instructions of each region are cut into K equal runs in address order. For an attention
kernel's ``HMMA`` with K = 2 these are the tile's two GEMMs, S = Q K^T and O += P V. Each run
gets its samples, main reasons and span: the instructions of any kind from its first OPCODE
instruction to its last, so a span much longer than the run means other work interleaved.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

STALL_PREFIX = "stall_"
NOT_ISSUED = " (Not Issued)"


@dataclass
class OpcodeStats:
    """Totals of the instructions of one opcode."""

    executed: int = 0
    samples: int = 0
    reasons: Counter = field(default_factory=Counter)


def opcode(sass: str) -> str:
    """``@!P0 HMMA.16816.F32.BF16 R1, ...`` -> ``HMMA``; "" for an empty line."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def _number(text: str) -> int:
    text = text.replace(",", "").strip()
    try:
        return int(float(text))
    except ValueError:  # "-" or empty: not applicable
        return 0


@dataclass
class Instruction:
    """One SASS instruction of the export, in address order."""

    op: str
    executed: int
    samples: int
    reasons: Counter


def read_instructions(path: Path) -> list[Instruction]:
    """The instructions of one ``--page source --csv --print-source sass`` export."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header_at = next((i for i, r in enumerate(rows) if r[:2] == ["Address", "Source"]), None)
    if header_at is None:
        raise ValueError(f"{path}: no header row starting with \"Address\",\"Source\"")
    header = rows[header_at]
    col = {name: i for i, name in enumerate(header)}
    for needed in ("# Samples", "Instructions Executed"):
        if needed not in col:
            raise ValueError(f"{path}: no column \"{needed}\" (profile with the SourceCounters section)")
    reasons = [n for n in header if n.startswith(STALL_PREFIX) and not n.endswith(NOT_ISSUED)]
    out: list[Instruction] = []
    for row in rows[header_at + 1 :]:
        if len(row) < len(header):
            continue
        op = opcode(row[col["Source"]])
        if not op:
            continue
        why = Counter()
        for r in reasons:
            n = _number(row[col[r]])
            if n:
                why[r.removeprefix(STALL_PREFIX)] += n
        out.append(Instruction(op, _number(row[col["Instructions Executed"]]), _number(row[col["# Samples"]]), why))
    return out


def by_opcode(instructions: list[Instruction]) -> dict[str, OpcodeStats]:
    """Opcode -> the totals of its instructions."""
    out: dict[str, OpcodeStats] = {}
    for i in instructions:
        s = out.setdefault(i.op, OpcodeStats())
        s.executed += i.executed
        s.samples += i.samples
        s.reasons.update(i.reasons)
    return out


def read_source(path: Path) -> dict[str, OpcodeStats]:
    """Opcode -> its totals, from one ``--page source --csv --print-source sass`` export."""
    return by_opcode(read_instructions(path))


@dataclass
class Run:
    """K-th part of one opcode's instructions in a code region."""

    executed: int  # times each instruction of the region ran (warp level)
    index: int  # 1 .. K
    count: int  # instructions of the opcode in the run
    span: int  # instructions of any kind from the run's first to its last
    stats: OpcodeStats


def parts(instructions: list[Instruction], op: str, k: int) -> list[Run]:
    """The instructions of opcode @p op in each region (equal execution count, not 0) cut into
    @p k runs in address order; regions whose count of @p op is not a multiple of k are left out."""
    regions: dict[int, list[int]] = {}
    for at, i in enumerate(instructions):
        if i.op == op and i.executed > 0:
            regions.setdefault(i.executed, []).append(at)
    out: list[Run] = []
    for executed, where in sorted(regions.items(), key=lambda kv: -kv[0]):
        if len(where) % k:
            continue
        n = len(where) // k
        for part in range(k):
            chunk = where[part * n : (part + 1) * n]
            out.append(
                Run(executed, part + 1, n, chunk[-1] - chunk[0] + 1, by_opcode([instructions[a] for a in chunk])[op])
            )
    return out


def parts_table(kernels: list[tuple[str, list[Run]]], op: str, top: int = 3) -> str:
    """The markdown table of parts(): one row per kernel, region and run."""
    lines = [
        f"| kernel | region (times run) | run | {op} | span | samples | main reasons |",
        "|:--|--:|--:|--:|--:|--:|:--|",
    ]
    for label, runs in kernels:
        for r in runs:
            why = ", ".join(f"{w} {n}" for w, n in r.stats.reasons.most_common(top))
            lines.append(
                f"| {label} | {r.executed:,} | {r.index} | {r.count} | {r.span} | {r.stats.samples:,} | {why} |"
            )
    return "\n".join(lines)


def total(stats: dict[str, OpcodeStats]) -> OpcodeStats:
    """Every opcode summed."""
    t = OpcodeStats()
    for s in stats.values():
        t.executed += s.executed
        t.samples += s.samples
        t.reasons.update(s.reasons)
    return t


def _cell(s: OpcodeStats | None, top: int) -> str:
    if s is None or (s.samples == 0 and s.executed == 0):
        return "– | – | –"
    why = ", ".join(f"{r} {n}" for r, n in s.reasons.most_common(top))
    return f"{s.executed:,} | {s.samples:,} | {why}"


def table(kernels: list[tuple[str, dict[str, OpcodeStats]]], top: int = 3, rows: int = 20) -> str:
    """The markdown table: one row per opcode (the first kernel's largest first), then the sum."""
    first = kernels[0][1]
    ops = sorted({op for _, k in kernels for op in k}, key=lambda op: (-(first[op].samples if op in first else 0), op))
    head = "| opcode | " + " | ".join(f"{label}: executed | samples | main reasons" for label, _ in kernels) + " |"
    rule = "|:--|" + "--:|--:|:--|" * len(kernels)
    lines = [head, rule]
    for op in ops[:rows]:
        lines.append(f"| {op} | " + " | ".join(_cell(k.get(op), top) for _, k in kernels) + " |")
    if len(ops) > rows:
        rest = ops[rows:]
        lines.append(
            f"| {len(rest)} others | "
            + " | ".join(_cell(total({op: k[op] for op in rest if op in k}), top) for _, k in kernels)
            + " |"
        )
    lines.append("| all | " + " | ".join(_cell(total(k), top) for _, k in kernels) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernels", nargs="+", metavar="LABEL=SOURCE.csv[.gz]")
    ap.add_argument("--top", type=int, default=3, help="stall reasons shown per cell (default 3)")
    ap.add_argument("--rows", type=int, default=20, help="opcodes shown before the rest are summed (default 20)")
    ap.add_argument("--parts", nargs=2, metavar=("OPCODE", "K"), help="cut OPCODE's instructions of each region into K runs")
    args = ap.parse_args(argv)
    if args.parts is not None and (not args.parts[1].isdigit() or int(args.parts[1]) < 1):
        print(f"ncu_stalls.py: --parts K must be a positive integer, not '{args.parts[1]}'", file=sys.stderr)
        return 2
    kernels = []
    for spec in args.kernels:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            print(f"ncu_stalls.py: '{spec}' is not LABEL=PATH", file=sys.stderr)
            return 2
        try:
            kernels.append((label, read_instructions(Path(path))))
        except (OSError, ValueError) as e:
            print(f"ncu_stalls.py: {e}", file=sys.stderr)
            return 1
    if args.parts is not None:
        op, k = args.parts[0], int(args.parts[1])
        print(parts_table([(label, parts(ins, op, k)) for label, ins in kernels], op, args.top))
    else:
        print(table([(label, by_opcode(ins)) for label, ins in kernels], args.top, args.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
