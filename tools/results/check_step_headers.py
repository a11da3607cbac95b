#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Check the measured numbers in the step headers against the results JSON.

    python3 tools/results/check_step_headers.py results steps      # exit 1 on drift

The comment block at the top of ``steps/NN_slug/step.cu`` has a paragraph that starts with
``// Measured on`` and ends before ``// Limits:`` (or the next blank ``//`` line). Its
numbers are typed by hand, so this script reads them back and recomputes each from the JSON
under ``results/<gpu>/``. A number written with k decimals must equal the JSON value rounded
to k decimals (it may differ by at most half a unit of its last digit: "320" allows
319.5 to 320.5, "1.38x" allows 1.375 to 1.385). Every number of the paragraph must be one
the script knows how to check; anything else fails, so a number cannot slip in unchecked.

The phrases it reads (in this order; ``S`` a step number, ``X`` a number):

- ``Measured on an NVIDIA H200`` -- the GPU, by the ``gpu_name`` of its JSON;
- ``(bf16, D = 128, N = 4096[, B = 4, H = 16], non-causal|causal)`` -- the problem, one
  standard attention benchmark (B = 16384 / N, H = 2048 / D);
- ``over the 32 fp16 and bf16, D = 64 and 128, N = 2048-16384 problems`` -- a set of
  problems instead, both masks, every one measured by the step (32 is their count);
- ``X TFLOP/s`` -- the step's TFLOPS on the problem;
- ``X% of the [Y TFLOP/s] fp32 FMA ceiling`` -- TFLOPS / ceiling, and the ceiling itself;
- ``Xx step S['s Y]`` -- the step's TFLOPS over step S's on the problem (and step S's);
- ``Xx step S (geometric mean; A-B)`` -- on a set: geometric mean, lowest and highest ratio;
- ``Xx PyTorch SDPA's FlashAttention-2 backend`` -- over ``sdpa-flash`` on the problem;
  on a set ``A-Bx PyTorch SDPA's ... (geometric mean X)``;
- ``commit abc1234`` -- the step's JSON was measured at that commit (its ``git_commit``).

Paths (``results/nvidia-h200/step01.json``), step numbers and the GPU's name are not numbers
to check.

A step that has not been measured says so on a line of its own, ``// Not measured yet.``,
instead of the paragraph (steps 04a and 04b until their first run). That passes while no
results file holds the step, and fails once one does (the header must then give the numbers)
or when the header also has a 'Measured on' paragraph. Step numbers are two digits, maybe
followed by a letter (04a).

Anywhere in the header (the comment block before the first ``#include``), one more phrase is
read back, from the measured ceilings of the GPU the paragraph names:

- ``Xx the measured fp32 FMA rate`` -- the dense bf16 GEMM ceiling over the fp32 FMA ceiling
  (``gemm_ceiling.json`` / ``ceilings.json``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashsteps_results as fr  # noqa: E402

STEP = fr.STEP_ID_RE.pattern  # a step number: 04, 04a
STEP_DIR_RE = re.compile(rf"^({STEP})_[a-z0-9_]+$")
BASELINE = "sdpa-flash"
NUM = r"(\d+(?:\.\d+)?)"

GPU_RE = re.compile(r"Measured on an? (?P<gpu>(?:NVIDIA|AMD) [A-Za-z0-9 ]+?)(?=[ ,(]|$)")
PROBLEM_RE = re.compile(r"\((?P<dtype>fp16|bf16|fp32), D = (?P<d>\d+), N = (?P<n>\d+)"
                        r"(?:, B = (?P<b>\d+), H = (?P<h>\d+))?, (?P<mask>non-causal|causal)\)")
SET_RE = re.compile(r"over the (?P<count>\d+) (?P<dtypes>(?:fp16|bf16|fp32)(?: and (?:fp16|bf16|fp32))*),"
                    r" D = (?P<dims>\d+(?: and \d+)*), N = (?P<lo>\d+)-(?P<hi>\d+) problems")
FMA_RE = re.compile(NUM + r"% of the (?:" + NUM + r" TFLOP/s )?fp32 FMA ceiling")
TFLOPS_RE = re.compile(NUM + r" TFLOP/s")
SET_STEP_RE = re.compile(NUM + rf"x step ({STEP}) \(geometric mean; " + NUM + "-" + NUM + r"\)")
STEP_RE = re.compile(NUM + rf"x step ({STEP})(?:'s " + NUM + r")?")
SET_SDPA_RE = re.compile(NUM + "-" + NUM + r"x PyTorch SDPA's FlashAttention-2 backend "
                         r"\(geometric mean " + NUM + r"\)")
SDPA_RE = re.compile(NUM + r"x PyTorch SDPA's FlashAttention-2 backend")
COMMIT_RE = re.compile(r"commit (?P<c>[0-9a-f]{7,40})\b")
TC_FMA_RE = re.compile(NUM + r"x the measured fp32 FMA rate")
# Not numbers to check: paths, step numbers, product names, a head dim named in words.
IGNORED_RE = re.compile(rf"\S+/\S*|\bD = \d+\b|\bsteps? {STEP}\b|FlashAttention-2|\b(?:NVIDIA|AMD) \S+")
NOT_MEASURED = "// Not measured yet."


class HeaderError(ValueError):
    pass


@dataclass
class Check:
    step: str
    what: str
    written: str
    value: float | None     # None: not in the JSON

    def ok(self) -> bool:
        if self.value is None:
            return False
        if self.what.startswith("commit"):
            return True
        decimals = len(self.written.partition(".")[2])
        return abs(self.value - float(self.written)) <= 0.5 * 10 ** -decimals + 1e-9

    def line(self) -> str:
        got = ("not in the JSON" if self.value is None else "matches"
               if self.what.startswith("commit") else f"{self.value:.4g}")
        return f"{'ok  ' if self.ok() else 'FAIL'} step {self.step}: {self.what}: written {self.written}, JSON {got}"


def measured_paragraph(text: str) -> str | None:
    """The header's 'Measured on' paragraph, as one line of text (comment marks removed)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines[:80]) if line.startswith("// Measured on")), None)
    if start is None:
        return None
    out = []
    for line in lines[start:]:
        body = line[2:].strip() if line.startswith("//") else None
        if body is None or not body or (out and body.startswith("Limits:")):
            break
        out.append(body)
    return " ".join(out)


def header_text(text: str) -> str:
    """The comment block before the first #include, as one line (comment marks removed)."""
    out = []
    for line in text.splitlines():
        if line.startswith("#include"):
            break
        if line.startswith("//"):
            out.append(line[2:].strip())
    return " ".join(out)


def check_rates(step: str, header: str, para: str, records: list[fr.Record],
                ceilings: list[fr.Ceiling]) -> list[Check]:
    """The ceiling ratios written anywhere in the header, on the paragraph's GPU."""
    hits = list(TC_FMA_RE.finditer(header))
    if not hits:
        return []
    m = GPU_RE.search(para)
    gpus = {r.gpu for r in records if m and fr.gpu_title(
        r.vendor, str(r.context.get("gpu_name", ""))) == m["gpu"].strip()}
    gpu = gpus.pop() if len(gpus) == 1 else None
    by_kind = {c.kind: c.value for c in ceilings if c.gpu == gpu}
    ratio = (by_kind["bf16_gemm"] / by_kind["fp32_fma"]
             if "bf16_gemm" in by_kind and "fp32_fma" in by_kind else None)
    return [Check(step, "bf16 GEMM ceiling over the fp32 FMA ceiling", h[1], ratio) for h in hits]


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def check_step(step: str, para: str, records: list[fr.Record], ceilings: list[fr.Ceiling]
               ) -> list[Check]:
    m = GPU_RE.search(para)
    if not m:
        raise HeaderError(f"step {step}: 'Measured on' names no GPU ('Measured on an NVIDIA H200')")
    gpus = {r.gpu for r in records
            if fr.gpu_title(r.vendor, str(r.context.get("gpu_name", ""))) == m["gpu"].strip()}
    if len(gpus) != 1:
        raise HeaderError(f"step {step}: no results/<gpu>/ folder holds the {m['gpu']}")
    gpu = gpus.pop()
    used = [m.span()]

    def rec(s: str, name: str) -> fr.Record | None:
        return next((r for r in records if r.gpu == gpu and r.step == s and r.name == name
                     and not r.skipped), None)

    def find(regex):
        for hit in regex.finditer(para):
            if not any(a < hit.end() and hit.start() < b for a, b in used):
                used.append(hit.span())
                yield hit

    checks: list[Check] = []
    problem = next(find(PROBLEM_RE), None)
    pset = next(find(SET_RE), None)
    if problem is None and pset is None:
        raise HeaderError(f"step {step}: the 'Measured on' paragraph names no problem "
                          "('(bf16, D = 128, N = 4096, non-causal)' or 'over the ... problems')")
    mine = None
    names: list[str] = []
    if problem is not None:
        mask = "full" if problem["mask"] == "non-causal" else "causal"
        d, n = int(problem["d"]), int(problem["n"])
        name = f"attention/{problem['dtype']}/hd{d}/n{n}/{mask}"
        if problem["b"]:
            checks.append(Check(step, "B of the standard problem", problem["b"], 16384 / n))
            checks.append(Check(step, "H of the standard problem", problem["h"], 2048 / d))
        mine = rec(step, name)
        if mine is None:
            raise HeaderError(f"step {step}: results/{gpu}/step{step}.json has no {name}")
    if pset is not None:
        dtypes = pset["dtypes"].split(" and ")
        dims = [int(x) for x in pset["dims"].split(" and ")]
        lo, hi = int(pset["lo"]), int(pset["hi"])
        names = sorted(r.name for r in records if r.gpu == gpu and r.step == step
                       and r.kind == "attention" and not r.skipped and r.dtype in dtypes
                       and r.head_dim in dims and lo <= (r.seqlen or 0) <= hi)
        checks.append(Check(step, "problems in the set", pset["count"], len(names)))

    def on_set(other: str) -> list[float]:
        out = []
        for name in names:
            a, b = rec(step, name), rec(other, name)
            if a is not None and b is not None:
                out.append(a.tflops / b.tflops)
        return out

    for hit in find(SET_STEP_RE):
        ratios = on_set(hit[2])
        what = f"over step {hit[2]} on the set"
        checks += [Check(step, what + ", geometric mean", hit[1], geomean(ratios) if ratios else None),
                   Check(step, what + ", lowest", hit[3], min(ratios, default=None)),
                   Check(step, what + ", highest", hit[4], max(ratios, default=None))]
    for hit in find(SET_SDPA_RE):
        ratios = on_set(BASELINE)
        what = f"over {BASELINE} on the set"
        checks += [Check(step, what + ", lowest", hit[1], min(ratios, default=None)),
                   Check(step, what + ", highest", hit[2], max(ratios, default=None)),
                   Check(step, what + ", geometric mean", hit[3], geomean(ratios) if ratios else None)]
    fma = {c.gpu: c.value for c in ceilings if c.kind == "fp32_fma"}
    for hit in find(FMA_RE):
        if mine is None:
            raise HeaderError(f"step {step}: '{hit[0]}' needs one problem")
        c = fma.get(gpu)
        checks.append(Check(step, "% of the fp32 FMA ceiling", hit[1],
                            100 * mine.tflops / c if c else None))
        if hit[2]:
            checks.append(Check(step, "fp32 FMA ceiling, TFLOP/s", hit[2], c))
    for hit in find(TFLOPS_RE):
        if mine is None:
            raise HeaderError(f"step {step}: '{hit[0]}' needs one problem")
        checks.append(Check(step, f"{mine.name}, TFLOP/s", hit[1], mine.tflops))
    for hit in find(STEP_RE):
        if mine is None:
            raise HeaderError(f"step {step}: '{hit[0]}' needs one problem")
        other = rec(hit[2], mine.name)
        checks.append(Check(step, f"over step {hit[2]} on {mine.name}", hit[1],
                            mine.tflops / other.tflops if other else None))
        if hit[3]:
            checks.append(Check(step, f"step {hit[2]} on {mine.name}, TFLOP/s", hit[3],
                                other.tflops if other else None))
    for hit in find(SDPA_RE):
        if mine is None:
            raise HeaderError(f"step {step}: '{hit[0]}' needs one problem")
        other = rec(BASELINE, mine.name)
        checks.append(Check(step, f"over {BASELINE} on {mine.name}", hit[1],
                            mine.tflops / other.tflops if other else None))
    for hit in find(COMMIT_RE):
        commits = {str(r.context.get("git_commit", "")) for r in records
                   if r.gpu == gpu and r.step == step}
        found = any(c.startswith(hit["c"]) for c in commits)
        checks.append(Check(step, f"commit of results/{gpu}/step{step}.json "
                            f"({', '.join(sorted(commits)) or 'none'})", hit["c"], 1.0 if found else None))
    rest = list(para)
    for a, b in used:
        rest[a:b] = " " * (b - a)
    leftover = IGNORED_RE.sub(" ", "".join(rest))
    stray = re.findall(r"\d+(?:\.\d+)?", leftover)
    if stray:
        raise HeaderError(f"step {step}: numbers this check cannot read back from the JSON: "
                          f"{', '.join(stray)} (in: {para!r}); write them with a phrase listed "
                          "in tools/results/check_step_headers.py, or leave them to the chapter")
    return checks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="the results folder (results/)")
    ap.add_argument("steps", type=Path, help="the steps folder (steps/)")
    args = ap.parse_args(argv)
    try:
        records = fr.load_results(args.results)
        ceilings = fr.load_ceilings(args.results)
    except (fr.ResultsError, ValueError) as exc:
        print(f"check_step_headers: {exc}", file=sys.stderr)
        return 2
    failed, checked = 0, 0
    for folder in sorted(args.steps.iterdir()):
        m = STEP_DIR_RE.match(folder.name)
        source = folder / "step.cu"
        if not m or not source.is_file():
            continue
        text = source.read_text(encoding="utf-8")
        para = measured_paragraph(text)
        not_measured = any(line.strip() == NOT_MEASURED for line in text.splitlines()[:80])
        if not_measured:
            measured_gpus = sorted({r.gpu for r in records if r.step == m[1]})
            if para is not None or measured_gpus:
                why = ("it also has a 'Measured on' paragraph" if para is not None
                       else "results hold it: " + ", ".join(f"results/{g}/step{m[1]}.json" for g in measured_gpus)
                       + " (give its numbers in a 'Measured on' paragraph)")
                print(f"FAIL {source}: its header says '{NOT_MEASURED[3:]}', but {why}")
                failed += 1
            else:
                print(f"ok   step {m[1]}: not measured yet (its header says so, and no results hold it)")
            continue
        if para is None:
            continue
        try:
            checks = check_step(m[1], para, records, ceilings)
            checks += check_rates(m[1], header_text(text), para, records, ceilings)
        except HeaderError as exc:
            print(f"FAIL {source}: {exc}")
            failed += 1
            continue
        for c in checks:
            print(c.line())
            checked += 1
            failed += not c.ok()
    print(f"step headers: {checked} numbers checked against {args.results}, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
