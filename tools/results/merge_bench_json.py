#!/usr/bin/env python3
"""Merge benchmark files of one step, made by several runs of one session, into one file.

A session on a GPU host (tools/gpu/decode_session.sh) runs ``bench_stepNN --set decode`` once
per subset of the decode set (one --benchmark_filter and one --results-dir each), so that every
run writes its Google Benchmark JSON before a time limit can cut it; this tool puts the parts
back together as the one file the results tools read (``results/<gpu>/step10-decode.json``).
It merges any files in Google Benchmark's layout (``bench_stepNN``, a split sweep's parts,
``tools/baselines/sdpa_bench.py``'s per-backend files) whose ``context`` says they measured the
same thing:

- refused, with nothing written, when the parts differ in any key of :data:`SAME` (the commit,
  the GPU and its host, driver and runtime, the step, the set, a forced split count, an SDPA
  backend...), when a part has no commit (or ``unknown``), or when one benchmark is in two parts;
- the merged ``context`` is the first part's, plus ``flashsteps_merged_parts``: per part its
  file name, its number of benchmarks and every context key whose value differs from the
  first part's (its ``date``, the clocks at its start, the load average...), so no part's
  metadata is lost;
- the benchmarks follow in the order of the parts; each part's ``family_index`` is shifted past
  the previous parts' (Google Benchmark numbers the families of one run from 0), so the merged
  file reads like one run.

A part that cannot be read (a run cut by its time limit leaves a truncated file, or none) is an
error, or, with ``--skip-unreadable``, a warning and is left out; the merge then needs at least
one readable part. The output is written through a temporary file and loaded back with
flashsteps_results.load_file before it replaces OUT.

    python3 tools/results/merge_bench_json.py -o results/nvidia-h200/step10-decode.json \\
        parts/*/nvidia-h200/step10-decode.json

Standard library only (it runs on the GPU hosts).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import flashsteps_results as fr  # noqa: E402

# Context keys whose values must be the same in every part (absent counts as a value).
SAME = ("git_commit", "gpu_vendor", "gpu_name", "gpu_arch", "sm_count", "host_name",
        "driver_version", "runtime_driver_version", "runtime_version", "torch_version",
        "flashsteps_step", "flashsteps_step_name", "flashsteps_baseline", "flashsteps_bench_set",
        "flashsteps_num_splits", "flashsteps_split_sweep", "flashsteps_decode_check",
        "sdpa_backend", "sdpa_layout", "sdpa_warmup", "sdpa_reps", "sdpa_repetitions",
        "sdpa_warmup_time_s", "sdpa_min_time_s", "sdpa_timing", "sdpa_inputs", "library_build_type")
MERGED_KEY = "flashsteps_merged_parts"


class MergeError(ValueError):
    """The parts cannot be merged; the message says which part and why."""


class Unreadable(MergeError):
    """A part is missing or is not whole JSON (what a run cut by its time limit leaves)."""


def read_part(path: Path) -> dict[str, Any]:
    """One part, checked as the results tools check a file (context keys, benchmark list)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Unreadable(f"{path}: cannot read JSON ({exc})") from None
    try:
        fr._check_context(path, data)  # noqa: SLF001 - the loader's own check of a file
    except fr.ResultsError as exc:
        raise MergeError(str(exc)) from None
    if MERGED_KEY in data["context"]:
        raise MergeError(f"{path}: already a merged file (context has {MERGED_KEY})")
    return data


def merge(parts: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The merged document of ``parts`` ([(label, document)], in order); MergeError when they
    must not be merged."""
    if not parts:
        raise MergeError("nothing to merge")
    labels = [label for label, _ in parts]
    if len(set(labels)) != len(labels):
        raise MergeError(f"a part is given twice: {', '.join(sorted({x for x in labels if labels.count(x) > 1}))}")
    first_label, first = parts[0]
    ctx0 = first["context"]
    for label, doc in parts:
        commit = doc["context"].get("git_commit")
        if not isinstance(commit, str) or not commit.strip() or commit == "unknown":
            raise MergeError(f"{label}: no git_commit in its context: cannot tell which commit it measured")
    for label, doc in parts[1:]:
        ctx = doc["context"]
        differ = [k for k in SAME if ctx.get(k) != ctx0.get(k)]
        if differ:
            what = "; ".join(f"{k}: {ctx0.get(k)!r} in {first_label}, {ctx.get(k)!r} in {label}" for k in differ)
            raise MergeError(f"{label} and {first_label} measured different things ({what})")
    benchmarks: list[dict] = []
    seen: dict[str, str] = {}
    records = []
    offset = 0
    for label, doc in parts:
        names = set()
        families = [e["family_index"] for e in doc["benchmarks"]
                    if isinstance(e, dict) and isinstance(e.get("family_index"), int)]
        for entry in doc["benchmarks"]:
            if not isinstance(entry, dict):
                raise MergeError(f"{label}: a benchmark entry is not an object")
            name = fr.base_name(entry)
            if seen.get(name, label) != label:
                raise MergeError(f"{label}: benchmark {name!r} is also in {seen[name]} (which one counts?)")
            seen[name] = label
            names.add(name)
            entry = dict(entry)
            if isinstance(entry.get("family_index"), int):
                entry["family_index"] += offset
            benchmarks.append(entry)
        offset += max(families) + 1 if families else 0
        ctx = doc["context"]
        record: dict[str, Any] = {"file": label, "benchmarks": len(names)}
        changed = {k: v for k, v in ctx.items() if k not in ctx0 or ctx0[k] != v}
        gone = sorted(k for k in ctx0 if k not in ctx)
        if changed:
            record["context"] = changed
        if gone:
            record["context_without"] = gone
        records.append(record)
    context = dict(ctx0)
    context[MERGED_KEY] = records
    return {"context": context, "benchmarks": benchmarks}


def write_checked(path: Path, doc: dict[str, Any]) -> None:
    """Writes ``doc`` through a temporary file and loads it back before it replaces ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    try:
        fr.load_file(tmp, gpu=fr.slugify(doc["context"]["gpu_name"]))
    except fr.ResultsError as exc:
        tmp.unlink()
        raise MergeError(f"the merged file does not load: {exc}") from None
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("parts", nargs="+", type=Path, help="the parts, in the order to keep")
    ap.add_argument("-o", "--out", type=Path, required=True, help="the merged file")
    ap.add_argument("--skip-unreadable", action="store_true",
                    help="leave out (with a warning) a part that is missing or not whole JSON, "
                         "as a run cut by its time limit leaves it")
    args = ap.parse_args(argv)
    parts = []
    for path in args.parts:
        if path.resolve() == args.out.resolve():
            print(f"error: {path} is the output", file=sys.stderr)
            return 2
        try:
            parts.append((str(path), read_part(path)))
        except Unreadable as exc:
            if not args.skip_unreadable:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            print(f"warning: left out: {exc}", file=sys.stderr)
        except MergeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    try:
        doc = merge(parts)
        write_checked(args.out, doc)
    except MergeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    n = len({fr.base_name(e) for e in doc["benchmarks"]})
    print(f"merged: {args.out} ({n} benchmarks from {len(parts)} of {len(args.parts)} parts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
