# SPDX-License-Identifier: Apache-2.0
"""The tile headers as a given step knows them, and the diff of what each step introduces.

The tile headers (``common/include/flashsteps/tile.h``, ``tile_cuda.h``, ``tile_hip.h``) grow
with the steps that use them: 04a brings the accumulator and the plain-load products, 04b
``ldmatrix`` and the products that keep P in registers, 04 the ``cp.async`` copies and the
one-instruction exponential. Each part is marked with the step that introduces it, on a line
of its own::

    // [introduced:04b] ldmatrix

(a few words after the marker say what the part is) and runs to the next such line. Lines before the first marker belong to every step. The
*view* of a header for step S keeps the parts introduced at S or before it (in reading order,
``step_registry.step_order``: 03 < 04a < 04b < 04 < 05) and drops the marker lines; a step
before every marker sees no header at all. The book shows, beside each step's code diff, the
diff of the views of its base step and of the step itself: the part of the headers that the
step introduces (``stage_book.py`` writes it as ``tile.diff``).

    python3 tools/book/tile_views.py 04a            # the views of step 04a, to stdout
    python3 tools/book/tile_views.py 04b --diff 04a # the headers' diff from 04a to 04b
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_registry import STEP_NUMBER, step_order  # noqa: E402

HEADERS = ("common/include/flashsteps/tile.h", "common/include/flashsteps/tile_cuda.h",
           "common/include/flashsteps/tile_hip.h")
MARKER_RE = re.compile(rf"^\s*// \[introduced:({STEP_NUMBER})\](?:\s.*)?$")


def sections(text: str) -> list[tuple[str | None, list[str]]]:
    """The header as (step, lines) parts in file order; step None for the lines before the
    first marker. Marker lines are not part of any part."""
    out: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in text.splitlines(keepends=True):
        m = MARKER_RE.match(line)
        if m:
            out.append((m[1], []))
        else:
            out[-1][1].append(line)
    return out


def introducing_steps(text: str) -> list[str]:
    """The steps that introduce a part of the header, in reading order."""
    return sorted({s for s, _ in sections(text) if s is not None}, key=step_order)


def view(text: str, step: str | None) -> str:
    """The header as step ``step`` knows it: the parts introduced at ``step`` or before,
    without the marker lines; "" when no part is (and for ``step`` None: no step)."""
    parts = sections(text)
    if step is None or not any(s is not None and step_order(s) <= step_order(step) for s, _ in parts):
        return ""
    return "".join("".join(lines) for s, lines in parts
                   if s is None or step_order(s) <= step_order(step))


def header_diff(repo: Path, base: str | None, step: str) -> str:
    """Unified diff, over the tile headers, of the views of ``base`` and ``step``: what
    ``step`` introduces. A header that ``base`` does not see yet is diffed against
    /dev/null. "" when the step introduces nothing."""
    out = []
    for rel in HEADERS:
        path = repo / rel
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        a, b = view(text, base), view(text, step)
        if a == b:
            continue
        lines = list(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True),
                                          rel if a else "/dev/null", rel, n=3))
        out += [x if x.endswith("\n") else x + "\n\\ No newline at end of file\n" for x in lines]
    return "".join(out)


def code_without_comments(text: str) -> str:
    """The text with // comments removed (the doc comments name words of later steps)."""
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", help="a step number (04a)")
    ap.add_argument("--diff", metavar="BASE", help="print the diff from step BASE's views instead")
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[2])
    args = ap.parse_args(argv)
    if args.diff:
        sys.stdout.write(header_diff(args.repo, args.diff, args.step))
        return 0
    for rel in HEADERS:
        text = view((args.repo / rel).read_text(encoding="utf-8"), args.step)
        if text:
            sys.stdout.write(f"// ===== {rel} as step {args.step} knows it\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
