# SPDX-License-Identifier: Apache-2.0
"""Sentences with measured numbers, for the book's prose (MyST substitutions).

stage_book.py writes :func:`facts` to ``_generated/facts.json``; conf.py hands it to MyST
as ``myst_substitutions``, and a chapter writes ``{{ step03_fma }}`` where the sentence
goes. Every value is a complete sentence (or several) that reads correctly whatever was
measured: with nothing under results/ it says "not measured yet". A chapter that names a
key not generated here fails the build (MyST warns, and warnings are errors).

Keys, for every step NN of the repository:

- ``stepNN_headline`` -- TFLOPS on the headline problem (``plot_roofline.NCU_BENCHMARK``)
  and the speed-up over the previous step, per GPU;
- ``stepNN_speedups`` -- the range of speed-ups over the previous step across the bf16
  attention benchmarks both ran;
- ``stepNN_fma`` -- the headline TFLOPS as a fraction of the measured fp32 FMA ceiling;
- ``stepNN_fma_target`` -- whether that fraction meets the course's target
  (:data:`FMA_TARGET`);
- ``stepNN_causal`` -- causal against non-causal TFLOPS at D = 128 and the longest
  sequence both ran, and what that means for the time of a call;
- ``stepNN_roofline`` -- DRAM bytes (Nsight Compute), FLOP per byte and what the copy
  bandwidth would allow at that intensity;
- ``stepNN_gemm`` -- the headline TFLOPS as a fraction of the measured dense bf16 GEMM
  ceiling (the ceiling of the tensor-core steps);
- ``stepNN_sdpa`` -- the step against PyTorch SDPA's flash backend (the baseline
  :data:`SDPA_BASELINE`, written by tools/sdpa_bench.py): the ratio on the headline problem,
  and its range and geometric mean over the bf16 attention benchmarks both ran;
- ``stepNN_sdpa_target`` (the steps of :data:`SDPA_TARGETS`) -- whether that geometric mean
  meets the course's target;

and, for the whole book or one step:

- ``roofline_ridges`` -- where the bandwidth line meets the compute ceilings;
- ``ceilings_tc_vs_fma`` -- the measured bf16 GEMM ceiling against the fp32 FMA ceiling;
- ``step05_causal_target`` (when step 05 exists) -- step 05's causal TFLOPS against step
  04's at N = :data:`CAUSAL_TARGET` seqlen, D = 64 and 128, and the course's target;
- ``step06_tuning`` (when step 06 exists) -- what the tuning tables checked in under
  ``steps/06_autotuned/tuned/`` hold (tools/book/plot_search_space.py reads them).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOOLS))
import flashsteps_results as fr  # noqa: E402
import plot_roofline as pr  # noqa: E402

HEADLINE = pr.NCU_BENCHMARK
# The course's goal for its last CUDA-core step (03): this fraction of the fp32 FMA ceiling.
FMA_TARGET = 0.25
# The reference the tensor-core steps are held against: PyTorch SDPA's flash backend
# (FlashAttention-2), as tools/sdpa_bench.py records it, and the course's goal per step: the
# geometric mean over the bf16 attention benchmarks of (step TFLOPS / SDPA TFLOPS).
SDPA_BASELINE = "sdpa-flash"
SDPA_LABEL = "PyTorch SDPA's flash backend (FlashAttention-2)"
SDPA_TARGETS = {"04": 0.8, "06": 1.0}
# Step 05's goal: causal attention at this N, bf16, D = 64 and 128, at least this many times
# as fast as step 04 (skipping the hidden KV tiles can give at most about 2).
CAUSAL_TARGET = {"step": "05", "versus": "04", "seqlen": 8192, "head_dims": (64, 128),
                 "speedup": 1.8}
TUNED_DIR = "steps/06_autotuned/tuned"


def _join(clauses: list[str]) -> str:
    """'On A, x; on B, y.' from ['on A, x', 'on B, y']."""
    text = "; ".join(clauses)
    return text[:1].upper() + text[1:] + "."


def _gpus(records: list[fr.Record]) -> list[tuple[str, str, str]]:
    """(vendor, gpu, "the NVIDIA H200") in display order."""
    out = []
    for vendor, gpu in fr.gpus_of(records):
        name = next(r.context["gpu_name"] for r in records if r.gpu == gpu)
        out.append((vendor, gpu, "the " + fr.gpu_title(vendor, name)))
    return out


def _rec(records, gpu, step, name):
    return next((r for r in records if r.gpu == gpu and r.step == step and r.name == name
                 and not r.skipped), None)


def _previous(records: list[fr.Record], gpu: str, step: str) -> str | None:
    lower = sorted({r.step for r in records if r.gpu == gpu and not fr.is_baseline(r.step)
                    and int(r.step) < int(step)}, key=int)
    return lower[-1] if lower else None


def _not_measured(step: str, what: str = HEADLINE) -> str:
    return (f"Step {step} is not measured yet: no `results/<gpu>/step{step}.json` holds "
            f"`{what}`.")


def headline(records: list[fr.Record], step: str) -> str:
    clauses = []
    for _, gpu, title in _gpus(records):
        rec = _rec(records, gpu, step, HEADLINE)
        if rec is None:
            continue
        text = f"on {title}, step {step} runs `{HEADLINE}` at {fr.fmt_tflops(rec.tflops)} TFLOPS"
        prev = _previous(records, gpu, step)
        ref = _rec(records, gpu, prev, HEADLINE) if prev else None
        if ref is not None:
            ratio = rec.tflops / ref.tflops
            text += (f", {ratio:.1f}" if ratio >= 10 else f", {ratio:.2f}")
            text += (f" times as fast as step {prev} "
                     f"({fr.fmt_tflops(ref.tflops)} TFLOPS)")
        clauses.append(text)
    return _join(clauses) if clauses else _not_measured(step)


def speedups(records: list[fr.Record], step: str, dtype: str = "bf16") -> str:
    clauses = []
    for _, gpu, title in _gpus(records):
        prev = _previous(records, gpu, step)
        if prev is None:
            continue
        ratios = []
        for rec in records:
            if rec.gpu == gpu and rec.step == step and rec.kind == "attention" \
                    and rec.dtype == dtype and not rec.skipped:
                ref = _rec(records, gpu, prev, rec.name)
                if ref is not None:
                    ratios.append(rec.tflops / ref.tflops)
        if ratios:
            clauses.append(f"across the {len(ratios)} {dtype} attention benchmarks that steps "
                           f"{prev} and {step} both ran on {title}, the speed-up of step "
                           f"{step} ranges from {pr.fmt_sig(min(ratios))} to "
                           f"{pr.fmt_sig(max(ratios))}")
    if clauses:
        return _join(clauses)
    return (f"There is no measured speed-up of step {step} over a previous step yet: "
            "both need results on the same GPU.")


def fma(records: list[fr.Record], ceilings: list[fr.Ceiling], step: str) -> str:
    ceil = {c.gpu: c for c in ceilings if c.kind == "fp32_fma"}
    clauses = []
    for _, gpu, title in _gpus(records):
        rec = _rec(records, gpu, step, HEADLINE)
        if rec is None:
            continue
        c = ceil.get(gpu)
        if c is None:
            clauses.append(f"on {title}, step {step} runs `{HEADLINE}` at "
                           f"{fr.fmt_tflops(rec.tflops)} TFLOPS; the fp32 FMA ceiling of that "
                           "GPU is not measured yet (`ceilings.json`)")
        else:
            clauses.append(f"on {title}, step {step} runs `{HEADLINE}` at "
                           f"{fr.fmt_tflops(rec.tflops)} TFLOPS: "
                           f"{pr.fmt_pct(rec.tflops / c.value)} of the fp32 FMA ceiling measured "
                           f"on the same GPU ({c.value:g} TFLOP/s)")
    return _join(clauses) if clauses else _not_measured(step)


def fma_target(records: list[fr.Record], ceilings: list[fr.Ceiling], step: str,
               target: float = FMA_TARGET) -> str:
    """Whether the headline TFLOPS reach ``target`` of the fp32 FMA ceiling, per GPU."""
    ceil = {c.gpu: c for c in ceilings if c.kind == "fp32_fma"}
    clauses = []
    for _, gpu, title in _gpus(records):
        rec = _rec(records, gpu, step, HEADLINE)
        if rec is None or gpu not in ceil:
            continue
        frac = rec.tflops / ceil[gpu].value
        verdict = "meets" if frac >= target else "falls short of"
        clauses.append(f"on {title} step {step} {verdict} the course's target of at least "
                       f"{100 * target:.0f} % of the fp32 FMA ceiling "
                       f"({100 * frac:.1f} %)")
    if clauses:
        return _join(clauses)
    return (f"Whether step {step} meets the course's target of {100 * target:.0f} % of the "
            "fp32 FMA ceiling is not measured yet.")


def causal(records: list[fr.Record], step: str, dtype: str = "bf16", head_dim: int = 128) -> str:
    clauses = []
    for _, gpu, title in _gpus(records):
        both = []
        for rec in records:
            if rec.gpu == gpu and rec.step == step and rec.kind == "attention" \
                    and rec.dtype == dtype and rec.head_dim == head_dim \
                    and rec.mask == "full" and not rec.skipped:
                c = _rec(records, gpu, step, rec.name.replace("/full", "/causal"))
                if c is not None:
                    both.append((rec.seqlen, rec, c))
        if not both:
            continue
        n, full, cz = max(both, key=lambda x: x[0])
        # TFLOPS = FLOPs / time, and causal FLOPs are (N + 1) / 2N of the full ones.
        time_ratio = (n + 1) / (2 * n) * full.tflops / cz.tflops
        clauses.append(f"on {title} at N = {n}, D = {head_dim} ({dtype}), step {step} runs "
                       f"causal attention at {fr.fmt_tflops(cz.tflops)} TFLOPS against "
                       f"{fr.fmt_tflops(full.tflops)} without the mask, a ratio of "
                       f"{cz.tflops / full.tflops:.2f}: the causal call takes "
                       f"{time_ratio:.2f} times as long as the full one")
    if clauses:
        return _join(clauses)
    return (f"Step {step} is not measured yet with both masks at {dtype}, D = {head_dim} "
            f"(`results/<gpu>/step{step}.json`).")


def roofline(points: list[pr.Point], ceilings: list[fr.Ceiling], step: str) -> str:
    bw = {c.gpu: c for c in ceilings if c.kind == "bandwidth"}
    clauses = []
    for p in (q for q in points if q.step == step):
        title = "the " + fr.gpu_title(p.vendor, next(
            (c.gpu_name for c in ceilings if c.gpu == p.gpu), p.gpu))
        text = (f"on {title}, step {step} moves {pr.fmt_bytes(p.dram_bytes)} through "
                f"DRAM (Nsight Compute, read + written) for the "
                f"{pr.fmt_sig(p.problem.flops / 1e12)} TFLOP of `{p.problem.name}`: "
                f"{pr.fmt_sig(p.intensity)} FLOP per byte")
        if p.gpu in bw:
            text += (f", at which the copy bandwidth alone would allow "
                     f"{pr.fmt_sig(p.bandwidth_bound(bw[p.gpu]))} TFLOP/s")
        clauses.append(text)
    if clauses:
        return _join(clauses)
    return (f"Step {step}'s DRAM traffic is not measured yet "
            f"(`results/<gpu>/ncu/step{step}.csv`).")


def ridges(ceilings: list[fr.Ceiling]) -> str:
    by_gpu: dict[str, dict[str, fr.Ceiling]] = pr.ceilings_by_gpu(ceilings)
    clauses = []
    for gpu, c in by_gpu.items():
        if "bandwidth" not in c:
            continue
        bw = c["bandwidth"]
        meets = [f"the {pr.CEILING_SHORT[k]} ({pr.fmt_sig(c[k].value, 4)} TFLOP/s) at "
                 f"{pr.fmt_sig(c[k].value * 1000 / bw.value)} FLOP per byte"
                 for k in ("fp32_fma", "bf16_gemm") if k in c]
        if meets:
            clauses.append(f"on the {fr.gpu_title(_vendor(gpu), bw.gpu_name)} the copy "
                           f"bandwidth ({bw.value:,.0f} GB/s) meets " + " and ".join(meets))
    return _join(clauses) if clauses else "No ceilings are measured yet."


def gemm(records: list[fr.Record], ceilings: list[fr.Ceiling], step: str) -> str:
    """The headline TFLOPS as a fraction of the measured dense bf16 GEMM ceiling."""
    ceil = {c.gpu: c for c in ceilings if c.kind == "bf16_gemm"}
    clauses = []
    for _, gpu, title in _gpus(records):
        rec = _rec(records, gpu, step, HEADLINE)
        if rec is None:
            continue
        text = f"on {title}, step {step} runs `{HEADLINE}` at {fr.fmt_tflops(rec.tflops)} TFLOPS"
        c = ceil.get(gpu)
        if c is None:
            text += "; the dense bf16 GEMM ceiling of that GPU is not measured yet"
        else:
            text += (f": {pr.fmt_pct(rec.tflops / c.value)} of the dense bf16 GEMM rate "
                     f"measured on the same GPU ({c.value:g} TFLOP/s)")
        clauses.append(text)
    return _join(clauses) if clauses else _not_measured(step)


def ceiling_ratio(ceilings: list[fr.Ceiling]) -> str:
    """How many times the fp32 FMA rate the tensor cores deliver, from the measured ceilings."""
    clauses = []
    for gpu, c in pr.ceilings_by_gpu(ceilings).items():
        if "fp32_fma" in c and "bf16_gemm" in c:
            fma_c, tc = c["fp32_fma"], c["bf16_gemm"]
            clauses.append(f"on the {fr.gpu_title(_vendor(gpu), tc.gpu_name)} the measured dense "
                           f"bf16 GEMM rate ({tc.value:g} TFLOP/s) is "
                           f"{pr.fmt_sig(tc.value / fma_c.value)} times the measured fp32 FMA "
                           f"rate ({fma_c.value:g} TFLOP/s)")
    return _join(clauses) if clauses else ("The tensor-core and fp32 FMA ceilings are not "
                                           "measured yet on the same GPU.")


def _sdpa_ratios(records: list[fr.Record], gpu: str, step: str, dtype: str = "bf16"):
    """[(step / SDPA TFLOPS, name)] over the attention benchmarks both ran on ``gpu``."""
    out = []
    for rec in records:
        if rec.gpu == gpu and rec.step == step and rec.kind == "attention" \
                and rec.dtype == dtype and not rec.skipped:
            base = _rec(records, gpu, SDPA_BASELINE, rec.name)
            if base is not None and base.tflops > 0:
                out.append((rec.tflops / base.tflops, rec.name))
    return sorted(out)


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _sdpa_name(records: list[fr.Record]) -> str:
    return next((r.step_name for r in records if r.step == SDPA_BASELINE), "PyTorch SDPA flash")


def _sdpa_missing(step: str) -> str:
    return (f"it needs `results/<gpu>/step{step}.json` and the baseline's "
            f"`results/<gpu>/{SDPA_BASELINE}.json` (tools/sdpa_bench.py) from the same GPU")


def sdpa(records: list[fr.Record], step: str, dtype: str = "bf16") -> str:
    """The step against PyTorch SDPA's flash backend, per GPU."""
    name = _sdpa_name(records)
    clauses = []
    for _, gpu, title in _gpus(records):
        ratios = _sdpa_ratios(records, gpu, step, dtype)
        if not ratios:
            continue
        mine, base = _rec(records, gpu, step, HEADLINE), _rec(records, gpu, SDPA_BASELINE, HEADLINE)
        text = f"on {title}"
        if mine is not None and base is not None:
            text += (f", step {step} runs `{HEADLINE}` at {fr.fmt_tflops(mine.tflops)} TFLOPS, "
                     f"{mine.tflops / base.tflops:.2f} times {name} "
                     f"({fr.fmt_tflops(base.tflops)} TFLOPS); across")
        else:
            text += ", across"
        values = [r for r, _ in ratios]
        text += (f" the {len(ratios)} {dtype} attention benchmarks that both ran, step {step}'s "
                 f"TFLOPS are from {values[0]:.2f} to {values[-1]:.2f} times {name}'s "
                 f"(geometric mean {_geomean(values):.2f})")
        clauses.append(text)
    if clauses:
        return _join(clauses)
    return f"Step {step} against {SDPA_LABEL} is not measured yet: {_sdpa_missing(step)}."


def sdpa_target(records: list[fr.Record], step: str, target: float, dtype: str = "bf16") -> str:
    """Whether the geometric mean of step / SDPA TFLOPS reaches ``target``, per GPU."""
    name = _sdpa_name(records)
    clauses = []
    for _, gpu, title in _gpus(records):
        ratios = _sdpa_ratios(records, gpu, step, dtype)
        if not ratios:
            continue
        mean = _geomean([r for r, _ in ratios])
        verdict = "meets" if mean >= target else "falls short of"
        low, low_name = ratios[0]
        clauses.append(f"on {title} step {step} {verdict} the course's target of at least "
                       f"{target:.1f} times {name}: the geometric mean of the ratio over the "
                       f"{len(ratios)} {dtype} attention benchmarks is {mean:.2f} (lowest "
                       f"{low:.2f}, `{low_name}`)")
    if clauses:
        return _join(clauses)
    return (f"Whether step {step} meets the course's target of at least {target:.1f} times "
            f"{SDPA_LABEL} is not measured yet: {_sdpa_missing(step)}.")


def causal_target(records: list[fr.Record], spec: dict = CAUSAL_TARGET, dtype: str = "bf16") -> str:
    """Step 05's causal speed-up over step 04 at one N, against the course's target."""
    step, versus, n, goal = spec["step"], spec["versus"], spec["seqlen"], spec["speedup"]
    clauses = []
    for _, gpu, title in _gpus(records):
        parts = []
        for d in spec["head_dims"]:
            name = f"attention/{dtype}/hd{d}/n{n}/causal"
            mine, ref = _rec(records, gpu, step, name), _rec(records, gpu, versus, name)
            if mine is None or ref is None:
                continue
            ratio = mine.tflops / ref.tflops
            verdict = "meets" if ratio >= goal else "falls short of"
            parts.append(f"at D = {d}, {ratio:.2f} times ({fr.fmt_tflops(mine.tflops)} against "
                         f"{fr.fmt_tflops(ref.tflops)} TFLOPS), which {verdict} the course's "
                         f"target of at least {goal:g}")
        if parts:
            clauses.append(f"on {title} at N = {n} ({dtype}), step {step} runs causal attention "
                           f"faster than step {versus}: " + "; ".join(parts))
    if clauses:
        return _join(clauses)
    return (f"Whether step {step} runs causal attention at least {goal:g} times as fast as step "
            f"{versus} at N = {n} is not measured yet: it needs the {dtype} causal benchmarks at "
            f"N = {n} in `results/<gpu>/step{versus}.json` and `step{step}.json` from the same "
            "GPU.")


def tuning(tables: list) -> str:
    """What the checked-in tuning tables hold (``plot_search_space.Table`` objects)."""
    sentences = []
    for table in tables:
        entries = table.entries
        if not entries:
            continue
        meta = table.meta
        when = ", ".join(x for x in (f"tuned on {meta['date'][:10]}" if meta.get("date") else "",
                                     f"commit `{meta['git_commit'][:12]}`"
                                     if meta.get("git_commit") else "") if x)
        spreads = [e.spread for e in entries]
        timed = {c for e in entries for c in e.median_ms}
        chosen = {e.choice for e in entries}
        head_dims = ", ".join(str(d) for d in sorted({e.shape.head_dim for e in entries}))
        sentences.append(
            f"The table checked in for the {', '.join(table.devices)} "
            f"(`{TUNED_DIR}/{table.path.name}`{', ' + when if when else ''}) holds "
            f"{len(entries)} keys ({', '.join(table.dtypes)}; head dims {head_dims}). Its choices "
            f"use {len(chosen)} of the {len(timed)} configurations it timed, and on one key the "
            f"fastest configuration runs from {min(spreads):.2f} to {max(spreads):.2f} times as "
            "fast as the slowest.")
    if sentences:
        return " ".join(sentences)
    return (f"Step 06's search space is not measured yet: no tuning table is checked in under "
            f"`{TUNED_DIR}/`, so without a user cache or `FLASHSTEPS_TUNE=1` step 06 runs the "
            "heuristic shapes, which are step 05's.")


def _vendor(gpu: str) -> str:
    return "amd" if gpu.startswith(("amd", "mi")) else "nvidia"


def facts(records: list[fr.Record], ceilings: list[fr.Ceiling], points: list[pr.Point],
          steps: list[str], tuning_tables: list | None = None) -> dict[str, str]:
    """Every substitution the chapters may use. ``tuning_tables``: the tables of
    :data:`TUNED_DIR` (``plot_search_space.load_tables``), for ``step06_tuning``."""
    out = {"roofline_ridges": ridges(ceilings), "ceilings_tc_vs_fma": ceiling_ratio(ceilings)}
    if CAUSAL_TARGET["step"] in steps and CAUSAL_TARGET["versus"] in steps:
        out[f"step{CAUSAL_TARGET['step']}_causal_target"] = causal_target(records)
    if "06" in steps:
        out["step06_tuning"] = tuning(tuning_tables or [])
    for step in steps:
        out[f"step{step}_gemm"] = gemm(records, ceilings, step)
        out[f"step{step}_sdpa"] = sdpa(records, step)
        if step in SDPA_TARGETS:
            out[f"step{step}_sdpa_target"] = sdpa_target(records, step, SDPA_TARGETS[step])
    for step in steps:
        out[f"step{step}_headline"] = headline(records, step)
        out[f"step{step}_speedups"] = speedups(records, step)
        out[f"step{step}_fma"] = fma(records, ceilings, step)
        out[f"step{step}_fma_target"] = fma_target(records, ceilings, step)
        out[f"step{step}_causal"] = causal(records, step)
        out[f"step{step}_roofline"] = roofline(points, ceilings, step)
    return out
