#!/usr/bin/env python3
"""Where a kernel's warps wait, by SASS opcode: a summary of Nsight Compute's warp-state
sampling per instruction, for one kernel or for several side by side.

    python3 tools/gpu/ncu_stalls.py [--rows N] [--top N] LABEL=SOURCE.csv[.gz] [LABEL=SOURCE.csv[.gz] ...]
    python3 tools/gpu/ncu_stalls.py --parts HMMA 2 [--top N] LABEL=SOURCE.csv[.gz] [...]
    python3 tools/gpu/ncu_stalls.py --ends LDGSTS [--top N] LABEL=SOURCE.csv[.gz] [...]

Each SOURCE is the per-instruction table of one profiled launch (profile one launch, e.g.
``--launch-count 1``), exported with ``ncu -i REPORT.ncu-rep --page source --csv --print-source
sass`` from a report that has the SourceCounters and WarpStateStats sections; gzip-compressed or
not. Its rows are SASS instructions in address order: the ``Source`` column is the instruction
text, ``# Samples`` the warp-state samples taken while a warp stood at it, and ``stall_<reason>``
how many of them gave each reason (``stall_wait``: a fixed-latency dependency, the wait the
compiler encodes after an instruction; ``stall_short_sb``: a shared-memory or MUFU result;
``stall_long_sb``: a global or local memory access; ``stall_math``: the pipe busy;
``stall_barrier``: a block barrier). ``selected`` (the warp issued) and ``not_selected`` (it
could have, another did) are not waits, but they are samples too and are listed with the rest.
A LABEL may not contain ``=`` or ``|``.

An instruction's opcode is its first word without the predicate and the modifiers
(``@!P0 HMMA.16816.F32.BF16 ...`` is ``HMMA``). The table gives, per opcode, the instructions
executed (warp level), the samples and the largest reasons (``--top``, 3), for each kernel. The
opcodes are sorted by the first kernel's samples (then by the most samples in any kernel); the
first ``--rows`` (20) are shown, the rest of them (of any kernel) are summed in one ``N others``
row, and the last row, ``all``, sums every opcode. Samples are taken at a fixed interval of cycles
per SM, so two kernels profiled alike compare by their counts.

``--parts OPCODE K`` looks at one opcode in order instead. Consecutive OPCODE instructions (in
address order) that ran equally often, and more than never, form one code region: a loop body,
or a second loop over the same work (e.g. a first iteration that the source writes out on its
own). Each region's OPCODE instructions are cut into K equal runs. For an attention kernel's
``HMMA`` with K = 2 these are the tile's two GEMMs, S = Q K^T and O += P V. Each run gets its
samples, main reasons and span: the rows of the export from its first OPCODE instruction to its
last, so a span much longer than the run means other work interleaved. Two loops that run
equally often and follow one another are one region (profile a problem where they differ, e.g.
a block of more than two tiles); a region whose count is not a multiple of K is left out, with a
note on the standard error, and the tool exits with 1 when no region is left.

``--ends OPCODE`` is for a kernel whose warps run a set-up, one loop and an epilogue, in that
order in the code: steps 02-06 and FlashAttention-2, not a warp-specialised or persistent
kernel (steps 07-09), whose epilogue runs once per work tile. It cuts the export's rows into
three parts in address order: ``start``, the rows before the first OPCODE instruction that
ran; ``end``, those after the last row that ran more than twice as often as the export's first
row (which a warp runs once: the kernel's entry; code after a divergent branch can count
twice), that is after the last loop; ``middle``, the rest. For an attention kernel ``--ends
LDGSTS`` gives the block's set-up before its first copy, everything from that copy to the end
of its loop over the key tiles, and its epilogue. Profile a problem whose loop runs at least
three times per block (at least four key tiles, for a kernel that peels its first tile off),
or there is no end to find. Each part gets its rows (SASS instructions, also those that never
ran, such as another mask's code or slow paths), the instructions a warp executed there
(``per warp``: executed over the entry's count), the instructions executed (warp level), its
samples, its share of the kernel's samples and the main reasons. A kernel that cannot be cut
so is named on the standard error with the reason (its first row never ran; no OPCODE, or none
that ran; no loop; the loop ends before the first OPCODE; a loop before it), the others are
tabled, and the tool exits with 1. ``--rows`` applies to the opcode table only.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

STALL_PREFIX = "stall_"
NOT_ISSUED = " (Not Issued)"
HEADER_START = ["Address", "Source"]
GZIP_MAGIC = b"\x1f\x8b"


class InputError(ValueError):
    """An export that cannot be read as one kernel's table; the message names the file."""


@dataclass
class OpcodeStats:
    """Totals of the instructions of one opcode."""

    executed: int = 0
    samples: int = 0
    reasons: Counter = field(default_factory=Counter)


@dataclass
class Instruction:
    """One SASS instruction of the export, in address order."""

    op: str
    executed: int
    samples: int
    reasons: Counter


def opcode(sass: str) -> str:
    """``@!P0 HMMA.16816.F32.BF16 R1, ...`` -> ``HMMA``; "" for an empty line."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def _number(text: str, where: str) -> int:
    """A count of the export: digits with "," as thousands separator; "-" or "" is 0."""
    t = text.strip()
    if t in ("", "-"):
        return 0
    digits = t.replace(",", "")
    if not digits.isascii() or not digits.isdigit():
        raise InputError(f"{where}: '{text}' is not a count")
    return int(digits)


def _read_rows(path: Path) -> list[list[str]]:
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:2] == GZIP_MAGIC:
            data = gzip.decompress(data)
        text = data.decode("utf-8-sig")
        return list(csv.reader(text.splitlines()))
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{path}: {e}") from None


def read_instructions(path: Path) -> list[Instruction]:
    """The instructions of one ``--page source --csv --print-source sass`` export."""
    rows = _read_rows(path)
    headers = [i for i, r in enumerate(rows) if r[:2] == HEADER_START]
    if not headers:
        raise InputError(f"{path}: no header row starting with \"Address\",\"Source\"")
    if len(headers) > 1:
        raise InputError(f"{path}: {len(headers)} header rows, the tables of several kernels; export one launch")
    header = rows[headers[0]]
    col = {name: i for i, name in enumerate(header)}
    for needed in ("# Samples", "Instructions Executed"):
        if needed not in col:
            raise InputError(f"{path}: no column \"{needed}\" (profile with the SourceCounters section)")
    reasons = [n for n in header if n.startswith(STALL_PREFIX) and not n.endswith(NOT_ISSUED)]
    out: list[Instruction] = []
    for line, row in enumerate(rows[headers[0] + 1 :], start=headers[0] + 2):
        if len(row) < len(header):
            continue
        op = opcode(row[col["Source"]])
        if not op:
            continue
        where = f"{path}, line {line}"
        why = Counter()
        for r in reasons:
            n = _number(row[col[r]], f"{where}, column \"{r}\"")
            if n:
                why[r.removeprefix(STALL_PREFIX)] += n
        out.append(
            Instruction(
                op,
                _number(row[col["Instructions Executed"]], f"{where}, column \"Instructions Executed\""),
                _number(row[col["# Samples"]], f"{where}, column \"# Samples\""),
                why,
            )
        )
    return out


def _summed(items) -> OpcodeStats:
    """Instructions (or opcodes' totals) summed."""
    t = OpcodeStats()
    for s in items:
        t.executed += s.executed
        t.samples += s.samples
        t.reasons.update(s.reasons)
    return t


def by_opcode(instructions: list[Instruction]) -> dict[str, OpcodeStats]:
    """Opcode -> the totals of its instructions."""
    groups: dict[str, list[Instruction]] = {}
    for i in instructions:
        groups.setdefault(i.op, []).append(i)
    return {op: _summed(g) for op, g in groups.items()}


def read_source(path: Path) -> dict[str, OpcodeStats]:
    """Opcode -> its totals, from one ``--page source --csv --print-source sass`` export."""
    return by_opcode(read_instructions(path))


def total(stats: dict[str, OpcodeStats]) -> OpcodeStats:
    """Every opcode summed."""
    return _summed(stats.values())


def _reasons(s: OpcodeStats, top: int) -> str:
    """The @p top largest stall reasons of @p s, "wait 85, selected 10"."""
    return ", ".join(f"{r} {n}" for r, n in s.reasons.most_common(top))


def _cell(s: OpcodeStats | None, top: int) -> str:
    if s is None:
        return "– | – | –"
    return f"{s.executed:,} | {s.samples:,} | {_reasons(s, top)}"


def table(kernels: list[tuple[str, dict[str, OpcodeStats]]], top: int = 3, rows: int = 20) -> str:
    """The markdown table: one row per opcode (the first kernel's largest first), then the sum."""
    first = kernels[0][1]
    ops = sorted(
        {op for _, k in kernels for op in k},
        key=lambda op: (
            -(first[op].samples if op in first else -1),
            -max(k[op].samples for _, k in kernels if op in k),
            op,
        ),
    )
    head = "| opcode | " + " | ".join(f"{label}: executed | samples | main reasons" for label, _ in kernels) + " |"
    rule = "|:--|" + "--:|--:|:--|" * len(kernels)
    lines = [head, rule]
    for op in ops[:rows]:
        lines.append(f"| {op} | " + " | ".join(_cell(k.get(op), top) for _, k in kernels) + " |")
    if len(ops) > rows:
        rest = ops[rows:]
        sums = [_summed(k[op] for op in rest if op in k) if any(op in k for op in rest) else None for _, k in kernels]
        lines.append(f"| {len(rest)} others | " + " | ".join(_cell(t, top) for t in sums) + " |")
    lines.append("| all | " + " | ".join(_cell(total(k), top) for _, k in kernels) + " |")
    return "\n".join(lines)


@dataclass
class Run:
    """K-th part of one opcode's instructions in a code region."""

    executed: int  # times each instruction of the region ran (warp level)
    index: int  # 1 .. K
    count: int  # instructions of the opcode in the run
    span: int  # rows of the export (instructions of any kind) from the run's first to its last
    stats: OpcodeStats


def regions(instructions: list[Instruction], op: str) -> list[list[int]]:
    """Positions of @p op's instructions, grouped into regions: consecutive ones (among @p op's)
    that ran equally often and more than never."""
    out: list[list[int]] = []
    last = None
    for at, i in enumerate(instructions):
        if i.op != op:
            continue
        if i.executed == 0:
            last = None
            continue
        if last is None or i.executed != instructions[last].executed:
            out.append([])
        out[-1].append(at)
        last = at
    return out


def parts(instructions: list[Instruction], op: str, k: int, left_out: list[str] | None = None) -> list[Run]:
    """The instructions of opcode @p op in each region (regions()) cut into @p k runs in address
    order. A region whose count of @p op is not a multiple of k is left out (and described in
    @p left_out when given)."""
    out: list[Run] = []
    for where in regions(instructions, op):
        executed = instructions[where[0]].executed
        if len(where) % k:
            if left_out is not None:
                left_out.append(f"{len(where)} {op} run {executed:,} times: not a multiple of {k}")
            continue
        n = len(where) // k
        for part in range(k):
            chunk = where[part * n : (part + 1) * n]
            out.append(Run(executed, part + 1, n, chunk[-1] - chunk[0] + 1, _summed(instructions[a] for a in chunk)))
    return out


def parts_table(kernels: list[tuple[str, list[Run]]], op: str, top: int = 3) -> str:
    """The markdown table of parts(): one row per kernel, region and run."""
    lines = [
        f"| kernel | region (times run) | run | {op} | span | samples | main reasons |",
        "|:--|--:|--:|--:|--:|--:|:--|",
    ]
    for label, runs in kernels:
        for r in runs:
            why = _reasons(r.stats, top)
            lines.append(
                f"| {label} | {r.executed:,} | {r.index} | {r.count} | {r.span} | {r.stats.samples:,} | {why} |"
            )
    return "\n".join(lines)


ENDS = ("start", "middle", "end")


@dataclass
class Part:
    """One part of ``--ends``."""

    name: str  # start, middle or end
    rows: int  # rows of the export (SASS instructions, also those that never ran)
    per_warp: float  # instructions a warp executed there: executed / the entry's count
    stats: OpcodeStats


def ends(instructions: list[Instruction], first: str) -> list[Part] | str:
    """The three parts of ``--ends``: the rows before the first @p first instruction that ran,
    from it to the last row that ran more than twice as often as the export's first row (the
    kernel's entry, which a warp runs once), and after that. A string says why there is no such
    cut: the entry never ran, @p first is not in the export or never ran, no row ran more than
    twice (no loop), the loop ends before @p first, or a row before @p first ran more than twice
    (a loop before it: the kernel is not set-up, one loop, epilogue in address order)."""
    if not instructions:
        return "an export without instructions"
    entry = instructions[0].executed
    if entry == 0:
        return "its first instruction never ran (not the kernel's entry?)"
    if not any(i.op == first for i in instructions):
        return f"no {first} in the export"
    lo = next((a for a, i in enumerate(instructions) if i.op == first and i.executed > 0), None)
    if lo is None:
        return f"no {first} that ran"
    loop = [a for a, i in enumerate(instructions) if i.executed > 2 * entry]
    if not loop:
        return "no loop (no instruction ran more than twice as often as the first)"
    if loop[-1] < lo:
        return f"its last loop ends before the first {first}"
    if loop[0] < lo:
        before = sum(1 for a in loop if a < lo)
        return (
            f"{before} instructions before the first {first} ran more than twice as often as the first:"
            " a loop before the cut (a warp-specialised or persistent kernel?)"
        )
    cuts = [(0, lo), (lo, loop[-1] + 1), (loop[-1] + 1, len(instructions))]
    out = []
    for name, (x, y) in zip(ENDS, cuts):
        t = _summed(instructions[x:y])
        out.append(Part(name, y - x, t.executed / entry, t))
    return out


def ends_table(kernels: list[tuple[str, list[Part]]], top: int = 3) -> str:
    """The markdown table of ends(): one row per kernel and part."""
    lines = [
        "| kernel | part | rows | per warp | executed | samples | share | main reasons |",
        "|:--|:--|--:|--:|--:|--:|--:|:--|",
    ]
    for label, parts_ in kernels:
        everything = sum(p.stats.samples for p in parts_)
        for p in parts_:
            t = p.stats
            share = f"{100 * t.samples / everything:.1f}%" if everything else "–"
            why = _reasons(t, top)
            cells = [label, p.name, str(p.rows), f"{p.per_warp:,.0f}", f"{t.executed:,}", f"{t.samples:,}", share, why]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernels", nargs="+", metavar="LABEL=SOURCE.csv[.gz]")
    ap.add_argument("--top", type=_positive, default=3, help="stall reasons shown per cell (default 3)")
    ap.add_argument(
        "--rows",
        type=_positive,
        default=20,
        help="opcodes shown before the rest are summed (default 20; the opcode table only)",
    )
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument(
        "--parts", nargs=2, metavar=("OPCODE", "K"), help="cut OPCODE's instructions of each region into K runs"
    )
    mode.add_argument("--ends", metavar="OPCODE", help="the parts before the first OPCODE and after the last loop")
    args = ap.parse_args(argv)
    if args.ends is not None and not args.ends.strip():
        ap.error("--ends needs an opcode, e.g. LDGSTS")
    k = 0
    if args.parts is not None:
        try:
            k = _positive(args.parts[1])
        except argparse.ArgumentTypeError as e:
            print(f"ncu_stalls.py: --parts K: {e}", file=sys.stderr)
            return 2
    kernels = []
    for spec in args.kernels:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path or "|" in label:
            print(f"ncu_stalls.py: '{spec}' is not LABEL=PATH (a label without '=' or '|')", file=sys.stderr)
            return 2
        try:
            kernels.append((label, read_instructions(Path(path))))
        except InputError as e:
            print(f"ncu_stalls.py: {e}", file=sys.stderr)
            return 1
    if args.ends is not None:
        cut = [(label, ends(ins, args.ends)) for label, ins in kernels]
        for label, got in cut:
            if isinstance(got, str):
                print(f"ncu_stalls.py: {label}: no cut at {args.ends}: {got}", file=sys.stderr)
        done = [(label, got) for label, got in cut if not isinstance(got, str)]
        if done:
            print(ends_table(done, args.top))
        return 0 if len(done) == len(cut) else 1
    if args.parts is None:
        print(table([(label, by_opcode(ins)) for label, ins in kernels], args.top, args.rows))
        return 0
    op = args.parts[0]
    runs = []
    for label, ins in kernels:
        left_out: list[str] = []
        runs.append((label, parts(ins, op, k, left_out)))
        for why in left_out:
            print(f"ncu_stalls.py: {label}: left out {why}", file=sys.stderr)
        if not runs[-1][1] and not left_out:
            print(f"ncu_stalls.py: {label}: no {op} instruction that ran", file=sys.stderr)
    print(parts_table(runs, op, args.top))
    return 0 if all(r for _, r in runs) else 1


if __name__ == "__main__":
    try:
        status = main()
        sys.stdout.flush()  # a reader that has gone makes this raise here, inside the try
    except BrokenPipeError:
        # The reader stopped early (`| head`): as the Python documentation's note on SIGPIPE
        # says, point stdout at devnull so that the interpreter's final flush does not raise too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    sys.exit(status)
