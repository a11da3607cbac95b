#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Lay out the book's Sphinx source tree in the build tree and generate what it includes.

    python3 tools/book/stage_book.py --repo . --out build/book/src

The chapters in book/ are copied to OUT (only files whose bytes changed are rewritten, so
Sphinx's incremental build keeps working), and each top-level entry of the repository
(steps/, common/, results/, ...) is linked into OUT under its own name. A chapter therefore
includes ``/steps/01_naive/step.cu`` by the path it has in the repository; conf.py keeps
the links out of the document search.

Everything generated goes to OUT/_generated/ (never into the source tree):

- ``steps/NN_slug/step.diff`` -- unified diff of the step's step.cu against the previous
  step's (none for the first step), and ``changes.md``, the Markdown a chapter includes
  for its "What changes" section (the diff, or the sentence that there is no previous step);
- ``steps/NN_slug/run.md`` -- the step's captured output, ``results/<gpu>/stepNN.txt`` for
  every GPU that has one, and the step's part of any other ``results/<gpu>/*.txt`` that
  captured several benchmarks in one go (a part starts at the line ``== bench_stepNN`` and
  ends at its ``results: ...`` line; it is copied to ``run_<gpu>_<file>.txt``), or a
  generated "not measured yet";
- ``results/status.md``, ``results/table.md``, ``results/table_n4096.md`` -- which GPUs
  were measured, and the TFLOPS tables printed by tools/results/results_table.py;
- ``results/tflops.{png,svg}`` and ``results/plot.md`` -- the figure drawn by
  tools/results/plot_results.py (log TFLOPS axis; a vendor with no results is a line under
  the figure, not an empty row of panels);
- ``results/ceilings.md`` -- the measured roofline ceilings with how each was measured
  (``results/<gpu>/ceilings.json``, ``gemm_ceiling.json``), or "not measured yet";
- ``results/roofline.{png,svg}``, ``results/roofline.md`` (the figure) and
  ``results/roofline_table.md`` (its points) -- drawn by tools/results/plot_roofline.py from the
  ceilings, the Nsight Compute traffic (``results/<gpu>/ncu/stepNN.csv``) and the JSON;
- ``results/traffic.md`` -- every step's Nsight Compute counters side by side;
- ``steps/NN_slug/results.md`` -- the step's TFLOPS per sequence length with the speed-up
  over the previous step (tools/results/results_table.py --step);
- ``steps/NN_slug/traffic.md`` and ``traffic_compare.md`` -- the step's counters against
  the counts its algorithm predicts (tools/book/ncu_traffic.py), and the steps up to this
  one side by side;
- ``facts.json`` -- the measured values (tools/book/facts.py) every chapter is rendered
  with: the chapters in OUT are book/'s chapters passed through Jinja, so a chapter writes
  ``{{ step03.fma[0].pct }}`` and keeps its "not measured yet" branch in ``{% if %}`` or
  ``{% for %} ... {% else %}`` blocks (an unknown name fails the build);
- ``steps/NN_slug/search_space.md`` (every step with a ``tuned/`` folder) -- for every
  tuning table checked in there, the figure of its search space
  (``search_space_<table>.{png,svg}``, tools/book/plot_search_space.py) and the table of
  its choices; with no table, a "not measured yet" note.

Which steps there are, and which step each is diffed against (its base), comes from the
build's registry ``<build>/steps.json`` (``--steps-json``, written by the root CMake
project), or, without it, from the ``steps/NN_slug/step.cu`` folders, each based on the step
before it (tools/book/step_registry.py). No step is named here.

From step 04 on, a step's results table also has a column per baseline measured on the
same GPU (``results_table.py --step NN --baselines``: PyTorch SDPA from tools/baselines/sdpa_bench.py).

The results tools are the teammates' (tools/results/results_table.py, tools/results/plot_results.py,
tools/results/plot_roofline.py, tools/results/flashsteps_results.py); this script only runs them and wraps
their output. With nothing under results/ they say "not measured" themselves.
"""

from __future__ import annotations

import argparse
import difflib
import filecmp
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_registry  # noqa: E402
import tile_views  # noqa: E402
from step_registry import Step  # noqa: E402

# Captured output of one step (results/<gpu>/stepNN.txt), and the header line of one step's
# part in a file that captured several (e.g. results/<gpu>/steps04-06.txt).
STEP_TXT_RE = re.compile(rf"^step{step_registry.STEP_NUMBER}\.txt$")
CAPTURE_HEADER_RE = re.compile(rf"^== bench_step({step_registry.STEP_NUMBER})\s*$")
# Top-level repository entries never linked into the Sphinx source tree.
SKIP_TOP = {"book", ".git", ".venv", "venv", "build", "_build", "node_modules"}
GENERATED = "_generated"


class StageError(RuntimeError):
    pass


def write_if_changed(path: Path, text: str | bytes) -> None:
    """Write only when the content differs, so unchanged files keep their mtime."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def copy_if_changed(src: Path, dst: Path) -> None:
    if dst.is_file() and not dst.is_symlink() and filecmp.cmp(src, dst, shallow=False):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink():
        dst.unlink()
    shutil.copy2(src, dst)


def remove_path(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def walk_no_links(root: Path):
    """Every path under root, deepest first, never descending into a symlinked folder
    (the staged tree links to the repository: walking into it could delete sources)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, topdown=True, followlinks=False):
        here = Path(dirpath)
        found += [here / name for name in filenames]
        for name in list(dirnames):
            path = here / name
            found.append(path)
            if path.is_symlink():
                dirnames.remove(name)
    return sorted(found, key=lambda p: (-len(p.parts), str(p)))


def prune(root: Path, keep: set[Path]) -> None:
    """Delete files under root that are not in keep, then empty folders."""
    if not root.is_dir():
        return
    for path in walk_no_links(root):
        if path.is_symlink() or path.is_file():
            if path not in keep:
                path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


# ----------------------------------------------------------------------------- source tree

def link(link_path: Path, entry: Path) -> None:
    """Make link_path a relative symlink to entry (unchanged if it already is one)."""
    target = os.path.relpath(entry.resolve(), link_path.parent.resolve())
    if link_path.is_symlink() and os.readlink(link_path) == target:
        return
    if link_path.exists() or link_path.is_symlink():
        remove_path(link_path)
    link_path.symlink_to(target, target_is_directory=entry.is_dir())


def stage_sources(repo: Path, book: Path, out: Path, render=None) -> None:
    """Copy book/ to OUT and link the repository's entries beside the chapters; with
    ``render`` (a function of the chapter's path returning its text), every chapter (*.md)
    is written as ``render`` returns it instead of copied.

    A repository folder whose name the book also uses (steps/: the repository's step
    sources, the book's step chapters) is merged one level down: OUT/steps holds the
    chapters and links to each steps/NN_slug folder.
    """
    out.mkdir(parents=True, exist_ok=True)
    keep: set[Path] = set()
    # 1. the book's own files
    for path in sorted(book.rglob("*")):
        rel = path.relative_to(book)
        if path.is_dir() or path.name == "CMakeLists.txt":
            continue
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            continue
        dst = out / rel
        for parent in reversed(rel.parents[:-1]):  # a link where a book folder now goes
            if (out / parent).is_symlink():
                (out / parent).unlink()
        if render is not None and path.suffix == ".md":
            if dst.is_symlink():
                dst.unlink()
            write_if_changed(dst, render(path))
        else:
            copy_if_changed(path, dst)
        keep.add(dst)
    # 2. links to the repository's entries
    for entry in sorted(repo.iterdir()):
        name = entry.name
        if name in SKIP_TOP or (name.startswith(".") and name != ".ci"):
            continue
        mine = book / name
        if not mine.exists():
            link(out / name, entry)
            keep.add(out / name)
        elif mine.is_dir() and entry.is_dir():
            for child in sorted(entry.iterdir()):
                if not (mine / child.name).exists():
                    link(out / name / child.name, child)
                    keep.add(out / name / child.name)
    # 3. drop whatever else is in OUT (files deleted from book/, removed repo entries)
    keep_dirs = {p for k in keep for p in k.relative_to(out).parents}
    for path in walk_no_links(out):
        rel = path.relative_to(out)
        if rel.parts[0] in (GENERATED, "_extra") or path in keep:
            continue
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir() and rel not in keep_dirs:
            path.rmdir() if not any(path.iterdir()) else shutil.rmtree(path)


# ----------------------------------------------------------------------------- steps

def find_steps(repo: Path, steps: list[Step] | None = None) -> list[Step]:
    """The steps the book covers: ``steps`` when the caller has them (from the build's
    registry), else every steps/NN_slug/step.cu, each based on the one before it."""
    return steps if steps is not None else step_registry.from_folders(repo)


def step_diff(prev: Path, cur: Path, repo: Path) -> tuple[str, int, int]:
    """Unified diff of two step.cu files (paths shown relative to the repo), +lines, -lines."""
    a = prev.read_text(encoding="utf-8").splitlines(keepends=True)
    b = cur.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = list(difflib.unified_diff(a, b, str(prev.relative_to(repo)), str(cur.relative_to(repo)),
                                      n=3))
    lines = [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
             for line in lines]
    added = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    removed = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    return "".join(lines), added, removed


HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\S")


def split_hunks(diff: str) -> tuple[str, list[str]]:
    """A unified diff as its file header (the ---/+++ lines) and its hunks, each a string
    starting with its @@ line."""
    lines = diff.splitlines(keepends=True)
    header, hunks = [], []
    for line in lines:
        if HUNK_RE.match(line):
            hunks.append([line])
        elif hunks:
            hunks[-1].append(line)
        else:
            header.append(line)
    return "".join(header), ["".join(h) for h in hunks]


def _changed(hunk: str) -> tuple[list[str], list[str]]:
    body = hunk.splitlines()[1:]
    minus = [x[1:] for x in body if x.startswith("-")]
    plus = [x[1:] for x in body if x.startswith("+")]
    return minus, plus


def _is_comment(line: str) -> bool:
    """Blank, a // comment, or a line of a /* */ block (``*`` alone or followed by a space);
    ``*reinterpret_cast<uint4*>(p) = v;`` is code."""
    t = line.strip()
    return not t or t.startswith(("//", "/*", "*/", "* ")) or t == "*"


def hunk_kind(hunk: str) -> str:
    """'comment' when every changed line is a comment or blank, 'rename' when the removed
    and added lines pair up and differ only in identifiers, replaced consistently (a
    namespace ``step03`` becoming ``step04``), else 'code'."""
    minus, plus = _changed(hunk)
    if all(_is_comment(x) for x in minus + plus):
        return "comment"
    if len(minus) != len(plus):
        return "code"
    mapping: dict[str, str] = {}
    for a, b in zip(minus, plus):
        ta, tb = WORD_RE.findall(a), WORD_RE.findall(b)
        if len(ta) != len(tb):
            return "code"
        for x, y in zip(ta, tb):
            if x == y:
                continue
            if not (x[0].isalpha() or x[0] == "_") or not (y[0].isalpha() or y[0] == "_"):
                return "code"
            if mapping.setdefault(x, y) != y:
                return "code"
    return "rename" if mapping else "comment"


def _op_kind(a: list[str], b: list[str], op) -> str:
    tag, i1, i2, j1, j2 = op
    minus = [x.rstrip("\n") for x in a[i1:i2]]
    plus = [x.rstrip("\n") for x in b[j1:j2]]
    return hunk_kind("@@\n" + "".join(f"-{x}\n" for x in minus) + "".join(f"+{x}\n" for x in plus))


def _hunks_of(a: list[str], b: list[str], ops: list, chosen: list[int], n: int = 3) -> list[str]:
    """Unified-diff hunks around the change ops whose indices are ``chosen``, with up to
    ``n`` lines of context that never reach into another change op (so the code hunks and
    the folded hunks of one diff are disjoint, and each is a valid diff of its own)."""
    others = [op for k, op in enumerate(ops) if op[0] != "equal" and k not in chosen]
    hunks: list[dict] = []
    for k in sorted(chosen):
        i1, i2 = ops[k][1], ops[k][2]
        lo = max([0, i1 - n] + [o[2] for o in others if o[2] <= i1])
        hi = min([len(a), i2 + n] + [o[1] for o in others if o[1] >= i2])
        between = any(h_end <= o[1] and o[2] <= i1 for o in others
                      for h_end in ([hunks[-1]["last"]] if hunks else []))
        if hunks and lo <= hunks[-1]["hi"] and not between:
            hunks[-1]["hi"], hunks[-1]["last"] = hi, i2
            hunks[-1]["ops"].append(k)
        else:
            hunks.append({"lo": lo, "hi": hi, "last": i2, "ops": [k]})
    out = []
    for h in hunks:
        lo, hi = h["lo"], h["hi"]
        body, na, nb, lo_b = [], 0, 0, None
        for k, (tag, i1, i2, j1, j2) in enumerate(ops):
            if tag == "equal":
                s_, e_ = max(i1, lo), min(i2, hi)
                if s_ >= e_:
                    continue
                if lo_b is None:
                    lo_b = j1 + (s_ - i1)
                # Equal up to indentation (folded_diff): shown as the new file has them.
                body += [" " + x for x in b[j1 + (s_ - i1):j1 + (e_ - i1)]]
                na += e_ - s_
                nb += e_ - s_
            elif k in h["ops"]:
                if lo_b is None:
                    lo_b = j1
                body += ["-" + x for x in a[i1:i2]] + ["+" + x for x in b[j1:j2]]
                na += i2 - i1
                nb += j2 - j1
        body = [x if x.endswith("\n") else x + "\n\\ No newline at end of file\n" for x in body]
        out.append(f"@@ -{lo + 1},{na} +{(lo_b or 0) + 1},{nb} @@\n" + "".join(body))
    return out


def folded_diff(prev: Path, cur: Path, repo: Path) -> tuple[str, str, int, int, int]:
    """The diff of two step.cu files split in two: the hunks that change code, and the
    hunks that only change comments or rename identifiers (folded in the chapter). Lines are
    compared without their leading and trailing white space, so code that only moved in or
    out by a level of indentation (a loop wrapped around it) is context, shown as the new
    file has it: the new side of every hunk is the new file's text, the old side may differ
    from the old file in indentation (step.diff, the whole diff, is exact). Returns (code
    diff, folded diff, code hunks, comment-only hunks, rename-only hunks)."""
    a = prev.read_text(encoding="utf-8").splitlines(keepends=True)
    b = cur.read_text(encoding="utf-8").splitlines(keepends=True)
    ops = []
    matcher = difflib.SequenceMatcher(None, [x.strip() for x in a], [x.strip() for x in b], autojunk=False)
    for op in matcher.get_opcodes():
        tag, i1, i2, j1, j2 = op
        # A change that starts with comment lines on both sides (the teaching header) and
        # goes on into code is two changes: the comment part folds, the code part shows.
        ka = next((k for k, x in enumerate(a[i1:i2]) if not _is_comment(x)), i2 - i1)
        kb = next((k for k, x in enumerate(b[j1:j2]) if not _is_comment(x)), j2 - j1)
        if tag != "equal" and (ka or kb) and (ka < i2 - i1 or kb < j2 - j1):
            ops += [("replace", i1, i1 + ka, j1, j1 + kb), ("replace", i1 + ka, i2, j1 + kb, j2)]
        else:
            ops.append(op)
    kinds = {k: _op_kind(a, b, op) for k, op in enumerate(ops) if op[0] != "equal"}
    header = f"--- {prev.relative_to(repo)}\n+++ {cur.relative_to(repo)}\n"
    code = _hunks_of(a, b, ops, [k for k, v in kinds.items() if v == "code"])
    rest = [k for k, v in kinds.items() if v != "code"]
    folded_hunks = _hunks_of(a, b, ops, rest)
    n_comment = sum(1 for k in rest if kinds[k] == "comment")
    n_rename = sum(1 for k in rest if kinds[k] == "rename")
    return (header + "".join(code) if code else "", header + "".join(folded_hunks) if rest else "",
            len(code), n_comment, n_rename)


def code_lines_changed(code_diff: str) -> int:
    """Lines of code a step diff changes: the + and - lines of its code hunks (folded_diff)
    that are not blank or comments. Lines that only moved by a level of indentation are not
    changes there, and neither are comment-only and rename-only hunks. The course keeps this
    at about 150 or below between neighbours (tools/book/tests)."""
    return sum(1 for x in code_diff.splitlines()
               if x[:1] in "+-" and not x.startswith(("+++", "---")) and not _is_comment(x[1:]))


def capture_sections(text: str) -> dict[str, str]:
    """The parts of a captured output that holds several steps' benchmark runs, by step
    number: from a line ``== bench_stepNN`` up to its ``results: ...`` line, or to the line
    before the next ``== `` header (or the end of the file)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = CAPTURE_HEADER_RE.match(line)
        if m:
            current = sections.setdefault(m[1], [])
            current.append(line)
            continue
        if current is None:
            continue
        if line.startswith("== "):
            current = None
            continue
        current.append(line)
        if line.startswith("results: "):
            current = None
    return {num: "\n".join(lines) + "\n" for num, lines in sections.items()}


def generate_steps(repo: Path, gen: Path, results: Path, keep: set[Path],
                   steps: list[Step] | None = None) -> None:
    steps = find_steps(repo, steps)
    numbered = step_registry.by_number(steps)
    for step in steps:
        num, name, d = step.number, step.name, step.folder
        out = gen / "steps" / name
        cur = d / "step.cu"
        lines_total = len(cur.read_text(encoding="utf-8").splitlines())
        if step.base is None:
            changes = (
                "<!-- generated by tools/book/stage_book.py; do not edit -->\n"
                f"Step {num} is the first step of the series: there is no previous step to "
                f"diff against, so the whole of `steps/{name}/step.cu` "
                f"({lines_total} lines) is new. Every later chapter shows here the "
                "generated diff against its predecessor.\n")
        else:
            base = numbered[step.base]
            pnum, pslug = base.number, base.slug
            diff, added, removed = step_diff(base.source, cur, repo)
            write_if_changed(out / "step.diff", diff)
            keep.add(out / "step.diff")
            code_diff, folded, n_code, n_comment, n_rename = folded_diff(base.source, cur, repo)
            write_if_changed(out / "code.diff", code_diff)
            write_if_changed(out / "folded.diff", folded)
            keep.update({out / "code.diff", out / "folded.diff"})
            caption = f"steps/{pnum}_{pslug}/step.cu → steps/{name}/step.cu"
            if not diff:
                body = (f"`steps/{name}/step.cu` is identical to "
                        f"`steps/{pnum}_{pslug}/step.cu`.\n")
            else:
                def block(file: str, what: str, summary: str, opened: bool) -> str:
                    return (f"````{{details}} {summary}\n" + (":open:\n" if opened else "")
                            + f"```{{literalinclude}} /{GENERATED}/steps/{name}/{file}\n"
                            ":language: diff\n:class: flashsteps-diff\n"
                            f":caption: {caption} ({what})\n```\n````\n")
                body = (f"Against step {pnum} (`steps/{pnum}_{pslug}/step.cu`), "
                        f"`steps/{name}/step.cu` adds {added} lines and removes {removed} "
                        f"({lines_total} lines in all); {code_lines_changed(code_diff)} of the "
                        "added and removed lines are code, not comments or blank. The diff is "
                        "generated when the book is built. It starts at the first change to "
                        "code; the changes to comments only "
                        f"({n_comment}, the teaching header among them) and the renames only "
                        f"({n_rename}) are folded below it (click to open), and lines that only "
                        "changed their indentation are context, as the new file has them. The "
                        "whole diff: "
                        f"{{download}}`step.diff </{GENERATED}/steps/{name}/step.diff>`.\n\n")
                if code_diff:
                    body += block("code.diff", f"{n_code} hunks that change code",
                                  f"The code diff: {n_code} hunks", True)
                if folded:
                    body += "\n" + block("folded.diff", "comment-only and rename-only changes",
                                          f"Folded: {n_comment} changes to comments only and "
                                          f"{n_rename} renames only", False)
            tile_diff = tile_views.header_diff(repo, base.number, num)
            if tile_diff:
                write_if_changed(out / "tile.diff", tile_diff)
                keep.add(out / "tile.diff")
                t_added = sum(1 for x in tile_diff.splitlines() if x.startswith("+") and not x.startswith("+++"))
                t_removed = sum(1 for x in tile_diff.splitlines() if x.startswith("-") and not x.startswith("---"))
                files = [h for h in tile_views.HEADERS if f"+++ {h}\n" in tile_diff]
                body += (f"\nStep {num} also brings its part of the tile headers "
                         f"({', '.join(f'`{Path(h).name}`' for h in files)}): the parts marked "
                         f"`// [introduced:{num}]` there, {t_added} lines added and {t_removed} "
                         f"removed against what step {pnum} knows of them "
                         f"(tools/book/tile_views.py). Whole: "
                         f"{{download}}`tile.diff </{GENERATED}/steps/{name}/tile.diff>`.\n\n"
                         f"````{{details}} The tile headers: what step {num} introduces\n"
                         f"```{{literalinclude}} /{GENERATED}/steps/{name}/tile.diff\n"
                         ":language: diff\n:class: flashsteps-diff\n"
                         f":caption: the tile headers as step {pnum} knows them → as step {num} "
                         "knows them\n```\n````\n")
            changes = "<!-- generated by tools/book/stage_book.py; do not edit -->\n" + body
        write_if_changed(out / "changes.md", changes)
        keep.add(out / "changes.md")

        # captured run output: results/<gpu>/stepNN.txt, and this step's part of a file
        # that captured several steps
        runs = sorted(results.glob(f"*/step{num}.txt")) if results.is_dir() else []
        parts = ["<!-- generated by tools/book/stage_book.py; do not edit -->"]
        for run in runs:
            rel = run.relative_to(results.parent)
            parts.append(f"```{{literalinclude}} /{rel.as_posix()}\n:language: text\n"
                         ":class: flashsteps-run\n"
                         f":caption: {rel.as_posix()} (captured on {run.parent.name})\n```")
        combined = sorted(p for p in results.glob("*/*.txt")
                          if not STEP_TXT_RE.match(p.name)) if results.is_dir() else []
        for path in combined:
            section = capture_sections(path.read_text(encoding="utf-8")).get(num)
            if section is None:
                continue
            gpu = path.parent.name
            copy = out / f"run_{gpu}_{path.stem}.txt"
            write_if_changed(copy, section)
            keep.add(copy)
            rel = path.relative_to(results.parent).as_posix()
            parts.append(f"```{{literalinclude}} /{GENERATED}/steps/{name}/{copy.name}\n"
                         ":language: text\n:class: flashsteps-run\n"
                         f":caption: the bench_step{num} part of {rel} (captured on {gpu})\n```")
        if len(parts) == 1:
            parts.append(f"*Not measured yet:* no captured output of step {num} under "
                         f"`results/` (the book includes `results/<gpu>/step{num}.txt`, or the "
                         f"`== bench_step{num}` part of another `results/<gpu>/*.txt`, when it "
                         "is there).")
        write_if_changed(out / "run.md", "\n\n".join(parts) + "\n")
        keep.add(out / "run.md")


# ----------------------------------------------------------------------------- results

def run_tool(args: list[str], what: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise StageError(f"{what} failed (exit {proc.returncode}): {' '.join(args)}\n"
                         f"{proc.stdout}{proc.stderr}")
    return proc.stdout


RESULT_TOOLS = ("results_table.py", "plot_results.py", "plot_roofline.py", "flashsteps_results.py")
HEADER = "<!-- generated by tools/book/stage_book.py from results/; do not edit -->\n"
# Steps from this one on are compared with the baselines (PyTorch SDPA) in their results table.
BASELINES_FROM = 4
# The sequence lengths a search-space figure shows (those of them that the tuning table
# holds; all of its lengths when it holds none of these).
SEARCH_SEQLENS = (1024, 4096, 16384)


def import_tools(repo: Path):
    """The repository's results modules (its tools/ and tools/book/, not this file's)."""
    for script in RESULT_TOOLS:
        if not (repo / "tools" / "results" / script).is_file():
            raise StageError(f"tools/results/{script} is missing: the book's results come from it")
    paths = [str(repo / "tools" / "results"), str(repo / "tools" / "book")]
    sys.path[:0] = paths
    try:
        return tuple(importlib.import_module(name) for name in
                     ("flashsteps_results", "plot_roofline", "ncu_traffic", "facts"))
    finally:
        del sys.path[:len(paths)]


def import_search_space(repo: Path):
    """The repository's tools/book/plot_search_space.py (the steps' tuning tables)."""
    path = str(repo / "tools" / "book")
    sys.path.insert(0, path)
    try:
        return importlib.import_module("plot_search_space")
    finally:
        sys.path.remove(path)


def load_tuning(repo: Path, steps: list[Step] | None = None) -> dict[str, list]:
    """Per step with a ``tuned/`` folder, the tuning tables checked in there (possibly
    none). A malformed table fails the build loudly, as a malformed result file does."""
    pss = import_search_space(repo)
    out = {}
    for step in find_steps(repo, steps):
        if step.tuned is not None:
            try:
                out[step.number] = pss.load_tables(step.tuned)
            except pss.TableError as exc:
                raise StageError(f"tuning table: {exc}") from None
    return out


def load_measured(repo: Path, results: Path):
    """(records, ceilings, ncu kernels, roofline points) under results/; all empty when
    results/ does not exist. A malformed result file fails the build loudly."""
    fr, pr, _, _ = import_tools(repo)
    if not results.is_dir():
        return [], [], [], []
    try:
        records = fr.load_results(results)
        ceilings = fr.load_ceilings(results)
        kernels = fr.load_ncu(results)
        points = pr.roofline_points(records, kernels)
    except (fr.ResultsError, ValueError) as exc:
        raise StageError(f"loading {results}: {exc}") from None
    return records, ceilings, kernels, points


def measured_facts(repo: Path, results: Path, steps: list[Step] | None = None) -> dict:
    """The values the chapters are rendered with (tools/book/facts.py)."""
    fr, _, _, facts = import_tools(repo)
    records, ceilings, _, points = load_measured(repo, results)
    try:  # a report that lacks what the facts read fails the build, naming the file
        profiles = facts.load_profiles(results)
        runs = fr.load_runs(results) if results.is_dir() else {}
        return facts.facts(records, ceilings, points, find_steps(repo, steps),
                           load_tuning(repo, steps), profiles, runs)
    except facts.ProfileError as exc:
        raise StageError(f"Nsight Compute report: {exc}") from None


def render_chapter(path: Path, values: dict, filters: dict | None = None) -> str:
    """A chapter rendered through Jinja with the measured values: ``{{ step03.fma }}`` and
    ``{% if %}``/``{% for %}`` blocks. An unknown name or a syntax error fails, naming the
    chapter and line."""
    import jinja2
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True,
                             autoescape=False)
    env.filters.update(filters or {})
    text = path.read_text(encoding="utf-8")
    try:
        return env.from_string(text).render(values)
    except jinja2.TemplateSyntaxError as exc:
        raise StageError(f"{path}:{exc.lineno}: {exc.message}") from None
    except jinja2.TemplateError as exc:
        line = next((f":{tb.tb_lineno}" for tb in _traceback_lines(exc)), "")
        raise StageError(f"{path}{line}: {exc}") from None


def _traceback_lines(exc: BaseException):
    """The template's frames of a Jinja error (their line numbers are the chapter's)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            yield tb
        tb = tb.tb_next


def generate_results(repo: Path, gen: Path, results: Path, keep: set[Path],
                     steps: list[Step] | None = None) -> None:
    tools = repo / "tools" / "results"
    fr, pr, traffic, facts = import_tools(repo)
    out = gen / "results"
    out.mkdir(parents=True, exist_ok=True)
    header = HEADER
    records, ceilings, kernels, points = load_measured(repo, results)

    with tempfile.TemporaryDirectory() as empty:
        src = str(results) if results.is_dir() else empty
        if not records:
            status = ("*Not measured yet:* `results/` holds no benchmark JSON, so every table "
                      "and figure below says \"not measured\". The chapter fills in by itself "
                      "when result files are committed and the book is rebuilt.\n")
        else:
            lines = ["Measured on:", ""]
            for vendor, gpu in fr.gpus_of(records):
                mine = [r for r in records if r.gpu == gpu]
                lines.append(f"- `results/{gpu}/` ({fr.VENDOR_LABELS[vendor]}): "
                             f"{fr.describe_gpu(mine)}")
            measured = {v for v, _ in fr.gpus_of(records)}
            for vendor in fr.VENDORS:
                if vendor not in measured:
                    lines.append(f"- {fr.VENDOR_LABELS[vendor]}: *not measured yet*")
            status = "\n".join(lines) + "\n"
        write_if_changed(out / "status.md", header + status)
        keep.add(out / "status.md")

        py = sys.executable
        for name, extra in (("table.md", []), ("table_n4096.md", ["--seqlen", "4096"])):
            table = run_tool([py, str(tools / "results_table.py"), src, *extra],
                             "tools/results/results_table.py")
            write_if_changed(out / name, header + table)
            keep.add(out / name)

        with tempfile.TemporaryDirectory() as tmp:
            run_tool([py, str(tools / "plot_results.py"), src, "-o", str(Path(tmp) / "tflops")],
                     "tools/results/plot_results.py")
            for ext in (".png", ".svg"):
                produced = Path(tmp) / f"tflops{ext}"
                if not produced.is_file():
                    raise StageError(f"tools/results/plot_results.py did not write {produced.name}")
                write_if_changed(out / f"tflops{ext}", produced.read_bytes())
                keep.add(out / f"tflops{ext}")
        caption = ("TFLOPS per step and sequence length, bf16, drawn by "
                   "`tools/results/plot_results.py` from `results/` when the book was built"
                   + ("" if records else " (nothing measured yet: every panel says so)") + ".")
        plot = (f"{header}```{{figure}} /{GENERATED}/results/tflops.svg\n"
                ":alt: TFLOPS of each FlashSteps step against sequence length, one row of "
                "panels per measured GPU, TFLOPS on a log axis\n:width: 100%\n\n"
                f"{caption}\n```\n")
        write_if_changed(out / "plot.md", plot)
        keep.add(out / "plot.md")

        write_if_changed(out / "ceilings.md", header + ceilings_markdown(ceilings))
        keep.add(out / "ceilings.md")

        # The roofline: figure and table of its points.
        with tempfile.TemporaryDirectory() as tmp:
            run_tool([py, str(tools / "plot_roofline.py"), src, "-o", str(Path(tmp) / "roofline"),
                      "--markdown", str(Path(tmp) / "roofline_table.md")],
                     "tools/results/plot_roofline.py")
            for name in ("roofline.png", "roofline.svg", "roofline_table.md"):
                produced = Path(tmp) / name
                if not produced.is_file():
                    raise StageError(f"tools/results/plot_roofline.py did not write {name}")
                data = produced.read_bytes()
                write_if_changed(out / name, (header.encode() + data) if name.endswith(".md")
                                 else data)
                keep.add(out / name)
        caption = ("Roofline of the steps on `" + pr.NCU_BENCHMARK + "`, drawn by "
                   "`tools/results/plot_roofline.py` when the book was built: ceilings from "
                   "`results/<gpu>/ceilings.json` and `gemm_ceiling.json`, DRAM bytes from "
                   "Nsight Compute (`results/<gpu>/ncu/`), TFLOPS from the benchmark JSON"
                   + ("" if points else " (nothing measured yet: the panels say so)") + ".")
        figure = (f"{header}```{{figure}} /{GENERATED}/results/roofline.svg\n"
                  ":alt: Roofline: TFLOP/s against FLOP per DRAM byte, with the copy "
                  "bandwidth, fp32 FMA and bf16 GEMM ceilings and one point per step\n"
                  f":width: 100%\n\n{caption}\n```\n")
        write_if_changed(out / "roofline.md", figure)
        keep.add(out / "roofline.md")

    profiled = sorted({k.step for k in kernels}, key=fr.step_sort_key)
    write_if_changed(out / "traffic.md", header + traffic.compare_table(records, kernels, profiled))
    keep.add(out / "traffic.md")

    values = measured_facts(repo, results, steps)
    write_if_changed(gen / "facts.json", json.dumps(values, indent=1, sort_keys=True) + "\n")
    keep.add(gen / "facts.json")


def split_wide_tables(markdown: str, group_re: str = r"^(.*?)\s*D=\d+ \w+$") -> str:
    """Every Markdown table whose columns after the first carry a group name before
    ``D=<d> <mask>`` (the step's own columns have none; a baseline's are "PyTorch SDPA flash
    D=64 full") becomes one table per group, each with the first column again, so that no
    table is wider than the page. The group's name goes in a line above its table; other
    tables (those where no column matches: the decode tables, a column per step or baseline)
    and text are kept as they are."""
    lines = markdown.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not (lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|--")):
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[i:j]]
        head = rows[0]
        groups: dict[str, list[int]] = {}
        matched = False
        for k, name in enumerate(head[1:], start=1):
            m = re.match(group_re, name)
            matched = matched or m is not None
            groups.setdefault(m[1] if m else name, []).append(k)
        if len(groups) < 2 or not matched:
            out += lines[i:j]
            i = j
            continue
        for g, (name, cols) in enumerate(groups.items()):
            if g:
                out += ["", f"*{name}* (TFLOPS; in brackets the step's share of it):", ""]
            keep = [0] + cols
            for r, row in enumerate(rows):
                cells = [row[k] if k < len(row) else "" for k in keep]
                if r == 0 and g:
                    cells = [cells[0]] + [c[len(name):].strip() for c in cells[1:]]
                out.append("| " + " | ".join(cells) + " |")
        i = j
    return "\n".join(out)


def with_run_baselines(results: Path, run: str, out: Path, step: str | None = None) -> Path:
    """A results tree at @p out that is @p results with, per GPU, the baseline (SDPA) files of
    the same-run set ``runs/<run>/`` in place of the published ones, where that set has them
    (links, nothing copied), and likewise the other steps' files (the step a table's speed-up
    divides by) but not step @p step's own: a step's results table then compares it with the
    SDPA and the previous step measured in its own session, as facts.sdpa_run() and
    facts.VERSUS do for the chapters' sentences."""
    def own(name: str) -> bool:  # the step's own files: stepNN.json, stepNN-decode.json, ...
        return bool(step) and (name.startswith(f"step{step}.") or name.startswith(f"step{step}-"))
    for gpu in (d for d in results.iterdir() if d.is_dir()):
        (out / gpu.name).mkdir(parents=True, exist_ok=True)
        same = results / gpu.name / "runs" / run
        for f in gpu.iterdir():
            if f.is_file():
                swap = same / f.name
                other_step = f.name.startswith("step") and f.name.endswith(".json") and not own(f.name)
                use = swap if (f.name.startswith("sdpa-") or other_step) and swap.is_file() else f
                (out / gpu.name / f.name).symlink_to(use.resolve())
    return out


def generate_step_results(repo: Path, gen: Path, results: Path, keep: set[Path],
                          steps: list[Step] | None = None) -> None:
    """Per step: its results table (TFLOPS per N, speed-up) and its traffic tables; the
    baseline columns and the previous step come from the step's same-run set
    (facts.sdpa_run()) where it has them."""
    fr, _, traffic, facts = import_tools(repo)
    records, _, kernels, _ = load_measured(repo, results)
    py = sys.executable
    steps = find_steps(repo, steps)
    numbers = [s.number for s in steps]
    runs = fr.load_runs(results) if results.is_dir() else {}
    with tempfile.TemporaryDirectory() as empty:
        src = str(results) if results.is_dir() else empty
        for step in steps:
            num = step.number
            out = gen / "steps" / step.name
            extra = ["--baselines"] if int(num[:2]) >= BASELINES_FROM else []
            tree = src
            run = facts.sdpa_run(records, runs, num)
            if extra and run:
                tree = str(with_run_baselines(results, run, Path(empty) / f"run-{num}", num))
            table = run_tool([py, str(repo / "tools" / "results" / "results_table.py"), tree, "--step", num,
                              *extra], "tools/results/results_table.py --step")
            pieces = {
                "results.md": split_wide_tables(table),
                "traffic.md": traffic.step_table(records, kernels, num),
                "traffic_compare.md": traffic.compare_table(
                    records, kernels, numbers[:numbers.index(num) + 1]),
            }
            for name, text in pieces.items():
                write_if_changed(out / name, HEADER + text)
                keep.add(out / name)


def generate_step_figures(repo: Path, gen: Path, keep: set[Path],
                          steps: list[Step] | None = None) -> None:
    """Per step folder with a ``book_figures.py``: its ``generate(repo, out, url)`` returns
    {file name: content} (figures drawn from the step's own code), written to the step's
    generated folder for its chapter to include."""
    for step in find_steps(repo, steps):
        script = repo / "steps" / step.name / "book_figures.py"
        if not script.is_file():
            continue
        spec = importlib.util.spec_from_file_location(f"book_figures_{step.number}", script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out = gen / "steps" / step.name
        try:
            files = module.generate(repo, out, f"/{GENERATED}/steps/{step.name}")
        except (subprocess.CalledProcessError, RuntimeError) as exc:
            raise StageError(f"{script.relative_to(repo)}: {exc}") from exc
        for name, content in files.items():
            write_if_changed(out / name, content)
            keep.add(out / name)


def generate_timelines(repo: Path, gen: Path, keep: set[Path], steps: list[Step] | None = None) -> None:
    """Per step with a timeline tool (its step.cmake calls flashsteps_add_trace_tool()): the
    figures and tables of its measured traces, results/<gpu>/timeline/stepNN_*.json, drawn by
    tools/timeline/book_timeline.py into ``timeline.md`` (or "not measured yet")."""
    traced = [step for step in find_steps(repo, steps)
              if "flashsteps_add_trace_tool()" in _read_if_file(step.folder / "step.cmake")]
    if not traced:
        return
    spec = importlib.util.spec_from_file_location("book_timeline", repo / "tools" / "timeline" / "book_timeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for step in traced:
        out = gen / "steps" / step.name
        for name, content in module.generate(repo, out, f"/{GENERATED}/steps/{step.name}", step.number).items():
            write_if_changed(out / name, content)
            keep.add(out / name)


def _read_if_file(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def generate_search_space(repo: Path, gen: Path, keep: set[Path],
                          steps: list[Step] | None = None) -> None:
    """Per step with a ``tuned/`` folder: for every tuning table in it, the figure of the
    search space and the table of its choices (``search_space.md``), or "not measured yet"."""
    pss = import_search_space(repo)
    tables_of = load_tuning(repo, steps)
    for step in find_steps(repo, steps):
        if step.number not in tables_of:
            continue
        out = gen / "steps" / step.name
        tuned = step.tuned.relative_to(repo).as_posix()
        parts = [f"<!-- generated by tools/book/stage_book.py from {tuned}/; do not edit -->"]
        for table in tables_of[step.number]:
            dtype = "bf16" if "bf16" in table.dtypes else (table.dtypes or ["bf16"])[0]
            present = {e.shape.seqlen for e in table.standard(dtype)}
            seqlens = [n for n in SEARCH_SEQLENS if n in present] or None
            stem = f"search_space_{table.path.stem}"
            with tempfile.TemporaryDirectory() as tmp:
                for produced in pss.plot(table, Path(tmp) / stem, dtype, seqlens):
                    write_if_changed(out / produced.name, produced.read_bytes())
                    keep.add(out / produced.name)
            shown = (f"N = {', '.join(str(n) for n in seqlens)}" if seqlens
                     else "every sequence length of the table")
            parts.append(
                f"```{{figure}} /{GENERATED}/steps/{step.name}/{stem}.svg\n"
                f":alt: Heatmaps: {dtype} TFLOPS of every configuration of step {step.number}'s "
                "search space (rows) per sequence length (columns), one per head dim and "
                "mask, coloured by the fraction of the fastest, the tuner's choice boxed\n"
                ":width: 100%\n\n"
                f"Step {step.number}'s search space on the "
                f"{', '.join(table.devices) or 'unnamed device'}: every configuration timed by "
                f"the tuner ({dtype}, {shown}), drawn by `tools/book/plot_search_space.py` from "
                f"`{tuned}/{table.path.name}` when the book was built. A row per configuration, a "
                "column per sequence length; the colour is the TFLOPS as a fraction of the "
                "fastest configuration at that length, and the red box is the tuner's "
                "choice.\n```")
            parts.append(pss.choices_markdown(table, dtype).rstrip("\n"))
        if not tables_of[step.number]:
            parts.append(f"*Not measured yet:* the figure of the search space is drawn here from "
                         f"`{tuned}/<gpu>.json` (written by the step's tuner with `--out`) "
                         "once such a table is committed and the book is rebuilt.")
        write_if_changed(out / "search_space.md", "\n\n".join(parts) + "\n")
        keep.add(out / "search_space.md")


def generate_limits(repo: Path, gen: Path, keep: set[Path]) -> None:
    """``limits.md``: each step's dtypes, head dims, alignment and GPUs, read from its
    StepInfo, dispatch.h and CMakeLists.txt (tools/book/step_limits.py)."""
    spec = importlib.util.spec_from_file_location("step_limits", repo / "tools" / "book" /
                                                  "step_limits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        text = module.markdown(module.limits(repo), module.architectures(repo))
    except (ValueError, KeyError) as exc:
        raise StageError(f"tools/book/step_limits.py: {exc}") from exc
    write_if_changed(gen / "limits.md", text)
    keep.add(gen / "limits.md")


def ceilings_markdown(ceilings) -> str:
    """The measured roofline ceilings, with how each was measured."""
    if not ceilings:
        return ("*Not measured yet:* no `results/<gpu>/ceilings.json` or "
                "`gemm_ceiling.json`.\n")
    lines = ["| GPU | Ceiling | Measured | How it was measured | File |",
             "|:--|:--|--:|:--|:--|"]
    for c in ceilings:
        how = c.method
        tool = ("`tools/ceilings/gemm_ceiling.py`" if c.kind == "bf16_gemm"
                else "`tools/ceilings/ceilings.cu`")
        x = c.extra
        notes = [str(x["gpu_arch"])] if "gpu_arch" in x else []
        notes += [f"{x['sm_count']} SMs/CUs"] if "sm_count" in x else []
        notes += [f"max clock {x['max_clock_mhz']} MHz"] if "max_clock_mhz" in x else []
        notes += [f"PyTorch {x['torch_version']}"] if "torch_version" in x else []
        how = f"{tool}: {how}" + (f" ({', '.join(notes)})" if notes else "")
        value = f"{c.value:,.1f} {c.unit}" if c.unit == "GB/s" else f"{c.value:g} {c.unit}"
        lines.append(f"| {c.gpu_name} | {c.label} | {value} | {how} | "
                     f"`results/{c.gpu}/{Path(c.source).name}` |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- API

def _text(elem) -> str:
    return " ".join("".join(elem.itertext()).split()) if elem is not None else ""


def generate_api(repo: Path, gen: Path, xml_dir: Path, html_dir: Path | None,
                 out: Path, keep: set[Path]) -> None:
    """The API page's table of sources, from Doxygen's XML (target `docs`), and a link to
    Doxygen's HTML, which is published inside the book under doxygen/."""
    import xml.etree.ElementTree as ET
    index = xml_dir / "index.xml"
    if not index.is_file():
        raise StageError(f"{index} is missing: build the `docs` target (Doxygen) first")
    rows = []
    for compound in ET.parse(index).getroot().iter("compound"):
        if compound.get("kind") != "file":
            continue
        root = ET.parse(xml_dir / f"{compound.get('refid')}.xml").getroot()
        cdef = root.find("compounddef")
        loc = cdef.find("location") if cdef is not None else None
        path = Path(loc.get("file")) if loc is not None and loc.get("file") else None
        if path is None:
            continue
        if not path.is_absolute():
            path = repo / path
        try:
            rel = path.resolve().relative_to(repo)
        except ValueError:
            continue
        rows.append((str(rel), _text(cdef.find("briefdescription")),
                     f"doxygen/{compound.get('refid')}.html"))
    if not rows:
        raise StageError(f"{xml_dir}: Doxygen documented no source file")
    rows.sort(key=lambda r: (not r[0].startswith("common/"), not r[0].startswith("reference/"), r[0]))
    lines = ["<!-- generated by tools/book/stage_book.py from Doxygen's XML; do not edit -->",
             "| Source | What it holds |", "|:--|:--|"]
    for rel, brief, page in rows:
        brief = brief.replace("|", "\\|") or "(no file comment)"
        has_page = html_dir is not None and (html_dir / Path(page).name).is_file()
        name = f'<a href="{page}"><code>{rel}</code></a>' if has_page else f"`{rel}`"
        lines.append(f"| {name} | {brief} |")
    write_if_changed(gen / "api" / "sources.md", "\n".join(lines) + "\n")
    keep.add(gen / "api" / "sources.md")
    # Doxygen's HTML goes into the site as doxygen/ (html_extra_path in conf.py).
    extra = out / "_extra"
    if html_dir is not None:
        if not (html_dir / "index.html").is_file():
            raise StageError(f"{html_dir}/index.html is missing: build the `docs` target first")
        extra.mkdir(exist_ok=True)
        link(extra / "doxygen", html_dir)
    elif extra.exists():
        remove_path(extra)


# ----------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="repository root")
    ap.add_argument("--out", type=Path, required=True, help="Sphinx source dir to lay out")
    ap.add_argument("--book", type=Path, help="chapters (default: REPO/book)")
    ap.add_argument("--doxygen-xml", type=Path, required=True, help="Doxygen's XML output")
    ap.add_argument("--doxygen-html", type=Path, help="Doxygen's HTML, published as doxygen/")
    ap.add_argument("--steps-json", type=Path,
                    help="the build's step registry (<build>/steps.json); when it is not given "
                         "or not there, every steps/NN_slug/step.cu, each based on the step "
                         "before it")
    args = ap.parse_args(argv)
    repo = args.repo.resolve()
    book = (args.book or repo / "book").resolve()
    out = args.out.resolve()
    results = repo / "results"
    try:
        steps = step_registry.discover(repo, args.steps_json)
        registered = args.steps_json is not None and args.steps_json.is_file()
        print(f"stage_book: {len(steps)} steps, from "
              + (str(args.steps_json) if registered else "the steps/NN_slug folders"))
        values = measured_facts(repo, results, steps)
        filters = import_tools(repo)[3].FILTERS
        stage_sources(repo, book, out, lambda path: render_chapter(path, values, filters))
        gen = out / GENERATED
        keep: set[Path] = set()
        generate_steps(repo, gen, results, keep, steps)
        generate_results(repo, gen, results, keep, steps)
        generate_step_results(repo, gen, results, keep, steps)
        generate_search_space(repo, gen, keep, steps)
        generate_step_figures(repo, gen, keep, steps)
        generate_timelines(repo, gen, keep, steps)
        generate_limits(repo, gen, keep)
        generate_api(repo, gen, args.doxygen_xml.resolve(),
                     args.doxygen_html.resolve() if args.doxygen_html else None, out, keep)
        prune(gen, keep)
    except (StageError, step_registry.RegistryError, OSError, UnicodeDecodeError) as exc:
        print(f"stage_book: error: {exc}", file=sys.stderr)
        return 1
    print(f"stage_book: {out} ({len(keep)} generated files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
