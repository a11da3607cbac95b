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

and ``roofline_ridges``: where the bandwidth line meets the compute ceilings.
"""

from __future__ import annotations

import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOOLS))
import flashsteps_results as fr  # noqa: E402
import plot_roofline as pr  # noqa: E402

HEADLINE = pr.NCU_BENCHMARK
# The course's goal for its last CUDA-core step (03): this fraction of the fp32 FMA ceiling.
FMA_TARGET = 0.25


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


def _vendor(gpu: str) -> str:
    return "amd" if gpu.startswith(("amd", "mi")) else "nvidia"


def facts(records: list[fr.Record], ceilings: list[fr.Ceiling], points: list[pr.Point],
          steps: list[str]) -> dict[str, str]:
    """Every substitution the chapters may use."""
    out = {"roofline_ridges": ridges(ceilings)}
    for step in steps:
        out[f"step{step}_headline"] = headline(records, step)
        out[f"step{step}_speedups"] = speedups(records, step)
        out[f"step{step}_fma"] = fma(records, ceilings, step)
        out[f"step{step}_fma_target"] = fma_target(records, ceilings, step)
        out[f"step{step}_causal"] = causal(records, step)
        out[f"step{step}_roofline"] = roofline(points, ceilings, step)
    return out
