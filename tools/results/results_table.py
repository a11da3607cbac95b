#!/usr/bin/env python3
"""Markdown table of FlashSteps TFLOPS from the results JSON.

    python3 tools/results/results_table.py results                      # print it (N = 8192)
    python3 tools/results/results_table.py results --update README.md   # rewrite in place
    python3 tools/results/results_table.py results --check README.md    # exit 1 if stale
    python3 tools/results/results_table.py results --step 03            # one step, every N
    python3 tools/results/results_table.py results --step 03 --baselines   # ... next to SDPA


For each GPU (NVIDIA first, then AMD; an unmeasured vendor gets one line saying
so) the rows are the steps, then the baselines (result files whose
``flashsteps_step`` is not a number, such as PyTorch SDPA's from
tools/baselines/sdpa_bench.py: ``sdpa-flash``, ``sdpa-cudnn``, ``sdpa-efficient``, each
labelled by its ``flashsteps_step_name``); the columns are TFLOPS at one
sequence length for each (head_dim, mask), followed by one column per fixture
benchmark (e.g. ``minilm/fp16/layers6``).  A skipped benchmark shows "—" with
a numbered note giving its reason; a benchmark absent from the results shows
"n/a".  ``--update``/``--check`` act on the text between the lines
``<!-- results-table:begin -->`` and ``<!-- results-table:end -->``.

The decode set (``bench_stepNN --set decode``, ``sdpa_bench.py --set decode``: Nq = 1 against a
K/V cache, and chunked prefill) gets a second table per GPU that has any of it, below the first:
one row per problem of one (dtype, D, Hkv) (``--decode-dtype``, ``--decode-head-dim``,
``--decode-heads-kv``; bf16, 128, 8 by default), one column per step and baseline that measured
it, each cell the effective bandwidth in TB/s (the bytes of Q, K, V, O and LSE over the time)
and, in brackets, the time per call. A split sweep's entries (``.../splits:<N>``) are left out.

With ``--step NN`` the table is one step's instead: a row per sequence length, a column per
(head_dim, mask), each cell the step's TFLOPS and its speed-up over the previous measured
step (``--versus`` picks another, measured in the dtype wherever the step is), then the fixture
benchmarks. NN is a step of steps/ (3 is 03, as in ``make step3``) or of the results (a baseline); a
step not measured yet gets a "not measured" table, any other NN is an error.  ``--baselines`` adds, for
each baseline measured on that GPU, a column per (head_dim, mask) with the baseline's
TFLOPS and, in brackets, the step's TFLOPS as a share of it. A step with decode-set results
also gets one decode table per (head_dim, Hkv) it measured in the dtype: the step's TB/s and
time per call, the previous step's TB/s with the step's speed-up over it, and (``--baselines``)
each baseline's TB/s with the step's share of it.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashsteps_results as fr  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book"))
import step_registry  # noqa: E402  (what a step folder is: one definition, the book's)

BEGIN = "<!-- results-table:begin -->"
END = "<!-- results-table:end -->"
# The sequence length of the full table: the README's (its Results section says "at N = 8192",
# the longest size every step runs).
DEFAULT_SEQLEN = 8192
# The project's steps are its folders steps/NN_slug/ (step.cu inside), as the book reads them.
STEPS_DIR = Path(__file__).resolve().parents[2] / "steps"


def project_steps(steps_dir: Path = STEPS_DIR) -> set[str] | None:
    """The step ids of the project's step folders (01, 04a, ...); None without the folder
    (the tool copied elsewhere), where any well-formed id is taken."""
    if not steps_dir.is_dir():
        return None
    return {step.number for step in step_registry.from_folders(steps_dir.parent)}


def normalise_step(step: str) -> str:
    """A step id as the folders spell it: "3" (the make target's step3) is "03", "4a" "04a"."""
    return f"0{step}" if re.fullmatch(r"\d[a-z]?", step) else step


def _cell(rec: fr.Record | None, notes: list[str]) -> str:
    if rec is None:
        return "n/a"
    if rec.skipped:
        reason = rec.error.replace("|", "\\|").replace("\n", " ")
        if reason not in notes:
            notes.append(reason)
        return f"— [{notes.index(reason) + 1}]"
    return fr.fmt_tflops(rec.tflops)


# ----------------------------------------------------------------------------- decode set

def decode_records(records: list[fr.Record], dtype: str, head_dim: int,
                   heads_kv: int) -> list[fr.Record]:
    """The decode-set records of one (dtype, D, Hkv), split sweeps' forced counts left out."""
    return [r for r in records if r.kind == "decode" and r.splits is None and r.dtype == dtype
            and r.head_dim == head_dim and fr.decode_sizes(r.name)["heads_kv"] == heads_kv]


def decode_label(name: str) -> str:
    """A decode problem's row label: "B=8, Nk=65536", or for chunked prefill
    "B=1, Nq=128, Nk=8192, causal"."""
    z = fr.decode_sizes(name)
    mask = fr.parse_name(name)["mask"]
    parts = [f"B={z['batch']}"] + ([f"Nq={z['seqlen_q']}"] if z["seqlen_q"] != 1 else [])
    parts.append(f"Nk={z['seqlen_k']}")
    return ", ".join(parts + (["causal"] if mask == "causal" else []))


def fmt_tbps(rec: fr.Record) -> str:
    """Effective TB/s with about three significant digits."""
    tbps = rec.counters.get("GBps", 0.0) / 1e3
    return f"{tbps:.2f}" if tbps < 10 else f"{tbps:.1f}"


def _decode_cell(rec: fr.Record | None, notes: list[str], time: bool = True) -> str:
    """TB/s and, with ``time``, the time per call in brackets; "—" for a skipped entry."""
    if rec is None or rec.skipped:
        return _cell(rec, notes)
    if "GBps" not in rec.counters:
        return "?"
    us = rec.counters.get("us_per_call")
    if not time or us is None:
        return fmt_tbps(rec)
    return f"{fmt_tbps(rec)} ({us:.0f} µs)" if us >= 100 else f"{fmt_tbps(rec)} ({us:.1f} µs)"


def decode_table(records: list[fr.Record], dtype: str, head_dim: int, heads_kv: int,
                 notes: list[str]) -> list[str]:
    """Lines of one GPU's decode table (every step and baseline with decode results of this
    dtype, D and Hkv as a column, one row per problem); [] when there are none."""
    recs = decode_records(records, dtype, head_dim, heads_kv)
    if not recs:
        return []
    by_key = {(r.step, r.name): r for r in recs}
    names = sorted({r.name for r in recs}, key=fr.name_sort_key)
    heads_q = fr.decode_sizes(names[0])["heads_q"]

    def label(s: str, n: str) -> str:
        return f"*{fr.step_label(s, n)}*" if fr.is_baseline(s) else fr.step_label(s, n)

    # A column in which every problem was skipped (e.g. a backend without GQA) is one line
    # under the table instead of a column of dashes.
    who, empty = [], []
    for s, n in fr.steps_of(recs):
        mine = [by_key[(s, name)] for name in names if (s, name) in by_key]
        if mine and all(r.skipped for r in mine):
            first = mine[0].error.replace("\n", " ").split(". ")[0].rstrip(".")
            empty.append(f"{label(s, n)}: no number, every problem skipped ({first}).")
        else:
            who.append((s, n))
    lines = [f"Decode set, {dtype}, D = {head_dim}, Hq = {heads_q}, Hkv = {heads_kv}: effective TB/s "
             "(bytes of Q, K, V, O and LSE over the time per call) and, in brackets, the time per "
             "call (median of repetitions)", "",
             "| Problem | " + " | ".join(label(s, n) for s, n in who) + " |", "|:--|" + "--:|" * len(who)]
    for name in names:
        cells = [_decode_cell(by_key.get((s, name)), notes) for s, _ in who]
        lines.append(f"| {decode_label(name)} | " + " | ".join(cells) + " |")
    if empty:
        lines += [""] + [f"{e}  " for e in empty]
    return lines


def gpu_table(records: list[fr.Record], dtype: str, head_dims: list[int],
              masks: list[str], seqlen: int, decode: tuple[str, int, int] | None = None) -> str:
    """Markdown for one GPU's records; ``decode`` = (dtype, D, Hkv) of its decode table."""
    first = records[0]
    by_key = {(r.step, r.name): r for r in records}
    columns = [(f"attention/{dtype}/hd{d}/n{seqlen}/{m}", f"{dtype} D={d} {m}")
               for d in head_dims for m in masks]
    fixtures = sorted({r.name for r in records if r.kind not in ("attention", "decode")})
    columns += [(name, name) for name in fixtures]

    notes: list[str] = []
    title = f"**{fr.gpu_title(first.vendor, first.context['gpu_name'])}** (`{first.gpu}`)"
    standard = fr.steps_of([r for r in records if r.kind != "decode"])
    lines = []
    if standard:  # a GPU with decode results only gets the decode table alone
        lines = [f"{title}, TFLOPS at N = {seqlen} (median of repetitions)", "",
                 "| Step | " + " | ".join(label for _, label in columns) + " |",
                 "|:--|" + "--:|" * len(columns)]
    for step, step_name in standard:
        cells = [_cell(by_key.get((step, name)), notes) for name, _ in columns]
        label = fr.step_label(step, step_name)
        if fr.is_baseline(step):
            label = f"*{label}* (baseline)"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if decode is not None and any(r.kind == "decode" for r in records):
        table = decode_table(records, *decode, notes)
        lines += ([""] if lines else [title, ""]) + (
            table or [f"Decode set: no {decode[0]} results at D = {decode[1]}, Hkv = {decode[2]}."])
    lines += ["", f"<sub>{fr.describe_gpu(records)}</sub>"]
    if notes:
        lines += [""] + [f"[{i}] skipped: {n}  " for i, n in enumerate(notes, 1)]
        lines[-1] = lines[-1].rstrip()
    return "\n".join(lines)


def make_table(records: list[fr.Record], dtype: str = "bf16", head_dims=(64, 128),
               masks=("full", "causal"), seqlen: int = DEFAULT_SEQLEN,
               decode: tuple[str, int, int] = ("bf16", 128, 8)) -> str:
    """The whole Markdown block (all GPUs), ending with a newline; ``decode`` is the
    (dtype, D, Hkv) of the decode table of a GPU with decode-set results."""
    parts = ["<!-- generated by tools/results/results_table.py from the results JSON; "
             "do not edit by hand -->"]
    for vendor in fr.VENDORS:
        gpus = [g for v, g in fr.gpus_of(records) if v == vendor]
        if not gpus:
            parts.append(f"**{fr.VENDOR_LABELS[vendor]}**: not measured.")
        for gpu in gpus:
            parts.append(gpu_table([r for r in records if r.gpu == gpu], dtype,
                                   list(head_dims), list(masks), seqlen, tuple(decode)))
    if any(" n/a |" in p for p in parts):
        parts.append("n/a = not in the results.")
    return "\n\n".join(parts) + "\n"


def previous_step(records: list[fr.Record], step: str) -> str | None:
    """The last step before ``step`` in reading order (03, 04a, 04b, 04) that has results, or
    None."""
    if fr.is_baseline(step):
        return None
    lower = [s for s, _ in fr.steps_of(records)
             if not fr.is_baseline(s) and fr.step_sort_key(s) < fr.step_sort_key(step)]
    return lower[-1] if lower else None


def _speedup_cell(rec: fr.Record | None, ref: fr.Record | None, notes: list[str]) -> str:
    cell = _cell(rec, notes)
    if rec is None or rec.skipped or ref is None:
        return cell
    if ref.skipped:
        return f"{cell} (×—)"
    if ref.tflops <= 0:
        return cell
    ratio = rec.tflops / ref.tflops
    return f"{cell} (×{ratio:.1f})" if ratio >= 10 else f"{cell} (×{ratio:.2f})"


def _share_cell(base: fr.Record | None, rec: fr.Record | None, notes: list[str]) -> str:
    """A baseline's TFLOPS and, in brackets, ``rec``'s TFLOPS as a percentage of it."""
    cell = _cell(base, notes)
    if base is None or base.skipped or rec is None or rec.skipped or base.tflops <= 0:
        return cell
    return f"{cell} ({100.0 * rec.tflops / base.tflops:.0f}%)"


def baselines_of(records: list[fr.Record], dtype: str) -> list[tuple[str, str]]:
    """(step, step_name) of the baselines with attention results in ``dtype``."""
    return [(s, n) for s, n in fr.steps_of(records) if fr.is_baseline(s)
            and any(r.step == s and r.kind == "attention" and r.dtype == dtype
                    for r in records)]


def _decode_ratio_cell(other: fr.Record | None, rec: fr.Record | None, notes: list[str],
                       share: bool) -> str:
    """Another step's or a baseline's TB/s and, in brackets, ``rec``'s speed-up over it
    (``share`` False: "×1.7") or its share of it (``share`` True: "85%")."""
    cell = _decode_cell(other, notes, time=False)
    if other is None or other.skipped or rec is None or rec.skipped:
        return cell
    theirs, mine = other.counters.get("GBps", 0.0), rec.counters.get("GBps", 0.0)
    if theirs <= 0 or mine <= 0:
        return cell
    if share:
        return f"{cell} ({100.0 * mine / theirs:.0f}%)"
    ratio = mine / theirs
    return f"{cell} (×{ratio:.1f})" if ratio >= 10 else f"{cell} (×{ratio:.2f})"


def step_decode_tables(records: list[fr.Record], step: str, versus: str | None, dtype: str,
                       bases: list[tuple[str, str]], notes: list[str]) -> list[str]:
    """Lines of one step's decode tables on one GPU, one per (D, Hkv) it measured in
    ``dtype`` (D = 128 first): the step's TB/s and time per call, then ``versus``'s TB/s
    with the step's speed-up, then each baseline's TB/s with the step's share."""
    mine = [r for r in records if r.step == step and r.kind == "decode" and r.splits is None
            and r.dtype == dtype]
    shapes = sorted({(r.head_dim, fr.decode_sizes(r.name)["heads_kv"]) for r in mine},
                    key=lambda dh: (-dh[0], dh[1]))
    label = fr.step_label(step, mine[0].step_name) if mine else step
    lines: list[str] = []
    for head_dim, heads_kv in shapes:
        recs = decode_records(records, dtype, head_dim, heads_kv)
        by_key = {(r.step, r.name): r for r in recs}
        names = sorted({r.name for r in recs if r.step == step}, key=fr.name_sort_key)
        others = [(versus, False)] if versus and any(r.step == versus for r in recs) else []
        others += [(b, True) for b, _ in bases if any(r.step == b for r in recs)]
        names_of = {s: n for s, n in fr.steps_of(records)}
        heads = [f"{label} TB/s (time)"]
        heads += [f"{fr.step_label(o, names_of[o])} TB/s" for o, _ in others]
        heads_q = fr.decode_sizes(names[0])["heads_q"]
        lines += ["", f"Decode set, {dtype}, D = {head_dim}, Hq = {heads_q}, Hkv = {heads_kv}: "
                      "effective TB/s (bytes of Q, K, V, O and LSE over the time per call)", "",
                  "| Problem | " + " | ".join(heads) + " |", "|:--|" + "--:|" * len(heads)]
        for name in names:
            rec = by_key.get((step, name))
            cells = [_decode_cell(rec, notes)]
            cells += [_decode_ratio_cell(by_key.get((o, name)), rec, notes, is_base)
                      for o, is_base in others]
            lines.append(f"| {decode_label(name)} | " + " | ".join(cells) + " |")
    return lines


def step_gpu_table(records: list[fr.Record], step: str, versus: str | None, dtype: str,
                   head_dims: list[int], masks: list[str], baselines: bool = False) -> str:
    """One GPU: the step's TFLOPS per sequence length, with the speed-up over ``versus``;
    with ``baselines``, one column per baseline and (head_dim, mask) after them."""
    mine = {r.name: r for r in records if r.step == step}
    ref = {r.name: r for r in records if r.step == versus} if versus else {}
    first = next(iter(mine.values()))
    label = fr.step_label(step, first.step_name)
    bases = [b for b in baselines_of(records, dtype) if b[0] != step] if baselines else []
    by_base = {b: {r.name: r for r in records if r.step == b} for b, _ in bases}
    seqlens = sorted({r.seqlen for r in mine.values() if r.kind == "attention"
                      and r.dtype == dtype}
                     | {r.seqlen for b in by_base.values() for r in b.values()
                        if r.kind == "attention" and r.dtype == dtype})
    notes: list[str] = []
    vs = ""
    if versus:
        vlabel = fr.step_label(versus, next(r.step_name for r in records if r.step == versus))
        noun = "" if fr.is_baseline(versus) else "step "
        vs = f"; in brackets the speed-up over {noun}{vlabel} on the same benchmark"
    lines = [f"**{fr.gpu_title(first.vendor, first.context['gpu_name'])}** "
             f"(`{first.gpu}`), step {label}, {dtype} TFLOPS (median of repetitions){vs}", ""]
    columns = [(d, m) for d in head_dims for m in masks]
    if seqlens:
        heads = [f"D={d} {m}" for d, m in columns]
        heads += [f"{name} D={d} {m}" for _, name in bases for d, m in columns]
        lines += ["| N | " + " | ".join(heads) + " |", "|--:|" + "--:|" * len(heads)]
        for n in seqlens:
            names = [f"attention/{dtype}/hd{d}/n{n}/{m}" for d, m in columns]
            cells = [_speedup_cell(mine.get(x), ref.get(x), notes) for x in names]
            cells += [_share_cell(by_base[b].get(x), mine.get(x), notes)
                      for b, _ in bases for x in names]
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
    elif not any(r.kind == "decode" and r.dtype == dtype for r in mine.values()):
        lines.append(f"No {dtype} attention benchmarks.")
    decode_bases = [(s, n) for s, n in fr.steps_of(records) if fr.is_baseline(s) and s != step
                    and any(r.step == s and r.kind == "decode" for r in records)] if baselines else []
    decode_lines = step_decode_tables(records, step, versus, dtype, decode_bases, notes)
    lines += decode_lines if seqlens else decode_lines[1:]  # each table starts with a blank line
    fixtures = sorted(x for x, r in mine.items() if r.kind not in ("attention", "decode"))
    if fixtures:
        lines += ["", "| Fixture | TFLOPS |", "|:--|--:|"]
        lines += [f"| `{x}` | {_speedup_cell(mine[x], ref.get(x), notes)} |" for x in fixtures]
    lines += ["", f"<sub>{fr.describe_gpu(list(mine.values()))}</sub>"]
    if notes:
        lines += [""] + [f"[{i}] skipped: {n}  " for i, n in enumerate(notes, 1)]
        lines[-1] = lines[-1].rstrip()
    if any(" n/a" in line for line in lines):
        lines += ["", "n/a = not in the results."]
    if any("(×—)" in line for line in lines):
        lines += ["", f"×— = step {versus} skipped this benchmark: no speed-up to give."]
    if bases:
        lines += ["", f"Baseline columns: the baseline's TFLOPS; in brackets step {label}'s "
                      "TFLOPS as a share of it."]
    if decode_lines:
        lines += ["", f"Decode tables: step {label}'s TB/s and time per call; then the other "
                      f"columns' TB/s with, in brackets, step {label}'s speed-up over a step or its "
                      "share of a baseline."]
    shown = {b for b, _ in bases} | {b for b, _ in decode_bases if decode_lines}
    for b, name in fr.steps_of([r for r in records if r.step in shown]):
        lines += ["", f"<sub>{name}: {fr.describe_gpu([r for r in records if r.step == b])}</sub>"]
    return "\n".join(lines)


def make_step_table(records: list[fr.Record], step: str, versus: str | None = None,
                    dtype: str = "bf16", head_dims=(64, 128), masks=("full", "causal"),
                    baselines: bool = False) -> str:
    """The per-step block (every GPU that measured the step), ending with a newline.
    ``versus`` None: the previous measured step, per GPU. ``baselines``: add the
    baselines' columns (where a GPU has any)."""
    parts = ["<!-- generated by tools/results/results_table.py from the results JSON; "
             "do not edit by hand -->"]
    for vendor in fr.VENDORS:
        gpus = [g for v, g in fr.gpus_of(records) if v == vendor
                and any(r.gpu == g and r.step == step for r in records)]
        if not gpus:
            parts.append(f"**{fr.VENDOR_LABELS[vendor]}**: step {step} not measured.")
        for gpu in gpus:
            mine = [r for r in records if r.gpu == gpu]
            ref = versus if versus is not None else previous_step(mine, step)
            if ref is not None and not any(r.step == ref for r in mine):
                ref = None
            parts.append(step_gpu_table(mine, step, ref, dtype, list(head_dims), list(masks),
                                        baselines))
    return "\n\n".join(parts) + "\n"


def splice(text: str, table: str, where: str = "file") -> str:
    """Replace the lines between the BEGIN and END marker lines with ``table``."""
    lines = text.splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise ValueError(f"{where}: needs exactly one line '{BEGIN}' followed later by "
                         f"exactly one line '{END}'")
    b, e = begins[0], ends[0]
    return "".join(lines[:b + 1]) + table + "".join(lines[e:])


def step_arg_error(records: list[fr.Record], step: str, versus: str | None,
                   steps_dir: Path = STEPS_DIR, dtype: str = "bf16") -> str | None:
    """What is wrong with ``--step``/``--versus`` (argparse's wording), or None.

    A step is an id of the project's step folders or one in the results (a baseline such as
    sdpa-cudnn, a synthetic tree's step); without the folders any well-formed id (04a) is. A
    project step that nothing measured yet is fine: its table says "not measured" (the book
    stages one per step folder before any results exist). ``versus`` must be another step,
    measured in ``dtype`` on every GPU that measured ``step`` in it (and on some GPU), in a
    kind of benchmark the table compares (attention, decode) that ``step`` has there, or its
    speed-ups would be missing."""
    known = project_steps(steps_dir)
    valid = {s for s, _ in fr.steps_of(records)} | (known or set())

    def is_step(s: str) -> bool:
        return s in valid or (known is None and bool(fr.STEP_ID_RE.fullmatch(s)))

    listed = " ".join(sorted(valid, key=fr.step_sort_key))
    for flag, value in (("--step", step), ("--versus", versus)):
        if value is not None and not is_step(value):
            return f"argument {flag}: {value!r} is not a step (steps: {listed})"
    if versus is None:
        return None
    if versus == step:
        return f"argument --versus: {versus!r} is --step itself: no speed-up to show"

    def compared(s: str) -> dict[str, set[str]]:
        """GPU -> the kinds of s's benchmarks in dtype that the step table compares."""
        kinds: dict[str, set[str]] = {}
        for r in records:
            if r.step == s and r.dtype == dtype and r.kind in ("attention", "decode"):
                kinds.setdefault(r.gpu, set()).add(r.kind)
        return kinds

    mine, theirs = compared(step), compared(versus)
    lacking = [g for _, g in fr.gpus_of(records) if mine.get(g) and not mine[g] & theirs.get(g, set())]
    if lacking:
        kinds = "/".join(sorted(set().union(*(mine[g] for g in lacking))))
        return (f"argument --versus: step {versus} is not measured on {', '.join(lacking)}, "
                f"where step {step} is: no {dtype} {kinds} speed-up to show")
    if records and not theirs:
        return f"argument --versus: step {versus} is not measured in {dtype}: no speed-up to show"
    return None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not a positive sequence length")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", type=Path)
    ap.add_argument("--dtype", default="bf16", choices=["fp16", "bf16", "fp32"])
    ap.add_argument("--head-dim", type=int, nargs="+", help="default: 64 128")
    ap.add_argument("--mask", nargs="+", default=["full", "causal"], choices=["full", "causal"])
    ap.add_argument("--seqlen", type=_positive_int,
                    help=f"N of the full table (default: {DEFAULT_SEQLEN}, the README's; "
                         "not with --step, whose table shows every N)")
    ap.add_argument("--decode-dtype", default="bf16", choices=["fp16", "bf16", "fp32"],
                    help="dtype of the decode table (default bf16)")
    ap.add_argument("--decode-head-dim", type=int, default=128, help="D of the decode table (default 128)")
    ap.add_argument("--decode-heads-kv", type=int, default=8,
                    help="Hkv of the decode table (default 8: GQA with Hq = 32)")
    ap.add_argument("--step", type=normalise_step,
                    help="one step's table: TFLOPS per N and speed-up (e.g. 03; 3 is 03)")
    ap.add_argument("--versus", type=normalise_step,
                    help="with --step: compare with this other step, which must be measured "
                         "in --dtype on every GPU that measured --step (default: the previous "
                         "measured one)")
    ap.add_argument("--baselines", action="store_true",
                    help="with --step: add a column per baseline (e.g. PyTorch SDPA) and "
                         "(head_dim, mask) where the GPU has any")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--update", type=Path, metavar="FILE", help="rewrite FILE's table")
    mode.add_argument("--check", type=Path, metavar="FILE", help="exit 1 if FILE's table is stale")
    args = ap.parse_args(argv)
    if args.step is not None and args.seqlen is not None:
        ap.error("argument --seqlen: the --step table shows every N; leave --seqlen out "
                 "(it picks the N of the full table)")
    try:
        records = fr.load_results(args.results_dir)
    except fr.ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # A value asked for that the results do not hold would give a table of n/a: name it instead.
    # (Not the defaults: a GPU may lack a column, which its table shows as n/a.)
    measured = [r for r in records if r.kind == "attention" and r.dtype == args.dtype]
    asked = (("--head-dim", args.head_dim or [], {r.head_dim for r in measured}),
             ("--seqlen", [] if args.seqlen is None else [args.seqlen], {r.seqlen for r in measured}))
    args.head_dim = args.head_dim or [64, 128]
    args.seqlen = DEFAULT_SEQLEN if args.seqlen is None else args.seqlen
    for flag, wanted, have in asked:
        missing = [v for v in wanted if v not in have]
        if measured and missing:  # with nothing measured, the table says so
            print(f"error: {flag} {' '.join(map(str, missing))}: not measured in {args.dtype} "
                  f"(measured: {' '.join(map(str, sorted(have)))})", file=sys.stderr)
            return 2
    if args.versus is not None and args.step is None:
        ap.error("argument --versus: goes with --step")
    if args.step is not None:
        if args.update or args.check:
            print("error: --step prints only (no --update/--check)", file=sys.stderr)
            return 2
        problem = step_arg_error(records, args.step, args.versus, dtype=args.dtype)
        if problem:
            ap.error(problem)
        sys.stdout.write(make_step_table(records, args.step, args.versus, args.dtype,
                                         args.head_dim, args.mask, args.baselines))
        return 0
    if args.baselines:
        print("error: --baselines goes with --step (the full table lists baselines as rows)",
              file=sys.stderr)
        return 2
    table = make_table(records, args.dtype, args.head_dim, args.mask, args.seqlen,
                       (args.decode_dtype, args.decode_head_dim, args.decode_heads_kv))
    target = args.update or args.check
    if target is None:
        sys.stdout.write(table)
        return 0
    try:
        old = target.read_text(encoding="utf-8")
        new = splice(old, table, str(target))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.update:
        if new != old:
            target.write_text(new, encoding="utf-8")
        print(f"{target}: {'updated' if new != old else 'already up to date'}")
        return 0
    if new == old:
        print(f"{target}: results table is up to date")
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True),
                                               new.splitlines(keepends=True),
                                               f"{target} (current)", f"{target} (regenerated)"))
    print(f"{target}: results table is stale; rerun with --update instead of --check",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
