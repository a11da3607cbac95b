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
- ``stepNN_speedups`` -- the range of speed-ups over the previous step across the attention
  benchmarks both ran (every dtype both ran); ``stepNN_speedups_full`` and
  ``stepNN_speedups_causal`` the same for one mask;
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
  :data:`SDPA_BASELINE`, written by tools/baselines/sdpa_bench.py): the ratio on the headline problem,
  and per mask its range and geometric mean over the attention benchmarks both ran (fp16 and
  bf16);
- ``stepNN_sdpa_target`` (the steps of :data:`SDPA_TARGETS`) -- the course's target judged
  per benchmark, as the issue states it: at how many of the benchmarks both ran the ratio
  reaches it (overall and per mask), the lowest ratio and the geometric mean;

and, for the whole book or one step:

- ``roofline_ridges`` -- where the bandwidth line meets the compute ceilings;
- ``ceilings_tc_vs_fma`` -- the measured bf16 GEMM ceiling against the fp32 FMA ceiling;
- ``timing_batches`` -- which result files were timed one call per event pair (before the
  benchmark batched short calls; no ``calls_per_timing`` counter) and which with batches;
- ``step05_causal_target`` (when step 05 exists) -- step 05's causal TFLOPS against step
  04's at N = :data:`CAUSAL_TARGET` seqlen, fp16 and bf16, D = 64 and 128, and the course's
  target;
- ``step06_tuning`` (when step 06 exists) -- what the tuning tables checked in under
  ``steps/06_autotuned/tuned/`` hold (tools/book/plot_search_space.py reads them), and how
  often their choice is the heuristic shape (:data:`HEURISTIC_NVIDIA`);
- ``step06_profile_setup``, ``step06_profile_issue``, ``step06_profile_stalls`` (when step
  06 exists) -- step 06 against FlashAttention-2 in Nsight Compute's text reports
  (:data:`PROFILE_PAIR`, ``results/<gpu>/ncu/*.ncu.txt``, read by :func:`load_profiles`):
  the launches and their occupancy; instructions, IPC and cycles between issues; the share
  of fixed-latency stalls.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / "results"
sys.path.insert(0, str(TOOLS))
import flashsteps_results as fr  # noqa: E402
import plot_roofline as pr  # noqa: E402

HEADLINE = pr.NCU_BENCHMARK
# The course's goal for its last CUDA-core step (03): this fraction of the fp32 FMA ceiling.
FMA_TARGET = 0.25
# The reference the tensor-core steps are held against: PyTorch SDPA's flash backend
# (FlashAttention-2), as tools/baselines/sdpa_bench.py records it, and the course's goal per step: step
# TFLOPS / SDPA TFLOPS at least this at every attention benchmark both ran (fp16 and bf16,
# both masks), as the issue states it.
SDPA_BASELINE = "sdpa-flash"
SDPA_LABEL = "PyTorch SDPA's flash backend (FlashAttention-2)"
SDPA_TARGETS = {"04": 0.8, "06": 1.0}
# Step 05's goal: causal attention at this N, fp16 and bf16, D = 64 and 128, at least this
# many times as fast as step 04 (skipping the hidden KV tiles can give at most about 2).
CAUSAL_TARGET = {"step": "05", "versus": "04", "seqlen": 8192, "head_dims": (64, 128),
                 "dtypes": ("fp16", "bf16"), "speedup": 1.8}
TUNED_DIR = "steps/06_autotuned/tuned"
# heuristic() of steps/06_autotuned/step.cu on NVIDIA, per compiled head dim: FlashAttention-2's
# shapes, which are step 05's fixed ones (tests/test_search_space.py checks this against the
# source).
HEURISTIC_NVIDIA = {32: "m128_n128_w4_s2", 64: "m128_n64_w4_s2", 96: "m128_n64_w4_s2",
                    128: "m128_n64_w4_s2", 256: "m128_n32_w8_s2"}
# The Nsight Compute reports (results/<gpu>/ncu/<stem>.ncu.txt) that step 06's chapter compares:
# step 06, then FlashAttention-2 (PyTorch SDPA's flash backend), on the same problem.
PROFILE_PAIR = ("step06_bf16_hd128_n2048_full", "sdpa_flash_bf16_hd128_n2048_full")
PROFILE_LABELS = ("step 06", "FlashAttention-2")
DTYPE_ORDER = ("fp16", "bf16", "fp32")
MASK_WORDS = {"full": "unmasked", "causal": "causal"}


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


def _and(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _dtypes_of(recs) -> str:
    """'bf16' or 'fp16 and bf16': the dtypes of ``recs``, in the course's order."""
    found = {r.dtype for r in recs}
    return _and([d for d in DTYPE_ORDER if d in found] or ["(no dtype)"])


def _attention(records, gpu: str, step: str, dtype: str | None = None,
               mask: str | None = None) -> list[fr.Record]:
    """The measured attention benchmarks of ``step`` on ``gpu`` (one dtype or mask, or all)."""
    return [r for r in records if r.gpu == gpu and r.step == step and r.kind == "attention"
            and not r.skipped and (dtype is None or r.dtype == dtype)
            and (mask is None or r.mask == mask)]


def speedups(records: list[fr.Record], step: str, dtype: str | None = None,
             mask: str | None = None) -> str:
    """Range of step / previous-step TFLOPS over the attention benchmarks both ran (every
    dtype both ran unless ``dtype`` is given; one mask when ``mask`` is given)."""
    clauses = []
    for _, gpu, title in _gpus(records):
        prev = _previous(records, gpu, step)
        if prev is None:
            continue
        ratios, both = [], []
        for rec in _attention(records, gpu, step, dtype, mask):
            ref = _rec(records, gpu, prev, rec.name)
            if ref is not None:
                ratios.append(rec.tflops / ref.tflops)
                both.append(rec)
        if ratios:
            what = _dtypes_of(both) + (f" {MASK_WORDS[mask]}" if mask else "")
            clauses.append(f"across the {len(ratios)} {what} attention benchmarks that steps "
                           f"{prev} and {step} both ran on {title}, the speed-up of step "
                           f"{step} ranges from {pr.fmt_sig(min(ratios))} to "
                           f"{pr.fmt_sig(max(ratios))}")
    if clauses:
        return _join(clauses)
    what = f"{MASK_WORDS[mask]} attention" if mask else "attention"
    return (f"There is no measured speed-up of step {step} over a previous step on {what} "
            "yet: both need results on the same GPU.")


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


def _sdpa_ratios(records: list[fr.Record], gpu: str, step: str, dtype: str | None = None,
                 mask: str | None = None) -> list[tuple[float, fr.Record]]:
    """[(step / SDPA TFLOPS, the step's record)] over the attention benchmarks both ran on
    ``gpu``, lowest first (every dtype and mask unless one is given)."""
    out = []
    for rec in _attention(records, gpu, step, dtype, mask):
        base = _rec(records, gpu, SDPA_BASELINE, rec.name)
        if base is not None and base.tflops > 0:
            out.append((rec.tflops / base.tflops, rec))
    return sorted(out, key=lambda x: (x[0], x[1].name))


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _sdpa_name(records: list[fr.Record]) -> str:
    return next((r.step_name for r in records if r.step == SDPA_BASELINE), "PyTorch SDPA flash")


def _sdpa_missing(step: str) -> str:
    return (f"it needs `results/<gpu>/step{step}.json` and the baseline's "
            f"`results/<gpu>/{SDPA_BASELINE}.json` (tools/baselines/sdpa_bench.py) from the same GPU")


def _problem_set(recs: list[fr.Record]) -> str:
    """'fp16 and bf16, D = 64 and 128, N = 2048 to 16384, both masks' for ``recs``."""
    dims = sorted({r.head_dim for r in recs if r.head_dim})
    ns = sorted({r.seqlen for r in recs if r.seqlen})
    masks = {r.mask for r in recs}
    parts = [_dtypes_of(recs)]
    if dims:
        parts.append("D = " + _and([str(d) for d in dims]))
    if ns:
        parts.append(f"N = {ns[0]}" if len(ns) == 1 else f"N = {ns[0]} to {ns[-1]}")
    parts.append("with and without the causal mask" if masks == {"full", "causal"}
                 else f"{MASK_WORDS.get(next(iter(masks)), 'one mask')} only")
    return ", ".join(parts)


def _masks_in(ratios) -> list[str]:
    return [m for m in ("full", "causal") if any(r.mask == m for _, r in ratios)]


def sdpa(records: list[fr.Record], step: str) -> str:
    """The step against PyTorch SDPA's flash backend, per GPU: the headline problem, then
    per mask the range and geometric mean of the ratio."""
    name = _sdpa_name(records)
    clauses = []
    for _, gpu, title in _gpus(records):
        ratios = _sdpa_ratios(records, gpu, step)
        if not ratios:
            continue
        mine, base = _rec(records, gpu, step, HEADLINE), _rec(records, gpu, SDPA_BASELINE, HEADLINE)
        text = f"on {title}"
        if mine is not None and base is not None:
            text += (f", step {step} runs `{HEADLINE}` at {fr.fmt_tflops(mine.tflops)} TFLOPS, "
                     f"{mine.tflops / base.tflops:.2f} times {name} "
                     f"({fr.fmt_tflops(base.tflops)} TFLOPS); over")
        else:
            text += ", over"
        text += (f" the {len(ratios)} attention benchmarks that both ran "
                 f"({_problem_set([r for _, r in ratios])}), step {step}'s TFLOPS are ")
        per_mask = []
        for m in _masks_in(ratios):
            values = [x for x, r in ratios if r.mask == m]
            how = "without a mask" if m == "full" else "with the causal mask"
            per_mask.append(f"from {values[0]:.2f} to {values[-1]:.2f} times {name}'s {how} "
                            f"({len(values)} benchmarks, geometric mean {_geomean(values):.2f})")
        clauses.append(text + " and ".join(per_mask))
    if clauses:
        return _join(clauses)
    return f"Step {step} against {SDPA_LABEL} is not measured yet: {_sdpa_missing(step)}."


def sdpa_target(records: list[fr.Record], step: str, target: float) -> str:
    """The course's target, step TFLOPS >= ``target`` x SDPA flash, judged per benchmark
    over every dtype and mask both ran: how many points reach it, the lowest and highest
    ratio, the geometric mean, and the same per mask."""
    name = _sdpa_name(records)
    clauses = []
    for _, gpu, title in _gpus(records):
        ratios = _sdpa_ratios(records, gpu, step)
        if not ratios:
            continue
        values = [x for x, _ in ratios]
        met = sum(1 for x in values if x >= target)
        (low, low_rec), (high, high_rec) = ratios[0], ratios[-1]
        if met == len(values):
            text = (f"on {title} the course's target for step {step}, at least {target:.1f} "
                    f"times {name} at every benchmark, is met: step {step} reaches it at all "
                    f"{len(values)} attention benchmarks that both ran")
        else:
            text = (f"on {title} the course's target for step {step}, at least {target:.1f} "
                    f"times {name} at every benchmark, is missed: step {step} reaches it at "
                    f"{met} of the {len(values)} attention benchmarks that both ran")
        text += f" ({_problem_set([r for _, r in ratios])})"
        if 0 < met < len(values) and met <= 6:
            text += ": " + _and([f"`{r.name}`" for x, r in ratios if x >= target])
        text += (f". The ratio runs from {low:.2f} "
                 f"(`{low_rec.name}`) to {high:.2f} (`{high_rec.name}`), geometric mean "
                 f"{_geomean(values):.2f}")
        masks = _masks_in(ratios)
        if len(masks) > 1:
            per_mask = []
            for m in masks:
                mv = [x for x, r in ratios if r.mask == m]
                k = sum(1 for x in mv if x >= target)
                how = "without a mask" if m == "full" else "with the causal mask"
                per_mask.append(f"{how} the target is reached at {k} of {len(mv)} "
                                f"({mv[0]:.2f} to {mv[-1]:.2f}, geometric mean "
                                f"{_geomean(mv):.2f})")
            text += ". " + _join(per_mask)[:-1]
        clauses.append(text)
    if clauses:
        return _join(clauses)
    return (f"Whether step {step} meets the course's target of at least {target:.1f} times "
            f"{SDPA_LABEL} at every benchmark is not measured yet: {_sdpa_missing(step)}.")


def causal_target(records: list[fr.Record], spec: dict = CAUSAL_TARGET) -> str:
    """Step 05's causal speed-up over step 04 at one N, per dtype and head dim, against the
    course's target."""
    step, versus, n, goal = spec["step"], spec["versus"], spec["seqlen"], spec["speedup"]
    clauses = []
    for _, gpu, title in _gpus(records):
        parts, ratios = [], []
        for dtype in spec["dtypes"]:
            for d in spec["head_dims"]:
                name = f"attention/{dtype}/hd{d}/n{n}/causal"
                mine, ref = _rec(records, gpu, step, name), _rec(records, gpu, versus, name)
                if mine is None or ref is None:
                    continue
                ratio = mine.tflops / ref.tflops
                ratios.append(ratio)
                parts.append(f"{ratio:.2f} at {dtype}, D = {d} "
                             f"({fr.fmt_tflops(mine.tflops)} against "
                             f"{fr.fmt_tflops(ref.tflops)} TFLOPS)")
        if not parts:
            continue
        met = sum(1 for r in ratios if r >= goal)
        if met == len(ratios):
            verdict = (f"all {len(ratios)} meet" if len(ratios) > 1 else "this meets") + \
                f" the course's target of at least {goal:g}"
        else:
            verdict = (f"the course's target of at least {goal:g} is missed at "
                       f"{len(ratios) - met} of the {len(ratios)} (lowest {min(ratios):.2f})")
        clauses.append(f"on {title} at N = {n}, step {step} runs causal attention this many "
                       f"times as fast as step {versus}: " + _and(parts) + f"; {verdict}")
    if clauses:
        return _join(clauses)
    return (f"Whether step {step} runs causal attention at least {goal:g} times as fast as step "
            f"{versus} at N = {n} is not measured yet: it needs the causal benchmarks at "
            f"N = {n} in `results/<gpu>/step{versus}.json` and `step{step}.json` from the same "
            "GPU.")


def timing_batches(records: list[fr.Record]) -> str:
    """Which steps' results were timed one call per event pair (no ``calls_per_timing``
    counter: before the benchmark batched short calls) and which with batches."""
    clauses = []
    for _, gpu, title in _gpus(records):
        single, batched, counts = [], [], []
        for step in sorted({r.step for r in records if r.gpu == gpu and not r.is_baseline},
                           key=int):
            mine = [r for r in records if r.gpu == gpu and r.step == step and not r.skipped]
            values = [r.counters["calls_per_timing"] for r in mine
                      if "calls_per_timing" in r.counters]
            if not mine:
                continue
            if values:
                batched.append(step)
                counts += values
            else:
                single.append(step)
        parts = []
        if single:
            parts.append(f"the results of step{'s' if len(single) > 1 else ''} {_and(single)} "
                         f"were timed one call per event pair (their JSON has no "
                         "`calls_per_timing` counter: they predate the batching, and a short "
                         "call in them includes its launch latency)")
        if batched:
            lo, hi = int(min(counts)), int(max(counts))
            span = f"{lo}" if lo == hi else f"{lo} to {hi}"
            parts.append(f"those of step{'s' if len(batched) > 1 else ''} {_and(batched)} with "
                         f"it, {span} call{'s' if hi > 1 else ''} per event pair")
        if parts:
            clauses.append(f"on {title}, " + "; ".join(parts))
    if clauses:
        return _join(clauses)
    return ("Which results were timed one call per event pair and which in batches is not "
            "measured yet: `results/` holds no benchmark JSON.")


def _overlapped(config: str) -> bool:
    return config.endswith("_ov")


def tuning(tables: list) -> str:
    """What the checked-in tuning tables hold (``plot_search_space.Table`` objects): keys,
    choices, the spread of one key, and (NVIDIA tables) how often the choice is the
    heuristic shape and what the tuner measured another choice to gain over it."""
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
        dims = sorted({e.shape.head_dim for e in entries})
        head_dims = ", ".join(str(d) for d in dims)
        per_dim = []
        for d in dims:
            n_timed = len({c for e in entries if e.shape.head_dim == d for c in e.median_ms})
            per_dim.append(f"{n_timed} at D = {d}")
        text = (f"The table checked in for the {', '.join(table.devices)} "
                f"(`{TUNED_DIR}/{table.path.name}`{', ' + when if when else ''}) holds "
                f"{len(entries)} keys ({', '.join(table.dtypes)}; head dims {head_dims}), each "
                f"with the time of every configuration of its head dim's space "
                f"({_and(per_dim)}). Its choices use {len(chosen)} of the {len(timed)} "
                f"configurations it timed, and on one key the fastest configuration runs from "
                f"{min(spreads):.2f} to {max(spreads):.2f} times as fast as the slowest.")
        if all(dev.startswith("NVIDIA") for dev in table.devices):
            kept, gains, per = 0, [], []
            for d in dims:
                mine = [e for e in entries if e.shape.head_dim == d]
                h = HEURISTIC_NVIDIA.get(d)
                if h is None or not all(h in e.median_ms for e in mine):
                    continue
                k = sum(1 for e in mine if e.choice == h)
                kept += k
                per.append(f"{k} of {len(mine)} at D = {d}")
                gains += [e.median_ms[h] / e.median_ms[e.choice] for e in mine if e.choice != h]
            if per:
                n_ov = sum(1 for e in entries if _overlapped(e.choice))
                text += (f" The choice is the heuristic shape (FlashAttention-2's, step 05's) at "
                         f"{kept} of the {len(entries)} keys ({_and(per)})")
                if gains:
                    text += (f"; where the tuner chose another shape, it timed it "
                             f"{min(gains):.2f} to {max(gains):.2f} times as fast as the "
                             "heuristic's")
                text += (f". An overlapped configuration (`_ov`) is the choice at {n_ov} of the "
                         f"{len(entries)} keys.")
        sentences.append(text)
    if sentences:
        return " ".join(sentences)
    return (f"Step 06's search space is not measured yet: no tuning table is checked in under "
            f"`{TUNED_DIR}/`, so without a user cache or `FLASHSTEPS_TUNE=1` step 06 runs the "
            "heuristic shapes, which are step 05's.")


# ----------------------------------------------------------------------------- Nsight Compute
# Text reports (``ncu`` without --csv, the default "details" page), saved as
# results/<gpu>/ncu/<stem>.ncu.txt by the GPU session.

_KERNEL_RE = re.compile(r"^\s+(?P<kernel>\S.*?) \((?P<grid>\d+, \d+, \d+)\)x"
                        r"\((?P<block>\d+, \d+, \d+)\), Context")
_METRIC_RE = re.compile(r"^\s{4}(?P<name>[A-Za-z][\w .%/()-]*?)\s{2,}"
                        r"(?:(?P<unit>[^\s\d][^\s]*)\s+)?(?P<value>[\d,]+(?:\.\d+)?)\s*$")
_FIXED_RE = re.compile(r"spends (?P<cycles>[\d.]+) cycles being stalled waiting on a fixed latency "
                       r"execution dependency.*?This stall type represents about "
                       r"(?P<pct>[\d.]+)% of the total average of (?P<total>[\d.]+) cycles")
_FP32_RE = re.compile(r"executes (?P<fused>\d+) fused and (?P<nonfused>\d+) non-fused FP32 "
                      r"instructions")
_COMMIT_RE = re.compile(r"^git_commit: (\S+)$", re.M)
_PER_SCHEDULER_RE = re.compile(r"The (?P<warps>[\d.]+) theoretical warps per scheduler")


class ProfileError(ValueError):
    """An Nsight Compute text report lacks what the facts need; names the file and the field."""


@dataclass
class Profile:
    """One kernel launch of an Nsight Compute text report (the first one in the file)."""

    gpu: str
    stem: str                   # file name without .ncu.txt
    source: str                 # results/<gpu>/ncu/<stem>.ncu.txt
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    fixed_latency_pct: float | None = None       # share of the cycles between issues
    fp32: tuple[int, int] | None = None          # (fused, non-fused) FP32 instructions
    commit: str | None = None                    # the step's git_commit, when printed
    warps_per_scheduler: float | None = None     # theoretical, from the occupancy note

    def metric(self, name: str) -> float:
        if name not in self.metrics:
            raise ProfileError(f"{self.source}: no metric {name!r}")
        return self.metrics[name]

    @property
    def config(self) -> str | None:
        """The tile shape in the kernel's name: step 06's TileConfig<M, N, W, S, OV> as
        'm128_n64_w4_s2', FlashAttention-2's Flash_fwd_kernel_traits<D, M, N, W> as
        'm128_n64_w4'."""
        m = re.search(r"TileConfig<(\d+), (\d+), (\d+), (\d+)(?:, (\d+))?>", self.kernel)
        if m:
            return (f"m{m[1]}_n{m[2]}_w{m[3]}_s{m[4]}" + ("_ov" if m[5] and m[5] != "0" else ""))
        m = re.search(r"Flash_fwd_kernel_traits<\d+, (\d+), (\d+), (\d+)", self.kernel)
        return f"m{m[1]}_n{m[2]}_w{m[3]}" if m else None


def parse_profile(text: str, gpu: str, stem: str, source: str) -> Profile:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _KERNEL_RE.match(line)), None)
    if start is None:
        raise ProfileError(f"{source}: no kernel line ('<kernel> (grid)x(block), Context ...')")
    km = _KERNEL_RE.match(lines[start])
    end = next((i for i in range(start + 1, len(lines)) if _KERNEL_RE.match(lines[i])), len(lines))
    p = Profile(gpu, stem, source, km["kernel"],
                tuple(int(x) for x in km["grid"].split(", ")),
                tuple(int(x) for x in km["block"].split(", ")))
    for line in lines[start + 1:end]:
        m = _METRIC_RE.match(line)
        if m and m["name"].strip() not in p.metrics:
            p.metrics[m["name"].strip()] = float(m["value"].replace(",", ""))
            p.units[m["name"].strip()] = m["unit"] or ""
    body = " ".join(" ".join(lines[start + 1:end]).split())
    if (m := _FIXED_RE.search(body)) is not None:
        p.fixed_latency_pct = float(m["pct"])
    if (m := _FP32_RE.search(body)) is not None:
        p.fp32 = (int(m["fused"]), int(m["nonfused"]))
    if (m := _COMMIT_RE.search(text)) is not None:
        p.commit = m[1]
    if (m := _PER_SCHEDULER_RE.search(body)) is not None:
        p.warps_per_scheduler = float(m["warps"])
    return p


def load_profiles(results: Path | str) -> list[Profile]:
    """Every ``results/<gpu>/ncu/*.ncu.txt``; none when results/ does not exist."""
    results = Path(results)
    out = []
    for path in sorted(results.glob("*/ncu/*.ncu.txt")) if results.is_dir() else []:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ProfileError(f"{path}: cannot read ({exc})") from None
        gpu = path.parent.parent.name
        out.append(parse_profile(text, gpu, path.name[:-len(".ncu.txt")],
                                 f"results/{gpu}/ncu/{path.name}"))
    return out


def _profile_pairs(profiles: list[Profile], pair=PROFILE_PAIR):
    """[(gpu, mine, theirs)] for every GPU that has both reports of ``pair``."""
    by = {(p.gpu, p.stem): p for p in profiles}
    gpus = sorted({p.gpu for p in profiles})
    return [(g, by[(g, pair[0])], by[(g, pair[1])]) for g in gpus
            if (g, pair[0]) in by and (g, pair[1]) in by]


def _profile_missing(pair=PROFILE_PAIR) -> str:
    return (f"The Nsight Compute comparison of {PROFILE_LABELS[0]} with {PROFILE_LABELS[1]} is not "
            f"measured yet: it needs `results/<gpu>/ncu/{pair[0]}.ncu.txt` and "
            f"`{pair[1]}.ncu.txt` from the same GPU.")


def _problem_of_stem(stem: str) -> str:
    m = re.search(r"_(fp16|bf16)_hd(\d+)_n(\d+)_(full|causal)$", stem)
    if not m:
        return "one problem"
    return (f"{m[1]}, D = {m[2]}, N = {m[3]}, "
            + ("no mask" if m[4] == "full" else "causal mask"))


def _blocks_per_sm_limits(p: Profile) -> tuple[int, list[str]]:
    limits = {k[len("Block Limit "):]: v for k, v in p.metrics.items()
              if k.startswith("Block Limit ")}
    if not limits:
        raise ProfileError(f"{p.source}: no 'Block Limit ...' metrics")
    low = min(limits.values())
    names = {"Registers": "registers", "Shared Mem": "shared memory", "Warps": "warps",
             "SM": "the SM's block limit", "Barriers": "barriers"}
    return int(low), [names.get(k, k) for k, v in limits.items() if v == low]


def profile_setup(profiles: list[Profile], pair=PROFILE_PAIR,
                  titles: dict[str, str] | None = None) -> str:
    """Which reports, which problem, which launches, and the occupancy of both kernels;
    ``titles``: "the NVIDIA H200" per GPU slug (from the benchmark results)."""
    clauses = []
    for gpu, mine, theirs in _profile_pairs(profiles, pair):
        title = (titles or {}).get(gpu, f"`{gpu}`")
        clock = mine.metrics.get("SM Frequency")
        commit = f", step 06 built at commit `{mine.commit[:12]}`" if mine.commit else ""
        theirs_src = (f"`{Path(theirs.source).name}` beside it"
                      if Path(theirs.source).parent == Path(mine.source).parent
                      else f"`{theirs.source}`")
        text = (f"Nsight Compute profiled one launch of each on {title} "
                f"(`{mine.source}` and {theirs_src}; {_problem_of_stem(mine.stem)}"
                + (f"; SM clock {clock:.2f} GHz under the profiler" if clock else "")
                + f"{commit})")
        launches = []
        for p in (mine, theirs):
            launches.append((p.grid[0] * p.grid[1] * p.grid[2],
                             p.block[0] * p.block[1] * p.block[2]))
        same_shape = (mine.config and theirs.config
                      and mine.config.startswith(theirs.config + "_"))
        if launches[0] == launches[1]:
            text += f". Both launch {launches[0][0]:,} blocks of {launches[0][1]} threads"
            if same_shape:
                text += (f", with the same tile shape ({PROFILE_LABELS[0]}'s `{mine.config}`, "
                         f"{PROFILE_LABELS[1]}'s `{theirs.config}`: BLOCK_M, BLOCK_N and warps as "
                         "read from the kernels' names)")
            text += "."
        else:
            text += ". " + _and([f"{label} launches {b:,} blocks of {t} threads"
                                 for label, (b, t) in zip(PROFILE_LABELS, launches)]) + "."
        occ = []
        for p in (mine, theirs):
            blocks, why = _blocks_per_sm_limits(p)
            warps = p.metric("Theoretical Active Warps per SM")
            sched = (f", {p.warps_per_scheduler:g} per scheduler"
                     if p.warps_per_scheduler is not None else "")
            occ.append(f"{p.metric('Theoretical Occupancy'):.1f} % ({warps:g} warps per "
                       f"SM{sched}; the limit of {blocks} blocks per SM is set by {_and(why)})")
        if occ[0] == occ[1]:
            text += f" Both have a theoretical occupancy of {occ[0]}."
        else:
            text += " Theoretical occupancy: " + "; ".join(
                f"{label} {o}" for label, o in zip(PROFILE_LABELS, occ)) + "."
        clauses.append(text)
    return " ".join(clauses) if clauses else _profile_missing(pair)


def profile_issue(profiles: list[Profile], pair=PROFILE_PAIR) -> str:
    """Instructions executed, IPC and cycles between two issues of a warp, both kernels."""
    clauses = []
    for _, mine, theirs in _profile_pairs(profiles, pair):
        n0, n1 = mine.metric("Executed Instructions"), theirs.metric("Executed Instructions")
        ipc0, ipc1 = mine.metric("Executed Ipc Active"), theirs.metric("Executed Ipc Active")
        c0 = mine.metric("Warp Cycles Per Issued Instruction")
        c1 = theirs.metric("Warp Cycles Per Issued Instruction")
        text = (f"{PROFILE_LABELS[0][:1].upper()}{PROFILE_LABELS[0][1:]}'s kernel executes "
                f"{n0:,.0f} instructions at {ipc0:.2f} per active cycle of an SM, and a warp "
                f"issues one every {c0:.2f} cycles; {PROFILE_LABELS[1]}'s executes {n1:,.0f}, "
                f"{n1 / n0:.2f} times as many, at {ipc1:.2f} per cycle, one every {c1:.2f} "
                "cycles per warp")
        if mine.fp32 and theirs.fp32:
            f0, f1 = sum(mine.fp32), sum(theirs.fp32)
            text += (f". FP32 arithmetic accounts for {f0:,} of {PROFILE_LABELS[0]}'s "
                     f"instructions ({mine.fp32[0]:,} of them fused multiply-adds) and {f1:,} of "
                     f"{PROFILE_LABELS[1]}'s ({theirs.fp32[0]:,} fused)")
            if n1 > n0 and f1 > f0:
                text += (f": {f1 - f0:,} of the {n1 - n0:,.0f} instructions that "
                         f"{PROFILE_LABELS[1]} executes more are FP32")
        d0, d1 = mine.metrics.get("Duration"), theirs.metrics.get("Duration")
        if d0 and d1:
            unit = mine.units.get("Duration", "")
            text += (f". The profiled launches take {d0:g} {unit} and {d1:g} "
                     f"{theirs.units.get('Duration', unit)}")
        clauses.append(text + ".")
    return " ".join(clauses) if clauses else _profile_missing(pair)


def profile_stalls(profiles: list[Profile], pair=PROFILE_PAIR) -> str:
    """The share of the cycles between issues that ncu attributes to fixed-latency
    execution dependencies."""
    clauses = []
    for _, mine, theirs in _profile_pairs(profiles, pair):
        if mine.fixed_latency_pct is None or theirs.fixed_latency_pct is None:
            continue
        clauses.append(f"Nsight Compute attributes {mine.fixed_latency_pct:.1f} % of "
                       f"{PROFILE_LABELS[0]}'s cycles between two issues of a warp to waiting on "
                       "a fixed-latency execution dependency, against "
                       f"{theirs.fixed_latency_pct:.1f} % of {PROFILE_LABELS[1]}'s.")
    return " ".join(clauses) if clauses else _profile_missing(pair)


def _vendor(gpu: str) -> str:
    return "amd" if gpu.startswith(("amd", "mi")) else "nvidia"


def facts(records: list[fr.Record], ceilings: list[fr.Ceiling], points: list[pr.Point],
          steps: list[str], tuning_tables: list | None = None,
          profiles: list[Profile] | None = None) -> dict[str, str]:
    """Every substitution the chapters may use. ``tuning_tables``: the tables of
    :data:`TUNED_DIR` (``plot_search_space.load_tables``), for ``step06_tuning``;
    ``profiles``: the Nsight Compute text reports (:func:`load_profiles`), for
    ``step06_profile_*``."""
    out = {"roofline_ridges": ridges(ceilings), "ceilings_tc_vs_fma": ceiling_ratio(ceilings),
           "timing_batches": timing_batches(records)}
    if CAUSAL_TARGET["step"] in steps and CAUSAL_TARGET["versus"] in steps:
        out[f"step{CAUSAL_TARGET['step']}_causal_target"] = causal_target(records)
    if "06" in steps:
        out["step06_tuning"] = tuning(tuning_tables or [])
        titles = {gpu: title for _, gpu, title in _gpus(records)}
        out["step06_profile_setup"] = profile_setup(profiles or [], titles=titles)
        out["step06_profile_issue"] = profile_issue(profiles or [])
        out["step06_profile_stalls"] = profile_stalls(profiles or [])
    for step in steps:
        out[f"step{step}_gemm"] = gemm(records, ceilings, step)
        out[f"step{step}_sdpa"] = sdpa(records, step)
        if step in SDPA_TARGETS:
            out[f"step{step}_sdpa_target"] = sdpa_target(records, step, SDPA_TARGETS[step])
    for step in steps:
        out[f"step{step}_headline"] = headline(records, step)
        out[f"step{step}_speedups"] = speedups(records, step)
        out[f"step{step}_speedups_full"] = speedups(records, step, mask="full")
        out[f"step{step}_speedups_causal"] = speedups(records, step, mask="causal")
        out[f"step{step}_fma"] = fma(records, ceilings, step)
        out[f"step{step}_fma_target"] = fma_target(records, ceilings, step)
        out[f"step{step}_causal"] = causal(records, step)
        out[f"step{step}_roofline"] = roofline(points, ceilings, step)
    return out
