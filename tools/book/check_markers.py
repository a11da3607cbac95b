#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check that every piece of code a chapter includes is really there, and that none is pasted.

    python3 tools/book/check_markers.py --repo .                       # chapters in book/
    python3 tools/book/check_markers.py --repo . --generated build/book/src/_generated

Code enters the book only through MyST ``literalinclude`` directives that name a source
file and, for a part of it, the marker comments around that part::

    ```{literalinclude} /steps/01_naive/step.cu
    :language: cuda
    :start-after: "[start:s_kernel]"
    :end-before: "[end:s_kernel]"
    ```

with ``// [start:s_kernel]`` and ``// [end:s_kernel]`` lines in the source. A path that
starts with ``/`` is a repository path (``/_generated/...`` is the build tree's generated
folder); a relative path may not leave book/. This script fails (exit 1), naming chapter
and line, when

- an included file (``literalinclude``, ``include``, ``image``, ``figure``) does not exist;
- a ``:start-after:``/``:start-at:`` or ``:end-before:``/``:end-at:`` text is not in the
  file, is on more than one line, or the part between them is empty;
- a part of a step (``/steps/...``) is selected by anything but its markers (other files,
  e.g. the harness, may be cut at a unique line of text until they get markers);
- a marker ``[start:NAME]`` has no ``[end:NAME]`` after it in that file, or appears twice;
- a chapter pastes code: a fenced block or ``code-block`` in C, C++, CUDA, HIP, CMake,
  Python, JSON or diff (commands in ``console``/``shell``/``text`` blocks are fine);
- a ``:lines:`` option selects by line number (line numbers rot; use markers).

Generated files are only checked when --generated is given (run it after
tools/book/stage_book.py; the ``book`` target does).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

FENCE_RE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,}|:{3,})\s*(?P<rest>.*)$")
DIRECTIVE_RE = re.compile(r"^\{(?P<name>[A-Za-z][\w:-]*)\}\s*(?P<arg>.*)$")
OPTION_RE = re.compile(r"^\s*:(?P<key>[\w-]+):\s*(?P<value>.*)$")
MARKER_RE = re.compile(r"\[(start|end):([A-Za-z0-9_.-]+)\]")

INCLUDING = {"literalinclude", "include", "image", "figure"}
CODE_DIRECTIVES = {"code-block", "code", "sourcecode", "literalinclude"}
PASTED_LANGUAGES = {"c", "cpp", "c++", "cxx", "cc", "h", "hpp", "cu", "cuda", "hip",
                    "cmake", "python", "py", "python3", "json", "diff", "udiff", "patch"}
SOURCE_SUFFIXES = {".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".c", ".py", ".cmake",
                   ".txt", ".json"}


@dataclass
class Block:
    chapter: Path
    line: int
    directive: str | None
    arg: str
    lang: str
    options: dict[str, str] = field(default_factory=dict)


def unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def parse_blocks(chapter: Path) -> list[Block]:
    """Fenced blocks of a MyST file, with their directive, argument and options."""
    blocks: list[Block] = []
    lines = chapter.read_text(encoding="utf-8").splitlines()
    stack: list[tuple[str, bool]] = []  # (fence, raw?) of the open fences
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE_RE.match(line)
        if stack:
            fence, raw = stack[-1]
            if m and m["fence"][0] == fence[0] and len(m["fence"]) >= len(fence) \
                    and not m["rest"].strip():
                stack.pop()
                i += 1
                continue
            if raw or not m:
                i += 1
                continue
        if not m:
            i += 1
            continue
        rest = m["rest"].strip()
        d = DIRECTIVE_RE.match(rest)
        directive, arg, lang = (d["name"], d["arg"].strip(), "") if d else (None, "", rest)
        block = Block(chapter, i + 1, directive, arg, lang.split()[0].lower() if lang else "")
        j = i + 1
        if directive:
            if j < len(lines) and lines[j].strip() == "---":  # YAML options block
                j += 1
                while j < len(lines) and lines[j].strip() != "---":
                    key, _, value = lines[j].partition(":")
                    block.options[key.strip()] = unquote(value)
                    j += 1
                j += 1
            else:
                while j < len(lines):
                    om = OPTION_RE.match(lines[j])
                    if not om:
                        break
                    block.options[om["key"]] = unquote(om["value"])
                    j += 1
        blocks.append(block)
        raw = directive is None or directive in CODE_DIRECTIVES or directive in (
            "math", "raw", "csv-table", "doxygenfile", "doxygenfunction", "doxygenstruct",
            "doxygenclass", "doxygennamespace", "doxygenenum", "doxygendefine",
            "doxygentypedef", "doxygenvariable", "doxygenindex", "mermaid")
        stack.append((m["fence"], raw))
        i = j
    return blocks


class Checker:
    def __init__(self, repo: Path, book: Path, generated: Path | None):
        self.repo, self.book, self.generated = repo, book, generated
        self.errors: list[str] = []
        self.notes: list[str] = []
        self.includes = 0

    def error(self, block: Block, text: str) -> None:
        self.errors.append(f"{block.chapter}:{block.line}: {text}")

    def resolve(self, block: Block, target: str) -> Path | None:
        """The file a chapter names, or None when it is generated and not checked."""
        if target.startswith("/"):
            rel = target.lstrip("/")
            if rel == "_generated" or rel.startswith("_generated/"):
                if self.generated is None:
                    self.notes.append(f"{block.chapter}:{block.line}: {target} not checked "
                                      "(generated; pass --generated)")
                    return None
                return self.generated / rel[len("_generated/"):]
            return self.repo / rel
        path = (block.chapter.parent / target).resolve()
        try:
            path.relative_to(self.book)
        except ValueError:
            self.error(block, f"relative path {target!r} leaves book/: write the repository "
                              f"path instead, e.g. /{Path(target).name}")
            return None
        return path

    def check_block(self, block: Block) -> None:
        if block.directive is None:
            if block.lang in PASTED_LANGUAGES:
                self.error(block, f"pasted {block.lang} code: include it from the source "
                                  "with literalinclude and marker comments instead")
            return
        if block.directive in ("code-block", "code", "sourcecode"):
            lang = block.arg.split()[0].lower() if block.arg else ""
            if lang in PASTED_LANGUAGES:
                self.error(block, f"pasted {lang} code in {block.directive}: include it "
                                  "from the source with literalinclude instead")
            return
        if block.directive not in INCLUDING:
            return
        if not block.arg:
            self.error(block, f"{block.directive} without a file")
            return
        path = self.resolve(block, block.arg)
        if path is None:
            return
        self.includes += 1
        if not path.is_file():
            self.error(block, f"{block.directive}: no file {block.arg} ({path})")
            return
        if block.directive == "literalinclude":
            self.check_literalinclude(block, path)
        elif block.directive == "include":
            for key in ("start-after", "end-before", "start-line", "end-line"):
                if key in block.options:
                    self.check_region(block, path, block.options.get("start-after"),
                                      False, block.options.get("end-before"), False)
                    break

    def check_literalinclude(self, block: Block, path: Path) -> None:
        if "lines" in block.options:
            self.error(block, ":lines: selects by line number; put marker comments in "
                              f"{block.arg} and use :start-after:/:end-before:")
        start = block.options.get("start-after")
        start_incl = False
        if start is None and "start-at" in block.options:
            start, start_incl = block.options["start-at"], True
        end = block.options.get("end-before")
        end_incl = False
        if end is None and "end-at" in block.options:
            end, end_incl = block.options["end-at"], True
        if start is None and end is None:
            return
        if block.arg.startswith("/steps/") and (
                (start and not MARKER_RE.fullmatch(start)) or (end and not MARKER_RE.fullmatch(end))):
            self.error(block, f"parts of a step are included by marker only: use "
                              ":start-after: \"[start:NAME]\" and :end-before: \"[end:NAME]\"")
        self.check_region(block, path, start, start_incl, end, end_incl)

    def check_region(self, block: Block, path: Path, start: str | None, start_incl: bool,
                     end: str | None, end_incl: bool) -> None:
        lines = path.read_text(encoding="utf-8").splitlines()
        self.check_file_markers(block, path, lines)
        begin = 0
        if start:
            hits = [n for n, line in enumerate(lines) if start in line]
            if not hits:
                self.error(block, f"{block.arg} has no line containing {start!r}"
                           + self.marker_hint(start, lines))
                return
            if len(hits) > 1:
                self.error(block, f"{start!r} is on {len(hits)} lines of {block.arg} "
                                  f"(lines {', '.join(str(h + 1) for h in hits)}): ambiguous")
            begin = hits[0] if start_incl else hits[0] + 1
        stop = len(lines)
        if end:
            after = [n for n in range(begin, len(lines)) if end in lines[n]
                     and (end_incl or n > begin)]
            if not after:
                where = f"after {start!r}" if start else ""
                self.error(block, f"{block.arg} has no line containing {end!r} {where}".rstrip()
                           + self.marker_hint(end, lines))
                return
            stop = after[0] + 1 if end_incl else after[0]
        if not any(line.strip() for line in lines[begin:stop]):
            self.error(block, f"the part of {block.arg} between {start!r} and {end!r} is empty")

    @staticmethod
    def marker_hint(text: str, lines: list[str]) -> str:
        names = sorted({m[2] for line in lines for m in MARKER_RE.finditer(line)
                        if m[1] == "start"})
        if MARKER_RE.fullmatch(text):
            return f" (markers in the file: {', '.join(names) or 'none'})"
        return ""

    def check_file_markers(self, block: Block, path: Path, lines: list[str]) -> None:
        """Every [start:X] in the file has exactly one [end:X] after it."""
        starts: dict[str, list[int]] = {}
        ends: dict[str, list[int]] = {}
        for n, line in enumerate(lines):
            for m in MARKER_RE.finditer(line):
                (starts if m[1] == "start" else ends).setdefault(m[2], []).append(n)
        for name in sorted(set(starts) | set(ends)):
            s, e = starts.get(name, []), ends.get(name, [])
            if len(s) != 1 or len(e) != 1 or e[0] < s[0]:
                self.error(block, f"{block.arg}: marker {name!r} needs one [start:{name}] "
                                  f"line before one [end:{name}] line (found {len(s)} start, "
                                  f"{len(e)} end)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, required=True, help="repository root")
    ap.add_argument("--book", type=Path, help="chapters (default: REPO/book)")
    ap.add_argument("--generated", type=Path,
                    help="the staged _generated/ folder, to check generated includes too")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    repo = args.repo.resolve()
    book = (args.book or repo / "book").resolve()
    chapters = sorted(p for p in book.rglob("*.md") if "_generated" not in p.parts)
    if not chapters:
        print(f"check_markers: no chapters under {book}", file=sys.stderr)
        return 1
    checker = Checker(repo, book, args.generated.resolve() if args.generated else None)
    for chapter in chapters:
        for block in parse_blocks(chapter):
            checker.check_block(block)
    # Generated Markdown may include files too (e.g. the step diffs): check it as well.
    if checker.generated is not None and checker.generated.is_dir():
        for snippet in sorted(checker.generated.rglob("*.md")):
            for block in parse_blocks(snippet):
                if block.directive in INCLUDING:
                    checker.check_block(block)
    if args.verbose:
        for note in checker.notes:
            print(f"note: {note}")
    for err in checker.errors:
        print(f"error: {err}", file=sys.stderr)
    status = "FAILED" if checker.errors else "ok"
    print(f"check_markers: {len(chapters)} chapters, {checker.includes} includes checked, "
          f"{len(checker.errors)} errors: {status}")
    return 1 if checker.errors else 0


if __name__ == "__main__":
    sys.exit(main())
