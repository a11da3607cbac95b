# SPDX-License-Identifier: Apache-2.0
"""Measured values for the book's prose: numbers, not sentences.

stage_book.py renders every chapter through Jinja with :func:`facts` as its context, so a
chapter writes its own sentences and takes the numbers from here, keeping its "not measured
yet" branch in the chapter::

    {% for g in step03.headline %}On {{ g.title }}, step 03 runs at {{ g.tflops }} TFLOPS.
    {% else %}Step 03 is not measured yet.{% endfor %}

A name that is not computed here fails the build (StrictUndefined). Numbers come formatted
the way the book prints them (TFLOPS to about three significant digits, ratios to two
decimals), as strings; lists are per GPU, in display order, and are empty when nothing is
measured. ``g.title`` is "the NVIDIA H200".

Context, for every step NN the build registers (``stepNN``, a dict):

- ``number``, ``base`` (the step it is compared against, or None: its base step, or while
  that one is not measured the nearest measured step down the chain of bases, so step 04
  compares with step 03 until steps 04a and 04b have results; :func:`measured_base`);
- ``headline`` -- per GPU: TFLOPS on :data:`HEADLINE`, and against the base step
  (``base``, ``base_tflops``, ``ratio``; None when the base has no such result);
- ``speedups``, ``speedups_full``, ``speedups_causal`` -- per GPU: over how many attention
  benchmarks both ran (``count``, ``dtypes``) the speed-up over the base ranges from
  ``low`` to ``high``;
- ``fma`` -- per GPU: headline TFLOPS, and ``pct`` of the measured fp32 FMA ceiling
  (``ceiling``), None when the ceiling is not measured; ``fma_met`` (against
  :data:`FMA_TARGET`, ``fma_target`` is its percentage);
- ``gemm`` -- the same against the dense bf16 GEMM ceiling;
- ``causal`` -- per GPU: causal against full TFLOPS at D = 128, bf16, the longest N both ran;
- ``roofline`` -- per GPU: DRAM bytes, TFLOP, FLOP per byte, and the TFLOP/s the copy
  bandwidth allows there (``bound``, None without the ceiling), the fp32 FMA ridge point
  (``fma_ridge``) and on which side of it the step lies (``fma_side``: 'right'/'left');
- ``sdpa`` -- per GPU: against :data:`SDPA_BASELINE` on the headline problem and, per mask,
  range and geometric mean over the benchmarks both ran;
- ``sdpa_target`` (steps of :data:`SDPA_TARGETS`) -- the target judged at every benchmark;
- ``causal_target`` (the step of :data:`CAUSAL_TARGET`) -- causal speed-up over its
  reference step at one N;
- ``tuning`` (steps with a ``tuned/`` folder) -- what each checked-in tuning table holds,
  with ``fa2``: per head dim, at how many keys the choice is FlashAttention-2's shape;
- ``fa2_shapes`` (steps of :data:`HEURISTIC_NVIDIA`) -- step 05's fixed NVIDIA shapes
  against FlashAttention-2's launch template (:data:`FA2_SHAPES`): ``dims``, ``same``,
  ``differ`` (``d``, ``ours``, ``fa2``, ``a100``), ``source``;
- ``profile`` (the step of :data:`PROFILE_PAIR`) -- the step against FlashAttention-2 in
  Nsight Compute's text reports;

and for the whole book: ``step_pages`` (the chapters in reading order, for the index's
toctree: 03, 04a, 04b, 04, 05), ``headline_benchmark``, ``sdpa_name``, ``ridges``,
``overview`` (per GPU: the front page's table, a row per step and one for the SDPA flash
baseline: ``tflops``, ``ratio``, ``sdpa``, ``gemm``, ``limit``), ``library_build`` (per GPU: which results' Google Benchmark library was a debug
build), ``causal_time`` (per GPU: every step's causal time over full time, and which steps save
time under the mask, ``savers`` and ``others``), ``clock_peak`` (per GPU: the "peak" of the ``pct_peak`` counter, SMs x maximum boost
clock x FLOP per clock, against the datasheet's dense figure), ``naive_model`` (step 01's D / 6 FLOP per byte at the headline's D against each fp32 FMA
ridge: ``d``, ``intensity``, ``gpus`` with ``ridge`` and ``side``), ``rescale`` (how often
step 04's warps rescale O, counted on the CPU by ``rescale_count.py``: i.i.d. scores, the
benchmark's random inputs and the MiniLM fixture) and
``tc_vs_fma`` (from the ceilings), ``timing`` (which results were timed one call per event
pair and which in batches).
"""

from __future__ import annotations

import dataclasses

import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / "results"
sys.path.insert(0, str(TOOLS))
import flashsteps_results as fr  # noqa: E402
import plot_roofline as pr  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rescale_count  # noqa: E402

HEADLINE = pr.NCU_BENCHMARK
# The course's goal for its last CUDA-core step: this fraction of the fp32 FMA ceiling.
FMA_TARGET = 0.25
# The reference the tensor-core steps are held against: PyTorch SDPA's flash backend
# (FlashAttention-2), as tools/baselines/sdpa_bench.py records it, and the course's goal per
# step: step TFLOPS / SDPA TFLOPS at least this at every attention benchmark both ran.
SDPA_BASELINE = "sdpa-flash"
SDPA_LABEL = "PyTorch SDPA's flash backend (FlashAttention-2)"
SDPA_TARGETS = {"04": 0.8, "06": 1.0}
# Step 05's goal: causal attention at this N, fp16 and bf16, D = 64 and 128, at least this
# many times as fast as step 04 (skipping the hidden KV tiles can give at most about 2).
CAUSAL_TARGET = {"step": "05", "versus": "04", "seqlen": 8192, "head_dims": (64, 128),
                 "dtypes": ("fp16", "bf16"), "speedup": 1.8}
# Goals of a step against another measured step or baseline, judged at every attention
# benchmark both ran from min_seqlen on: step 07 (TMA + wgmma) at least 1.2x step 06, and
# its standing against PyTorch SDPA's cuDNN backend (no goal: steps 08-09 are to pass it).
# Steps 06-09 and SDPA (flash, cuDNN) were measured in one run at commit e1ddb9b (fp16/bf16,
# D 64/128, N 512-16384, full/causal, and MiniLM), SDPA timed by the steps' own loop
# (tools/baselines/sdpa_bench.py timed_calls()) over inputs rotated past L2 as the steps'
# are, so that both run at the same duty cycle and clock regime: every step and both
# baselines are published from it and judged on it. (steps06-09-f121437 was timed the same
# way, at the step 09 before its 128-key default; steps06-09-08a9377 without the rotation; the sets before it, steps06-09-99566c1 and steps08-09-1633116,
# timed SDPA in 20-call bursts; runs/clock-regimes-77478c1/ shows what that did to cuDNN's
# clock.)
SAME_RUN = "steps06-09-e1ddb9b"
# Step 09 since d878171 (the producer hands out the work tiles, K one tile ahead of V, a
# second Q buffer, the epilogue's LSE beside the last P V, O through stmatrix) and 1a9acaa
# (the next work tile's Q issued during this one where there are two Q buffers) and 1f0a723
# (causal tiles claimed from a counter, heaviest first within L2-sized sections of heads) and
# 3a4cdb9 (full problems with a short last tile claim theirs too): measured in one run with
# step 06 and SDPA flash and cuDNN (same loop, same rotation), without steps 07-08, whose
# code it does not change; its goal against cuDNN is judged on that run, its standing
# against step 08 on SAME_RUN (the step 09 of e1ddb9b).
STEP09_RUN = "step09-e2474fd"
VERSUS = {"07": {"base": {"versus": "06", "goal": 1.2, "min_seqlen": 1024, "run": SAME_RUN},
                 "cudnn": {"versus": "sdpa-cudnn", "goal": None, "min_seqlen": 1024, "run": SAME_RUN}},
          # Step 08 against step 07 in the same run: the goal is set at bf16, D = 128,
          # N = 8192, full (steps 08-09 issue); judged here at every point of the run.
          "08": {"base": {"versus": "07", "goal": 1.15, "min_seqlen": 512, "run": SAME_RUN}},
          # Step 09: against step 08 (no goal of its own), and the course's goal for its last
          # Hopper step, at least SDPA's cuDNN backend at every point from N = 1024.
          "09": {"base": {"versus": "08", "goal": None, "min_seqlen": 1024, "run": SAME_RUN},
                 "cudnn": {"versus": "sdpa-cudnn", "goal": 1.0, "min_seqlen": 1024, "run": STEP09_RUN}}}
# The heuristic() shapes of a tuned step on NVIDIA, per compiled head dim: step 05's fixed
# ones (tools/book/tests/test_search_space.py checks them against the step's source). They
# are FlashAttention-2's at D = 32, 96 and 128 only; see FA2_SHAPES.
HEURISTIC_NVIDIA = {"06": {32: "m128_n128_w4_s2", 64: "m128_n64_w4_s2", 96: "m128_n64_w4_s2",
                           128: "m128_n64_w4_s2", 256: "m128_n32_w8_s2"}}
# FlashAttention-2's forward tile shapes (BLOCK_M, BLOCK_N, warps) per head dim, fp16/bf16
# without dropout, as its launch template picks them on an H100/H200 (sm_90, 228 KiB of
# shared memory per SM): Dao-AILab/flash-attention, csrc/flash_attn/src/
# flash_fwd_launch_template.h at commit 0251105a2fb1 (2026-08-15), run_mha_fwd_hdim32
# (line 198), hdim64 (line 210), hdim96 (line 236), hdim128 (line 262) and hdim256
# (line 318: 64 x 64 x 4 wherever an SM has at least 4 * D * (64 + 128) bytes = 192 KiB of
# shared memory, so two blocks fit; on an A100, 164 KiB, line 316 picks 128 x 64 x 8).
FA2_SOURCE = ("Dao-AILab/flash-attention, `csrc/flash_attn/src/flash_fwd_launch_template.h` "
              "at commit `0251105a2fb1`")
FA2_SHAPES = {32: "m128_n128_w4", 64: "m128_n128_w4", 96: "m128_n64_w4", 128: "m128_n64_w4",
              256: "m64_n64_w4"}
FA2_SHAPES_A100 = {256: "m128_n64_w8"}
# The Nsight Compute reports (results/<gpu>/ncu/<stem>.ncu.txt) a chapter compares: the step,
# then FlashAttention-2 (PyTorch SDPA's flash backend), on the same problem.
PROFILE_STEP = "06"
PROFILE_PAIR = ("step06_bf16_hd128_n2048_full", "sdpa_flash_bf16_hd128_n2048_full")
PROFILE_LABELS = ("step 06", "FlashAttention-2")
DTYPE_ORDER = ("fp16", "bf16", "fp32")
# Vendors' datasheet figures for dense fp16/bf16 tensor-core TFLOP/s (not measured: quoted,
# to compare with the clock peak the benchmark computes). NVIDIA's H200 datasheet lists
# 1,979 TFLOPS for BF16 with 2:4 sparsity; dense is half of it.
DATASHEET_DENSE_TFLOPS = {"NVIDIA H200": {
    "tflops": 989, "source": "NVIDIA H200 Tensor Core GPU datasheet: 1,979 TFLOPS BF16 with "
                             "sparsity, half of it dense"}}


# What limits each step, in a few words, for the front page's table (each chapter's "Why
# it is faster" and "Key points" sections give the measurements behind the phrase). A step
# without an entry shows "see its chapter".
STEP_LIMITS = {
    "01": "S and P make round trips through memory, in scattered 32-byte sectors",
    "02": "scalar fp32 FMAs on the CUDA cores; K is read twice",
    "03": "scalar fp32 FMAs on the CUDA cores",
    "04a": "P through shared memory; a load per operand register; a barrier per K/V tile",
    "04b": "a barrier per K/V tile while it is copied; exp2f with range checks",
    "04": "exp2, shuffles and barriers beside the MMAs; every causal tile is computed",
    "05": "one fixed tile shape per head dim; softmax and MMAs of a warp in sequence",
    "06": "instruction issue: warps wait on the results of earlier arithmetic",
    "07": "the GEMMs and the softmax of a warpgroup still run in sequence",
    "08": "a consumer's softmax is longer than the other consumer's GEMMs that hide it",
    "09": "the softmax's instructions inside the loop: tensor pipe busy 72% of the cycles",
}


def and_list(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = [str(x) for x in items]
    if not items:
        return ""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# Jinja filters the chapters may use: {{ g.single | and_list }} -> "01, 02 and 03".
FILTERS = {"and_list": lambda items: and_list(list(items))}


def r2(x: float) -> str:
    return f"{x:.2f}"


def _gpus(records: list[fr.Record]) -> list[tuple[str, str]]:
    """(gpu, "the NVIDIA H200") in display order."""
    out = []
    for vendor, gpu in fr.gpus_of(records):
        name = next(r.context["gpu_name"] for r in records if r.gpu == gpu)
        out.append((gpu, "the " + fr.gpu_title(vendor, name)))
    return out


def _rec(records, gpu, step, name):
    return next((r for r in records if r.gpu == gpu and r.step == step and r.name == name
                 and not r.skipped), None)


def _attention(records, gpu: str, step: str, dtype: str | None = None,
               mask: str | None = None) -> list[fr.Record]:
    return [r for r in records if r.gpu == gpu and r.step == step and r.kind == "attention"
            and not r.skipped and (dtype is None or r.dtype == dtype)
            and (mask is None or r.mask == mask)]


def _dtypes_of(recs) -> str:
    found = {r.dtype for r in recs}
    return and_list([d for d in DTYPE_ORDER if d in found] or ["(no dtype)"])


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _ceiling(ceilings, gpu: str, kind: str):
    return next((c for c in ceilings if c.gpu == gpu and c.kind == kind), None)


def headline(records, step: str, base: str | None) -> list[dict]:
    out = []
    for gpu, title in _gpus(records):
        rec = _rec(records, gpu, step, HEADLINE)
        if rec is None:
            continue
        ref = _rec(records, gpu, base, HEADLINE) if base else None
        ratio = rec.tflops / ref.tflops if ref else None
        out.append({"gpu": gpu, "title": title, "tflops": fr.fmt_tflops(rec.tflops),
                    "base": base if ref else None,
                    "base_tflops": fr.fmt_tflops(ref.tflops) if ref else None,
                    "ratio": (f"{ratio:.1f}" if ratio >= 10 else r2(ratio)) if ref else None})
    return out


def speedups(records, step: str, base: str | None, mask: str | None = None) -> list[dict]:
    out = []
    for gpu, title in _gpus(records):
        ratios, both = [], []
        for rec in _attention(records, gpu, step, mask=mask) if base else []:
            ref = _rec(records, gpu, base, rec.name)
            if ref is not None:
                ratios.append(rec.tflops / ref.tflops)
                both.append(rec)
        if ratios:
            out.append({"title": title, "count": len(ratios), "dtypes": _dtypes_of(both),
                        "base": base, "low": pr.fmt_sig(min(ratios)),
                        "high": pr.fmt_sig(max(ratios))})
    return out


def against_ceiling(records, ceilings, step: str, kind: str) -> list[dict]:
    """Headline TFLOPS as a share of a measured ceiling (``pct`` None when not measured)."""
    out = []
    for gpu, title in _gpus(records):
        rec = _rec(records, gpu, step, HEADLINE)
        if rec is None:
            continue
        c = _ceiling(ceilings, gpu, kind)
        frac = rec.tflops / c.value if c else None
        out.append({"title": title, "tflops": fr.fmt_tflops(rec.tflops),
                    "pct": pr.fmt_pct(frac) if c else None,
                    "pct1": f"{100 * frac:.1f} %" if c else None,
                    "ceiling": f"{c.value:g}" if c else None,
                    "met": frac is not None and frac >= FMA_TARGET})
    return out


def causal(records, step: str, dtype: str = "bf16", head_dim: int = 128) -> list[dict]:
    out = []
    for gpu, title in _gpus(records):
        both = []
        for rec in _attention(records, gpu, step, dtype, "full"):
            if rec.head_dim == head_dim:
                c = _rec(records, gpu, step, rec.name.replace("/full", "/causal"))
                if c is not None:
                    both.append((rec.seqlen, rec, c))
        if not both:
            continue
        n, full, cz = max(both, key=lambda x: x[0])
        # TFLOPS = FLOPs / time, and causal FLOPs are (N + 1) / 2N of the full ones.
        out.append({"title": title, "n": n, "d": head_dim, "dtype": dtype,
                    "causal_tflops": fr.fmt_tflops(cz.tflops),
                    "full_tflops": fr.fmt_tflops(full.tflops),
                    "ratio": r2(cz.tflops / full.tflops),
                    "time_ratio": r2((n + 1) / (2 * n) * full.tflops / cz.tflops)})
    return out


def _fma_ridge(ceilings, gpu: str) -> float | None:
    """FLOP per byte where the copy bandwidth meets the fp32 FMA ceiling (None unmeasured)."""
    bw, fma = _ceiling(ceilings, gpu, "bandwidth"), _ceiling(ceilings, gpu, "fp32_fma")
    return fma.value * 1000 / bw.value if bw and fma else None


def _side(intensity: float, ridge: float | None) -> str | None:
    """Which side of a ridge point an intensity lies: 'right' (compute-bound by DRAM bytes)
    or 'left' (memory-bound)."""
    return None if ridge is None else ("right" if intensity >= ridge else "left")


# A causal call "saves time" when it takes at most this fraction of the full call's time
# (the FLOPs are (N + 1) / 2N of the full ones, so a kernel that skips what the mask hides
# approaches 0.5; one that computes everything stays near 1).
CAUSAL_SAVES = 0.9


def causal_time(records, steps: list) -> list[dict]:
    """Per GPU: for every step (not the baselines) measured with both masks at bf16,
    D = 128, the causal call's time over the full call's (:func:`causal`), and which steps
    save time under the mask (``savers``, time ratio at most :data:`CAUSAL_SAVES`) and
    which do not (``others``)."""
    per_gpu: dict[str, dict] = {}
    for s in steps:
        for g in causal(records, s.number):
            e = per_gpu.setdefault(g["title"], {"title": g["title"], "steps": [],
                                                "savers": [], "others": []})
            e["steps"].append({"step": s.number, "time_ratio": g["time_ratio"], "n": g["n"]})
            (e["savers"] if float(g["time_ratio"]) <= CAUSAL_SAVES else e["others"]).append(s.number)
    return list(per_gpu.values())


def roofline(points, ceilings, step: str) -> list[dict]:
    """Per GPU with Nsight Compute's DRAM bytes for the step: the measured intensity, the
    bound the copy bandwidth sets there, and on which side of the fp32 FMA ridge it lies
    (``fma_side`` 'right' or 'left', None without both ceilings)."""
    out = []
    for p in (q for q in points if q.step == step):
        bw = _ceiling(ceilings, p.gpu, "bandwidth")
        title = "the " + fr.gpu_title(p.vendor, next(
            (c.gpu_name for c in ceilings if c.gpu == p.gpu), p.gpu))
        ridge = _fma_ridge(ceilings, p.gpu)
        out.append({"title": title, "bytes": pr.fmt_bytes(p.dram_bytes),
                    "tflop": pr.fmt_sig(p.problem.flops / 1e12), "problem": p.problem.name,
                    "intensity": pr.fmt_sig(p.intensity),
                    "bound": pr.fmt_sig(p.bandwidth_bound(bw)) if bw else None,
                    "fma_ridge": pr.fmt_sig(ridge) if ridge else None,
                    "fma_side": _side(p.intensity, ridge)})
    return out


def naive_model(ceilings) -> dict:
    """Step 01's byte count: about 24 N^2 bytes per head for 4 N^2 D FLOPs, D / 6 FLOP per
    byte, at the head dim of :data:`HEADLINE`; per GPU with both ceilings, the fp32 FMA ridge
    and on which side of it that intensity lies."""
    d = int(re.search(r"/hd(\d+)/", HEADLINE)[1])
    intensity = d / 6
    gpus = []
    for gpu in sorted({c.gpu for c in ceilings}):
        ridge = _fma_ridge(ceilings, gpu)
        if ridge is not None:
            name = next(c.gpu_name for c in ceilings if c.gpu == gpu)
            gpus.append({"title": "the " + fr.gpu_title(_vendor(gpu), name),
                         "ridge": pr.fmt_sig(ridge), "side": _side(intensity, ridge)})
    return {"d": d, "intensity": pr.fmt_sig(intensity), "gpus": gpus}


def ridges(ceilings) -> list[dict]:
    out = []
    for gpu, c in pr.ceilings_by_gpu(ceilings).items():
        if "bandwidth" not in c:
            continue
        bw = c["bandwidth"]
        meets = [{"ceiling": pr.CEILING_SHORT[k], "value": pr.fmt_sig(c[k].value, 4),
                  "ridge": pr.fmt_sig(c[k].value * 1000 / bw.value)}
                 for k in ("fp32_fma", "bf16_gemm") if k in c]
        if meets:
            out.append({"title": "the " + fr.gpu_title(_vendor(gpu), bw.gpu_name),
                        "bandwidth": f"{bw.value:,.0f}", "meets": meets})
    return out


def clock_peak(records) -> list[dict]:
    """Per GPU: the tensor-core 'peak' the benchmark's ``pct_peak`` counter is relative to
    (context ``peak_tc_tflops``: SMs x maximum boost clock x dense FLOP per clock per SM),
    its factors, and the vendor's datasheet figure where :data:`DATASHEET_DENSE_TFLOPS` has
    it, with the clock at which the datasheet figure comes out at the same rate per clock."""
    out = []
    for gpu, title in _gpus(records):
        ctx = next((r.context for r in records if r.gpu == gpu and not r.is_baseline
                    and r.context.get("peak_tc_tflops")), None)
        if ctx is None or float(ctx["peak_tc_tflops"]) <= 0:
            continue
        peak, sms = float(ctx["peak_tc_tflops"]), int(ctx["sm_count"])
        clock = int(ctx.get("gpu_max_clock_mhz") or ctx.get("max_clock_mhz"))
        per_clk = peak * 1e12 / (sms * clock * 1e6)
        sheet = DATASHEET_DENSE_TFLOPS.get(ctx.get("gpu_name", ""))
        out.append({"title": title, "tflops": f"{peak:,.1f}", "sm_count": sms, "clock": clock,
                    "per_clk": f"{per_clk:,.0f}",
                    "datasheet": f"{sheet['tflops']:g}" if sheet else None,
                    "datasheet_source": sheet["source"] if sheet else None,
                    "datasheet_clock": (f"{sheet['tflops'] * 1e12 / (sms * per_clk * 1e6):,.0f}"
                                        if sheet else None),
                    "over_datasheet": r2(peak / sheet["tflops"]) if sheet else None})
    return out


def tc_vs_fma(ceilings) -> list[dict]:
    out = []
    for gpu, c in pr.ceilings_by_gpu(ceilings).items():
        if "fp32_fma" in c and "bf16_gemm" in c:
            out.append({"title": "the " + fr.gpu_title(_vendor(gpu), c["bf16_gemm"].gpu_name),
                        "gemm": f"{c['bf16_gemm'].value:g}", "fma": f"{c['fp32_fma'].value:g}",
                        "ratio": pr.fmt_sig(c["bf16_gemm"].value / c["fp32_fma"].value)})
    return out


def _sdpa_ratios(records, gpu: str, step: str, dtype: str | None = None,
                 mask: str | None = None) -> list[tuple[float, fr.Record]]:
    """[(step / SDPA TFLOPS, the step's record)] over the benchmarks both ran, lowest first."""
    out = []
    for rec in _attention(records, gpu, step, dtype, mask):
        base = _rec(records, gpu, SDPA_BASELINE, rec.name)
        if base is not None and base.tflops > 0:
            out.append((rec.tflops / base.tflops, rec))
    return sorted(out, key=lambda x: (x[0], x[1].name))


def _problem_set(recs: list[fr.Record]) -> str:
    """'fp16 and bf16, D = 64 and 128, N = 2048 to 16384, with and without the causal mask'."""
    dims = sorted({r.head_dim for r in recs if r.head_dim})
    ns = sorted({r.seqlen for r in recs if r.seqlen})
    masks = {r.mask for r in recs}
    parts = [_dtypes_of(recs)]
    if dims:
        parts.append("D = " + and_list([str(d) for d in dims]))
    if ns:
        parts.append(f"N = {ns[0]}" if len(ns) == 1 else f"N = {ns[0]} to {ns[-1]}")
    parts.append("with and without the causal mask" if masks == {"full", "causal"}
                 else ("unmasked" if masks == {"full"} else "causal") + " only")
    return ", ".join(parts)


def _per_mask(ratios, target: float | None = None) -> list[dict]:
    out = []
    for m in ("full", "causal"):
        values = [x for x, r in ratios if r.mask == m]
        if values:
            out.append({"mask": m, "how": "without a mask" if m == "full" else
                        "with the causal mask", "count": len(values), "low": r2(values[0]),
                        "high": r2(values[-1]), "geomean": r2(_geomean(values)),
                        "met": sum(1 for x in values if target is not None and x >= target)})
    return out


def sdpa_run(records, runs: dict[str, list] | None, step: str) -> str | None:
    """The same-run set (``runs/<name>/``) that holds the very file published for @p step (the
    same commit and date in its context: the published file is a copy of the set's) and SDPA
    files of the same session, so that the step is compared with the SDPA measured beside it;
    None when no set does (the published files of results/<gpu>/ are used then)."""
    def stamp(r):
        return r.context.get("git_commit"), r.context.get("date")
    published = {stamp(r) for r in records if r.step == step}
    for name in sorted(runs or {}):
        recs = runs[name]
        if any(r.step == SDPA_BASELINE for r in recs) and any(
                r.step == step and stamp(r) in published for r in recs):
            return name
    return None


def sdpa(records, step: str) -> list[dict]:
    out = []
    for gpu, title in _gpus(records):
        ratios = _sdpa_ratios(records, gpu, step)
        if not ratios:
            continue
        mine, base = _rec(records, gpu, step, HEADLINE), _rec(records, gpu, SDPA_BASELINE, HEADLINE)
        out.append({"title": title, "count": len(ratios),
                    "problems": _problem_set([r for _, r in ratios]),
                    "tflops": fr.fmt_tflops(mine.tflops) if mine and base else None,
                    "base_tflops": fr.fmt_tflops(base.tflops) if mine and base else None,
                    "ratio": r2(mine.tflops / base.tflops) if mine and base else None,
                    "masks": _per_mask(ratios)})
    return out


def versus(records, step: str, spec: dict) -> list[dict]:
    """Per GPU and mask: the step's TFLOPS over ``spec["versus"]``'s (a step or a baseline)
    at every attention benchmark both ran with N >= ``spec["min_seqlen"]``: count, lowest
    (and where), highest, geometric mean, and how many meet ``spec["goal"]`` (if any)."""
    out = []
    for gpu, title in _gpus(records):
        ratios = []
        for rec in _attention(records, gpu, step):
            ref = _rec(records, gpu, spec["versus"], rec.name)
            if ref is not None and ref.tflops > 0 and (rec.seqlen or 0) >= spec["min_seqlen"]:
                ratios.append((rec.tflops / ref.tflops, rec))
        if not ratios:
            continue
        ratios.sort(key=lambda x: (x[0], x[1].name))
        masks = _per_mask(ratios, spec["goal"])
        for m in masks:
            worst = min(((x, r) for x, r in ratios if r.mask == m["mask"]), key=lambda t: t[0])[1]
            m["worst"] = worst.name
        values = [x for x, _ in ratios]
        out.append({"title": title, "count": len(ratios), "problems": _problem_set([r for _, r in ratios]),
                    "versus": spec["versus"], "goal": spec["goal"], "geomean": r2(_geomean(values)),
                    "low": r2(values[0]), "high": r2(values[-1]),
                    "met": sum(1 for x in values if spec["goal"] is not None and x >= spec["goal"]),
                    "masks": masks})
    return out


def sdpa_target(records, step: str, target: float) -> dict:
    gpus = []
    for gpu, title in _gpus(records):
        ratios = _sdpa_ratios(records, gpu, step)
        if not ratios:
            continue
        values = [x for x, _ in ratios]
        met = [r.name for x, r in ratios if x >= target]
        gpus.append({"title": title, "count": len(values), "met": len(met),
                     "met_names": met, "problems": _problem_set([r for _, r in ratios]),
                     "low": r2(ratios[0][0]), "low_name": ratios[0][1].name,
                     "high": r2(ratios[-1][0]), "high_name": ratios[-1][1].name,
                     "geomean": r2(_geomean(values)), "masks": _per_mask(ratios, target)})
    return {"target": f"{target:.1f}", "gpus": gpus}


def causal_target(records, spec: dict = CAUSAL_TARGET) -> dict:
    step, versus, n, goal = spec["step"], spec["versus"], spec["seqlen"], spec["speedup"]
    gpus = []
    for gpu, title in _gpus(records):
        points = []
        for dtype in spec["dtypes"]:
            for d in spec["head_dims"]:
                name = f"attention/{dtype}/hd{d}/n{n}/causal"
                mine, ref = _rec(records, gpu, step, name), _rec(records, gpu, versus, name)
                if mine is not None and ref is not None:
                    ratio = mine.tflops / ref.tflops
                    points.append({"dtype": dtype, "d": d, "ratio": r2(ratio), "value": ratio,
                                   "tflops": fr.fmt_tflops(mine.tflops),
                                   "versus_tflops": fr.fmt_tflops(ref.tflops)})
        if points:
            low = min(p["value"] for p in points)
            gpus.append({"title": title, "points": points, "count": len(points),
                         "met": sum(1 for p in points if p["value"] >= goal), "low": r2(low)})
    return {"step": step, "versus": versus, "n": n, "goal": f"{goal:g}", "gpus": gpus}


def timing(records) -> list[dict]:
    """Per GPU: the steps timed one call per event pair (their JSON has no
    ``calls_per_timing`` counter) and those timed in batches, with the batch sizes."""
    out = []
    for gpu, title in _gpus(records):
        single, batched, counts = [], [], []
        for step in sorted({r.step for r in records if r.gpu == gpu and not r.is_baseline},
                           key=fr.step_sort_key):
            mine = [r for r in records if r.gpu == gpu and r.step == step and not r.skipped]
            values = [r.counters["calls_per_timing"] for r in mine
                      if "calls_per_timing" in r.counters]
            if values:
                batched.append(step)
                counts += values
            elif mine:
                single.append(step)
        if single or batched:
            lo, hi = (int(min(counts)), int(max(counts))) if counts else (0, 0)
            out.append({"title": title, "single": single, "batched": batched,
                        "calls": f"{lo}" if lo == hi else f"{lo} to {hi}", "max_calls": hi})
    return out


def shape_words(name: str) -> str:
    """'m128_n64_w4_s2' -> '128 × 64 × 4' (BLOCK_M × BLOCK_N × warps)."""
    m = re.match(r"m(\d+)_n(\d+)_w(\d+)", name)
    return f"{m[1]} × {m[2]} × {m[3]}" if m else name


def fa2_shapes(heuristic: dict[int, str] | None) -> dict:
    """Step 05's fixed NVIDIA shapes (the heuristic of the tuned step) against
    FlashAttention-2's launch template (:data:`FA2_SHAPES`), per compiled head dim: which
    agree and which do not (BLOCK_M × BLOCK_N × warps; stages are not compared)."""
    rows = []
    for d, ours in sorted((heuristic or {}).items()):
        theirs = FA2_SHAPES.get(d)
        if theirs is None:
            continue
        rows.append({"d": d, "ours": shape_words(ours), "fa2": shape_words(theirs),
                     "a100": shape_words(FA2_SHAPES_A100[d]) if d in FA2_SHAPES_A100 else None,
                     "same": ours.startswith(theirs + "_")})
    return {"source": FA2_SOURCE, "dims": rows,
            "same": [r for r in rows if r["same"]], "differ": [r for r in rows if not r["same"]]}


def overview(records, ceilings, steps: list) -> list[dict]:
    """The front page's table, per GPU: per step (and the SDPA flash baseline) TFLOPS on
    :data:`HEADLINE`, speed-up over the base step, over PyTorch SDPA's flash backend, share
    of the measured dense bf16 GEMM ceiling, and :data:`STEP_LIMITS`."""
    out = []
    for gpu, title in _gpus(records):
        gemm = _ceiling(ceilings, gpu, "bf16_gemm")
        flash = _rec(records, gpu, SDPA_BASELINE, HEADLINE)
        rows = []
        for i, s in enumerate(steps):
            rec = _rec(records, gpu, s.number, HEADLINE)
            ref = _rec(records, gpu, s.base, HEADLINE) if s.base else None
            # Against another step than the row above (a branch, or steps between not measured yet).
            over = f" (over {s.base})" if ref and i and steps[i - 1].number != s.base else ""
            name = getattr(s, "name", None) or s.number
            rows.append({
                "step": s.number, "page": f"steps/{name}.md", "label": name.replace("_", " "),
                "title": name.partition("_")[2].replace("_", " "), "base": s.base,
                "tflops": fr.fmt_tflops(rec.tflops) if rec else "n/a",
                "ratio": (pr.fmt_sig(rec.tflops / ref.tflops) + "×" + over if rec and ref else "–"),
                "sdpa": (pr.fmt_sig(rec.tflops / flash.tflops, 2) + "×" if rec and flash
                         else "–"),
                "gemm": (pr.fmt_pct(rec.tflops / gemm.value) if rec and gemm else "–"),
                "limit": STEP_LIMITS.get(s.number, "see its chapter")})
        if flash is not None:
            rows.append({"step": None, "page": None, "label": flash.step_name,
                         "tflops": fr.fmt_tflops(flash.tflops), "ratio": "–", "sdpa": "1.00×",
                         "gemm": pr.fmt_pct(flash.tflops / gemm.value) if gemm else "–",
                         "limit": "the baseline (FlashAttention-2)"})
        out.append({"title": title, "gpu": gpu, "rows": rows,
                    "gemm": f"{gemm.value:g}" if gemm else None})
    return out


def library_build(records) -> list[dict]:
    """Per GPU: the Google Benchmark build type its JSON files record
    (context ``library_build_type``) and which steps' files say 'debug'."""
    out = []
    for gpu, title in _gpus(records):
        debug = sorted({r.step for r in records if r.gpu == gpu
                        and str(r.context.get("library_build_type", "")).lower() == "debug"},
                       key=fr.step_sort_key)
        out.append({"title": title, "debug": [s for s in debug if not fr.is_baseline(s)]})
    return out


def tuning(tables: list, heuristic: dict[int, str] | None) -> list[dict]:
    """What each checked-in tuning table (``plot_search_space.Table``) holds: keys, choices,
    the spread of one key, and on NVIDIA how often the choice is the heuristic shape."""
    out = []
    for table in tables:
        entries = table.entries
        if not entries:
            continue
        meta = table.meta
        dims = sorted({e.shape.head_dim for e in entries})
        spreads = [e.spread for e in entries]
        item = {"devices": ", ".join(table.devices), "file": table.path.name,
                "date": meta["date"][:10] if meta.get("date") else None,
                "commit": meta["git_commit"][:12] if meta.get("git_commit") else None,
                "n_keys": len(entries), "dtypes": ", ".join(table.dtypes),
                "head_dims": ", ".join(str(d) for d in dims),
                "timed_per_dim": [{"d": d, "count": len({c for e in entries if e.shape.head_dim == d
                                                         for c in e.median_ms})} for d in dims],
                "chosen": len({e.choice for e in entries}),
                "timed": len({c for e in entries for c in e.median_ms}),
                "spread_low": r2(min(spreads)), "spread_high": r2(max(spreads)),
                "heuristic": None, "fa2": []}
        if heuristic and all(dev.startswith("NVIDIA") for dev in table.devices):
            kept, gains, per = 0, [], []
            for d in dims:
                mine = [e for e in entries if e.shape.head_dim == d]
                h = heuristic.get(d)
                if h is None or not all(h in e.median_ms for e in mine):
                    continue
                k = sum(1 for e in mine if e.choice == h)
                kept += k
                per.append({"d": d, "kept": k, "n_keys": len(mine)})
                gains += [e.median_ms[h] / e.median_ms[e.choice] for e in mine if e.choice != h]
            fa2 = []
            for d in dims:
                theirs = FA2_SHAPES.get(d)
                mine = [e for e in entries if e.shape.head_dim == d]
                if theirs is None or not any(c.startswith(theirs + "_") for e in mine
                                             for c in e.median_ms):
                    continue
                fa2.append({"d": d, "shape": shape_words(theirs), "n_keys": len(mine),
                            "chosen": sum(1 for e in mine if e.choice.startswith(theirs + "_")),
                            "heuristic": (heuristic or {}).get(d, "").startswith(theirs + "_")})
            item["fa2"] = fa2
            if per:
                item["heuristic"] = {
                    "kept": kept, "per_dim": per,
                    "gain_low": r2(min(gains)) if gains else None,
                    "gain_high": r2(max(gains)) if gains else None,
                    "overlapped": sum(1 for e in entries if e.choice.endswith("_ov"))}
        out.append(item)
    return out


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




def _occupancy(p: Profile) -> dict:
    blocks, why = _blocks_per_sm_limits(p)
    return {"pct": f"{p.metric('Theoretical Occupancy'):.1f}",
            "warps": f"{p.metric('Theoretical Active Warps per SM'):g}",
            "per_scheduler": (f"{p.warps_per_scheduler:g}"
                              if p.warps_per_scheduler is not None else None),
            "blocks": blocks, "limited_by": and_list(why)}


def profile(profiles: list[Profile], titles: dict[str, str], pair=PROFILE_PAIR) -> dict:
    """Step against FlashAttention-2, per GPU with both reports: the launches and their
    occupancy; instructions, IPC and cycles between issues; fixed-latency stalls."""
    gpus = []
    for gpu, mine, theirs in _profile_pairs(profiles, pair):
        kernels = []
        for label, p in zip(PROFILE_LABELS, (mine, theirs)):
            kernels.append({
                "label": label, "source": p.source, "config": p.config,
                "blocks": f"{p.grid[0] * p.grid[1] * p.grid[2]:,}",
                "threads": p.block[0] * p.block[1] * p.block[2],
                "occupancy": _occupancy(p),
                "instructions": f"{p.metric('Executed Instructions'):,.0f}",
                "ipc": r2(p.metric("Executed Ipc Active")),
                "cycles_per_issue": r2(p.metric("Warp Cycles Per Issued Instruction")),
                "fp32": f"{sum(p.fp32):,}" if p.fp32 else None,
                "fused": f"{p.fp32[0]:,}" if p.fp32 else None,
                "duration": (f"{p.metrics['Duration']:g} {p.units.get('Duration', '')}".strip()
                             if p.metrics.get("Duration") else None),
                "fixed_latency_pct": (f"{p.fixed_latency_pct:.1f}"
                                      if p.fixed_latency_pct is not None else None)})
        n0, n1 = mine.metric("Executed Instructions"), theirs.metric("Executed Instructions")
        f0 = sum(mine.fp32) if mine.fp32 else 0
        f1 = sum(theirs.fp32) if theirs.fp32 else 0
        clock = mine.metrics.get("SM Frequency")
        gpus.append({
            "title": titles.get(gpu, f"`{gpu}`"), "problem": _problem_of_stem(mine.stem),
            "beside": Path(theirs.source).parent == Path(mine.source).parent,
            "clock": f"{clock:.2f}" if clock else None,
            "commit": mine.commit[:12] if mine.commit else None,
            "mine": kernels[0], "theirs": kernels[1],
            "same_launch": (kernels[0]["blocks"], kernels[0]["threads"])
            == (kernels[1]["blocks"], kernels[1]["threads"]),
            "same_shape": bool(mine.config and theirs.config
                               and mine.config.startswith(theirs.config + "_")),
            "same_occupancy": kernels[0]["occupancy"] == kernels[1]["occupancy"],
            "instructions_ratio": r2(n1 / n0),
            "extra_instructions": f"{n1 - n0:,.0f}" if n1 > n0 and f1 > f0 else None,
            "extra_fp32": f"{f1 - f0:,}" if n1 > n0 and f1 > f0 else None})
    return {"pair": list(pair), "labels": list(PROFILE_LABELS), "gpus": gpus}


@dataclass(frozen=True)
class _StepRef:
    number: str
    base: str | None


def measured_base(records, steps: list, step) -> str | None:
    """The step ``step``'s speed-ups are given against: its base when the results hold it,
    else the nearest measured step down its chain of bases (step 04 against step 03 while the
    steps between them, 04a and 04b, are not measured yet); its base when none is."""
    by_number = {s.number: s for s in steps}
    measured = {r.step for r in records}
    base = step.base
    while base is not None and base not in measured and by_number.get(base) is not None:
        base = by_number[base].base
    return base if base is not None else step.base


def _vendor(gpu: str) -> str:
    return "amd" if gpu.startswith(("amd", "mi")) else "nvidia"


def facts(records: list[fr.Record], ceilings: list[fr.Ceiling], points: list[pr.Point],
          steps: list, tuning_tables: dict[str, list] | None = None,
          profiles: list[Profile] | None = None, runs: dict[str, list] | None = None) -> dict:
    """The context every chapter is rendered with. ``steps``: the book's steps
    (``step_registry.Step``: ``number`` and ``base``); ``tuning_tables``: per step number,
    the tables of its ``tuned/`` folder (``plot_search_space.load_tables``); ``profiles``:
    the Nsight Compute text reports (:func:`load_profiles`); ``runs``: the same-run sets
    (``flashsteps_results.load_runs``) a :data:`VERSUS` goal with a ``run`` is judged on."""
    titles = dict(_gpus(records))
    out: dict = {"headline_benchmark": HEADLINE, "sdpa_baseline": SDPA_BASELINE,
                 "sdpa_label": SDPA_LABEL,
                 "sdpa_name": next((r.step_name for r in records if r.step == SDPA_BASELINE),
                                   "PyTorch SDPA flash"),
                 "ridges": ridges(ceilings), "tc_vs_fma": tc_vs_fma(ceilings),
                 "naive_model": naive_model(ceilings),
                 "rescale": rescale_count.summary(), "clock_peak": clock_peak(records),
                 "causal_saves": f"{CAUSAL_SAVES:g}", "library_build": library_build(records),
                 "timing": timing(records)}
    if steps and isinstance(steps[0], str):  # bare numbers: each based on the one before
        steps = [_StepRef(n, steps[i - 1] if i else None) for i, n in enumerate(steps)]
    numbers = {s.number for s in steps}
    out["causal_time"] = causal_time(records, steps)
    steps = [dataclasses.replace(s, base=measured_base(records, steps, s)) for s in steps]
    out["overview"] = overview(records, ceilings, steps)
    out["step_pages"] = [f"steps/{getattr(s, 'name', None) or s.number}" for s in steps]
    for s in steps:
        num, base = s.number, s.base
        # The records of the run that holds the step's published file and SDPA beside it, else all.
        same_run = (runs or {}).get(sdpa_run(records, runs, num) or "", []) or records
        v: dict = {"number": num, "base": base,
                   "headline": headline(records, num, base),
                   "speedups": speedups(records, num, base),
                   "speedups_full": speedups(records, num, base, "full"),
                   "speedups_causal": speedups(records, num, base, "causal"),
                   "fma": against_ceiling(records, ceilings, num, "fp32_fma"),
                   "fma_target": f"{100 * FMA_TARGET:.0f}",
                   "gemm": against_ceiling(records, ceilings, num, "bf16_gemm"),
                   "causal": causal(records, num), "roofline": roofline(points, ceilings, num),
                   "sdpa": sdpa(same_run, num)}
        if num in SDPA_TARGETS:  # judged on the same run as "sdpa" above
            v["sdpa_target"] = sdpa_target(same_run, num, SDPA_TARGETS[num])
        for key, spec in VERSUS.get(num, {}).items():
            run = spec.get("run")
            v[f"versus_{key}"] = versus((runs or {}).get(run, []) if run else records, num, spec)
            if run:
                v[f"versus_{key}_run"] = run
        if num == CAUSAL_TARGET["step"] and CAUSAL_TARGET["versus"] in numbers:
            v["causal_target"] = causal_target(records)
        tables = (tuning_tables or {}).get(num)
        if tables is not None or getattr(s, "tuned", None) is not None:  # a tuned/ folder
            v["tuning"] = tuning(tables or [], HEURISTIC_NVIDIA.get(num))
        if num in HEURISTIC_NVIDIA:
            v["fa2_shapes"] = fa2_shapes(HEURISTIC_NVIDIA[num])
        if num == PROFILE_STEP:
            v["profile"] = profile(profiles or [], titles)
        out[f"step{num}"] = v
    return out
