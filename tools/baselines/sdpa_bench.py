#!/usr/bin/env python3
"""PyTorch SDPA on the FlashSteps standard problems, as baseline result files.

Times ``torch.nn.functional.scaled_dot_product_attention`` with one backend at a time
(``flash``: the FlashAttention-2 kernels built into PyTorch; ``cudnn``: cuDNN's fused
attention; ``efficient``: the memory-efficient kernels) on the problems of
``standard_problems()`` (common/include/flashsteps/problem.h): B * N = 16384 tokens,
Hq = Hkv = 2048 / D, N = 512 ... 16384, D = 64 and 128, causal off and on, fp16 and bf16;
then, as bench_stepNN's standard set, the real activations of MiniLM
(``minilm/fp16/layers6``: the fixture tests/data/minilm_qkv.json, 6 layers as the batch, 12
heads, N = 128, D = 32, BHSD, the model's own values; ``--no-minilm`` leaves it out).

Each backend gets one file in the Google Benchmark JSON that ``bench_stepNN`` writes:
the same benchmark names (``attention/bf16/hd128/n4096/causal``), the same counters
(TFLOPS, GBps, pct_peak, max_abs_err, rel_fro_err and the problem's shape) and the same
context keys, with ``flashsteps_step`` set to a baseline id that is not a number
(``sdpa-flash``, ``sdpa-cudnn``, ``sdpa-efficient``). tools/results/flashsteps_results.py treats
such a step as a baseline: tools/results/plot_results.py draws it as a dashed reference line next
to the steps, tools/results/results_table.py lists it after them (and, with ``--step NN
--baselines``, as extra columns), tools/results/bench_summary.py as one more column.

    python3 tools/baselines/sdpa_bench.py --results-dir results      # results/<gpu>/sdpa-flash.json ...
    python3 tools/baselines/sdpa_bench.py --out /tmp/sdpa            # /tmp/sdpa/sdpa-flash.json ...
    python3 tools/baselines/sdpa_bench.py --dtype bf16 --head-dim 128 --seqlen 4096 16384 \\
        --backends flash cudnn --min-time 0.2 --repetitions 3

How it measures, per problem: Q, K ~ N(0, 1) and V ~ N(0.5, 1) as our benchmark draws
them (never zeros), from torch's generator seeded with the hash of the benchmark name
that seeds ours (so the same seed, not the same numbers), in the standard set's BSHD
memory layout, passed to SDPA as [B, H, N, D] views (``--layout bhsd``: contiguous
[B, H, N, D] tensors).  Per backend: one call checked against a float64 reference on
five query rows of every (batch, head) (its errors are the max_abs_err and rel_fro_err
counters), then timed by our benchmark's own loop (timed_calls()): ``--warmup`` untimed
calls; batches of calls of about 1 ms, each between two CUDA events behind a GPU wait (0.5 ms
before several calls, longer when Python lags in queueing them), the host waiting for each;
Google Benchmark's sizing of runs, ``--warmup-time`` seconds untimed, then ``--repetitions``
repetitions of at least ``--min-time`` seconds; TFLOPS comes from the median of the
repetitions' times per call. The same loop, not only the same counts: the GPU lowers its
clock under sustained load, and how far depends on how much of the time it computes (an
H200 ran step 09's longest problems at about 1710 MHz and SDPA's earlier bursts of 20
back-to-back calls at 1980 MHz: results/nvidia-h200/runs/clock-regimes-77478c1).  The timed
calls rotate over copies of Q, K and V, as ours do, when one set would sit in L2 (rotated():
a set under twice the L2: the MiniLM problem and the smaller decode caches; O is rotated
with them; Q, K, V and O of a standard problem fill 256 MiB, several times an L2, and get no
copy; ``sdpa_inputs`` in a file's context says so). Files made before that rotation (the
published ones up to commit 08a9377, without the key) timed every call on the same tensors.
``--set decode`` times the decode set instead (``decode_problems()`` of problem.h, what
``bench_stepNN --set decode`` times): Nq = 1 against a K/V cache of Nk = 1024 ... 65536 keys,
B = 1, 8 and 32, Hq = 32 with Hkv = 8 (GQA, passed with ``enable_gqa=True``) and Hkv = 32,
D = 128 and 64, and chunked prefill (Nq = 128, Nk = 8192, causal bottom-right, passed as
``torch.nn.attention.bias.causal_lower_right``). Its inputs are drawn in the dtype directly
(the largest K/V caches would not fit twice in float32), its reference runs one batch at a
time, and its entries add ``us_per_call``: GBps, the bytes of Q, K, V and O over the time, is
the measure there.

    python3 tools/baselines/sdpa_bench.py --set decode --results-dir results   # results/<gpu>/sdpa-flash-decode.json ...

A backend that cannot run a problem (dtype, head size, GPU, PyTorch build) gets an
entry with ``error_occurred`` and PyTorch's reasons, like a skipped step benchmark.

Same tensors (``--flashsteps [STEP ...]``): FlashSteps steps, called from Python through the
module ``flashsteps`` (python/), and the SDPA backends run on the very same Q, K and V
tensors in one process, each timed as above and each checked against one float64 reference
on those tensors (max_abs_err, rel_fro_err), so their errors and speeds compare directly:

    PYTHONPATH=build/cuda/python python3 tools/baselines/sdpa_bench.py --flashsteps 6 7 \\
        --dtype bf16 --head-dim 128 --seqlen 4096 --out /tmp/cmp   # /tmp/cmp/same-tensors.json

PyTorch is optional and never a build or test dependency of FlashSteps: this tool
imports it only inside the functions that measure (its other parts, tested in
tools/results/tests, need the standard library alone).  Run it where a CUDA (or ROCm) build of
PyTorch is installed; it needs nothing else.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

TOKENS = 16384       # B * N of every standard problem
WIDTH = 2048         # Hq * D of every standard problem
SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128)
DTYPES = ("fp16", "bf16")
LAYOUTS = ("bshd", "bhsd")
REPO = Path(__file__).resolve().parents[2]

# Dense fp16/bf16 tensor-core FLOP per clock per SM (CU), as common/src/harness.cu uses
# for the pct_peak counter: sm_80, sm_90; gfx90a, gfx94x.
PEAK_FLOP_PER_CLK = {"sm_80": 2048.0, "sm_90": 4096.0, "gfx90a": 1024.0, "gfx94": 2048.0}

# Errors above these (those of common/src/compare.cpp) are reported on the console.
TOLERANCE = {"fp16": (2e-3, 1e-3), "bf16": (1.6e-2, 8e-3)}  # (max abs x max(1,|ref|), rel Frobenius)


@dataclass(frozen=True)
class Backend:
    """One SDPA backend and how its results are labelled."""

    key: str        # command-line name
    step: str       # flashsteps_step of its result file (a baseline id: not a number)
    label: str      # flashsteps_step_name: the legend and table label
    member: str     # torch.nn.attention.SDPBackend member
    old_flag: str   # keyword of the older torch.backends.cuda.sdp_kernel()
    what: str       # the kernels behind it, in words

    @property
    def filename(self) -> str:
        return f"{self.step}.json"

    def file_for(self, problem_set: str) -> str:
        """The result file of one problem set: ``sdpa-flash.json`` for the standard set,
        ``sdpa-flash-decode.json`` for the decode set (beside it, as bench_stepNN writes
        ``stepNN-decode.json``), so the two sets never overwrite each other."""
        return self.filename if problem_set == "standard" else f"{self.step}-{problem_set}.json"


BACKENDS = {
    "flash": Backend("flash", "sdpa-flash", "PyTorch SDPA flash", "FLASH_ATTENTION",
                     "enable_flash", "FlashAttention-2 kernels compiled into PyTorch"),
    "cudnn": Backend("cudnn", "sdpa-cudnn", "PyTorch SDPA cuDNN", "CUDNN_ATTENTION",
                     "enable_cudnn", "cuDNN fused attention"),
    "efficient": Backend("efficient", "sdpa-efficient", "PyTorch SDPA efficient",
                         "EFFICIENT_ATTENTION", "enable_mem_efficient",
                         "memory-efficient attention kernels (CUTLASS based)"),
}


class Unavailable(Exception):
    """The backend cannot run this problem here; the message says why."""


# ----------------------------------------------------------------------------- problems

@dataclass(frozen=True)
class Problem:
    """One standard problem: Hkv = Hq and Nq = Nk."""

    dtype: str
    head_dim: int
    seqlen: int
    causal: bool

    @property
    def batch(self) -> int:
        return TOKENS // self.seqlen

    @property
    def heads(self) -> int:
        return WIDTH // self.head_dim

    @property
    def name(self) -> str:
        """The benchmark name bench_stepNN gives the same problem."""
        return (f"attention/{self.dtype}/hd{self.head_dim}/n{self.seqlen}/"
                f"{'causal' if self.causal else 'full'}")

    @property
    def elem_bytes(self) -> int:
        return 2  # fp16 and bf16


def standard_problems(dtypes: Iterable[str] = DTYPES, head_dims: Iterable[int] = HEAD_DIMS,
                      seqlens: Iterable[int] = SEQLENS, causal: Iterable[bool] = (False, True),
                      name_filter: str | None = None) -> list[Problem]:
    """The problems in the order bench_stepNN runs them: dtype, D, mask, then N."""
    out = []
    for dtype in dtypes:
        for d in head_dims:
            for c in causal:
                for n in seqlens:
                    p = Problem(dtype, d, n, c)
                    if not name_filter or name_filter in p.name:
                        out.append(p)
    return out


@dataclass(frozen=True)
class DecodeProblem:
    """One problem of the decode set (decode_problems() of problem.h): Hq = 32, BSHD."""

    dtype: str
    head_dim: int
    batch: int
    heads_kv: int
    seqlen_q: int
    seqlen_k: int
    causal: bool  # bottom-right: key j is visible to query i when j <= i + Nk - Nq
    heads: int = 32

    @property
    def name(self) -> str:
        """The benchmark name bench_stepNN gives the same problem (decode_name())."""
        return (f"decode/{self.dtype}/hd{self.head_dim}/b{self.batch}/hq{self.heads}/"
                f"hkv{self.heads_kv}/nq{self.seqlen_q}/nk{self.seqlen_k}/"
                f"{'causal' if self.causal else 'full'}")

    @property
    def seqlen(self) -> int:
        return self.seqlen_q

    @property
    def elem_bytes(self) -> int:
        return 2


@dataclass(frozen=True)
class MiniLmProblem:
    """The real-activation problem bench_stepNN times beside the standard set: Q, K, V of
    every layer and head of all-MiniLM-L6-v2 on a public-domain text (tests/data/
    minilm_qkv.json and .bin, fp16, [layers, heads, N, D]), the layers as the batch, BHSD, no
    mask, the model's scale 1 / sqrt(D), which is SDPA's default."""

    json_path: str
    layers: int
    heads: int
    seqlen: int
    head_dim: int
    dtype: str = "fp16"
    causal: bool = False

    @property
    def batch(self) -> int:
        return self.layers

    @property
    def name(self) -> str:
        """The benchmark name bench_stepNN gives it."""
        return f"minilm/fp16/layers{self.layers}"

    @property
    def elem_bytes(self) -> int:
        return 2


MINILM_FIXTURE = REPO / "tests" / "data" / "minilm_qkv.json"


def minilm_problem(json_path: Path = MINILM_FIXTURE) -> MiniLmProblem | None:
    """The MiniLM problem from the fixture's header, or None when the fixture is not there."""
    if not json_path.is_file():
        return None
    head = json.loads(json_path.read_text())
    if head.get("format") != "flashsteps-qkv-v1" or head.get("dtype") != "float16" or head.get("causal"):
        raise ValueError(f"{json_path}: not an fp16, non-causal flashsteps-qkv-v1 fixture")
    return MiniLmProblem(str(json_path), int(head["layers"]), int(head["heads"]), int(head["seqlen"]),
                         int(head["head_dim"]))


DECODE_BATCHES = (1, 8, 32)
DECODE_KEYS = (1024, 4096, 16384, 65536)


def decode_problems(dtypes: Iterable[str] = DTYPES, head_dims: Iterable[int] = (128, 64),
                    name_filter: str | None = None) -> list[DecodeProblem]:
    """The decode set in the order bench_stepNN --set decode runs it: dtype, D (128 first),
    Hkv (8, 32), then B and Nk at Nq = 1, then chunked prefill."""
    out = []
    for dtype in dtypes:
        for d in head_dims:
            for hkv in (8, 32):
                ps = [DecodeProblem(dtype, d, b, hkv, 1, nk, False)
                      for b in DECODE_BATCHES for nk in DECODE_KEYS]
                ps.append(DecodeProblem(dtype, d, 1, hkv, 128, 8192, True))
                out += [p for p in ps if not name_filter or name_filter in p.name]
    return out


def seed_from_name(text: str) -> int:
    """The seed of a benchmark name: seed_from_name() of common/src/problem.cpp, bit for
    bit (FNV-1a over the UTF-8 bytes, with that function's start value)."""
    h = 1469598103934665603
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def visible_pairs(seqlen: int, causal: bool) -> int:
    """(query, key) pairs that are not masked for Nq = Nk; causal counts the diagonal."""
    return seqlen * (seqlen + 1) // 2 if causal else seqlen * seqlen


def visible_pairs_bottom_right(seqlen_q: int, seqlen_k: int) -> int:
    """(query, key) pairs visible under the bottom-right causal mask: row i sees keys
    0 .. i + Nk - Nq (at most Nk of them)."""
    return sum(min(seqlen_k, max(0, i + seqlen_k - seqlen_q + 1)) for i in range(seqlen_q))


def flops(p: Problem | DecodeProblem) -> float:
    """4 * B * Hq * D * visible pairs, as attention_flops() (common/src/attention.cpp)."""
    if isinstance(p, DecodeProblem):
        pairs = (visible_pairs_bottom_right(p.seqlen_q, p.seqlen_k) if p.causal
                 else p.seqlen_q * p.seqlen_k)
        return 4.0 * p.batch * p.heads * p.head_dim * pairs
    return 4.0 * p.batch * p.heads * p.head_dim * visible_pairs(p.seqlen, p.causal)


def min_bytes(p: Problem) -> float:
    """Q, K, V read and O written once, plus the fp32 LSE, as attention_min_bytes() with
    the LSE our benchmark requests. SDPA does not hand its LSE back; counting it anyway
    keeps GBps proportional to TFLOPS across our files and these."""
    if isinstance(p, DecodeProblem):
        elems = p.batch * p.head_dim * (2 * p.heads * p.seqlen_q + 2 * p.heads_kv * p.seqlen_k)
        return p.elem_bytes * float(elems) + 4.0 * p.batch * p.heads * p.seqlen_q
    elems = p.batch * p.heads * p.seqlen * p.head_dim
    return p.elem_bytes * 4.0 * elems + 4.0 * p.batch * p.heads * p.seqlen


def check_rows(seqlen: int) -> list[int]:
    """Query rows checked against the reference, as check_rows() of our benchmark: row 0
    (one visible key under the causal mask), row 1, two inside rows and the last row."""
    rows = {0, min(1, seqlen - 1), seqlen // 3, 2 * seqlen // 3 + 1, seqlen - 1}
    return sorted(r for r in rows if 0 <= r < seqlen)


def refusal_reason(warning_texts: list[str], error: str) -> str:
    """One line from what SDPA says when it refuses: per backend a warning "<X> kernel not
    used because:", then one per reason ("... has been runtime disabled" for the backends
    we switched off), each ending "(Triggered internally at <file>:<line>.)", then the error
    ("No available kernel. Aborting execution."). Keeps the reasons and the error."""
    kept = []
    for text in [*warning_texts, error]:
        text = " ".join(re.sub(r"\(Triggered internally at [^)]*\)", "", text).split())
        if (text and not text.endswith("not used because:")
                and "has been runtime disabled" not in text
                and "deprecated" not in text.lower() and text not in kept):
            kept.append(text)
    return " ".join(kept) or "refused by SDPA (no reason given)"


def peak_tflops(arch: str, units: int, max_clock_mhz: float) -> float:
    """Dense fp16/bf16 tensor-core peak, 0 when the architecture is not in the table."""
    per_clk = PEAK_FLOP_PER_CLK.get(arch) or PEAK_FLOP_PER_CLK.get(arch[:5], 0.0)
    return per_clk * units * max_clock_mhz * 1e6 / 1e12


# ----------------------------------------------------------------------------- JSON

def shape_counters(p: Problem | DecodeProblem) -> dict[str, float]:
    if isinstance(p, DecodeProblem):
        return {"batch": float(p.batch), "heads_q": float(p.heads), "heads_kv": float(p.heads_kv),
                "seqlen_q": float(p.seqlen_q), "seqlen_k": float(p.seqlen_k),
                "head_dim": float(p.head_dim), "causal": float(p.causal)}
    return {"batch": float(p.batch), "heads_q": float(p.heads), "heads_kv": float(p.heads),
            "seqlen_q": float(p.seqlen), "seqlen_k": float(p.seqlen),
            "head_dim": float(p.head_dim), "causal": float(p.causal)}


def entries_for(p: Problem, times_ms: list[float], errors: dict[str, float] | None = None,
                peak: float = 0.0) -> list[dict[str, Any]]:
    """Google Benchmark aggregate entries (mean, median, stddev, cv) of one timed problem.
    Throughput counters come from the mean and the median time; the loader reads the
    median."""
    if not times_ms or any(not (math.isfinite(t) and t > 0) for t in times_ms):
        raise ValueError(f"{p.name}: times must be positive and finite, got {times_ms!r}")
    run_name = f"{p.name}/repeats:{len(times_ms)}/manual_time"
    mean, median = statistics.fmean(times_ms), statistics.median(times_ms)
    stdev = statistics.stdev(times_ms) if len(times_ms) > 1 else 0.0

    def entry(agg: str, value: float, unit: str, counters: dict[str, float]) -> dict:
        return {"name": f"{run_name}_{agg}", "run_name": run_name, "run_type": "aggregate",
                "repetitions": len(times_ms), "threads": 1, "aggregate_name": agg,
                "aggregate_unit": unit, "iterations": len(times_ms), "real_time": value,
                "cpu_time": value, "time_unit": "ms", **counters}

    def throughput(ms: float) -> dict[str, float]:
        tf = flops(p) / (ms / 1e3) / 1e12
        out = {"TFLOPS": tf, "GBps": min_bytes(p) / (ms / 1e3) / 1e9}
        if isinstance(p, DecodeProblem):
            out["us_per_call"] = ms * 1e3
        if peak > 0:
            out["pct_peak"] = 100.0 * tf / peak
        return {**out, **(errors or {}), **shape_counters(p)}

    return [entry("mean", mean, "time", throughput(mean)),
            entry("median", median, "time", throughput(median)),
            entry("stddev", stdev, "time", {}),
            entry("cv", stdev / mean, "percentage", {})]


def skipped_entry(p: Problem, message: str) -> dict[str, Any]:
    """An entry for a problem the backend did not run (what SkipWithError writes)."""
    return {"name": p.name, "run_name": p.name, "run_type": "iteration", "repetitions": 1,
            "repetition_index": 0, "threads": 1, "error_occurred": True,
            "error_message": message, "iterations": 0, "real_time": 0.0, "cpu_time": 0.0,
            "time_unit": "ms"}


def backend_context(backend: Backend, device: dict[str, str], settings: dict[str, str]) -> dict:
    """The file's context: the device keys our benchmark writes plus the baseline's own."""
    ctx: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host_name": socket.gethostname(),
        "executable": "tools/baselines/sdpa_bench.py",
        "num_cpus": os.cpu_count() or 0,
    }
    if hasattr(os, "getloadavg"):
        ctx["load_avg"] = list(os.getloadavg())
    ctx.update(device)
    ctx.update({"flashsteps_step": backend.step, "flashsteps_step_name": backend.label,
                "flashsteps_baseline": "pytorch-sdpa", "sdpa_backend": backend.key,
                "sdpa_kernels": backend.what})
    ctx.update(settings)
    return ctx


def document(context: dict, entries: list[dict]) -> dict:
    return {"context": context, "benchmarks": entries}


def write_json(path: Path, doc: dict) -> None:
    """Writes through a temporary file, so a run cut short leaves the last whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def slugify(text: str) -> str:
    """The GPU folder name bench_stepNN --results-dir uses ("NVIDIA H200" -> nvidia-h200)."""
    out = ""
    for c in text:
        if c.isascii() and c.isalnum():
            out += c.lower()
        elif out and out[-1] != "-":
            out += "-"
    return out.strip("-")


def fmt_cell(tflops: float | None, note: str = "") -> str:
    return f"{'skipped' if tflops is None else f'{tflops:8.1f}'}{note}"


# ----------------------------------------------------------------------------- command line

def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


# The GPU wait before an event pair (torch.cuda._sleep, its cycles timed once per device by
# sleep_cycles_per_s()): 0.5 ms before a batch of several calls, as bench_stepNN's
# gpu_wait_kernel; 0.05 ms before a single call; both longer when the host lags (timed_calls()).
BATCH_WAIT_S = 0.5e-3
SINGLE_WAIT_S = 0.05e-3


@dataclass(frozen=True)
class Timing:
    """How each problem is timed (timed_calls()); the defaults are bench_stepNN's (one untimed
    call, MinWarmUpTime 0.05 s, MinTime 0.2 s, three repetitions)."""
    warmup: int = 1
    warmup_time: float = 0.05
    min_time: float = 0.2
    repetitions: int = 3

    def text(self) -> str:
        return (f"bench_stepNN's loop: {self.warmup} untimed call(s), a batch of calls of about 1 ms per "
                f"pair of CUDA events, each pair behind a GPU wait (0.5 ms before several calls, "
                f"0.05 ms before one, longer when the host lags); Google Benchmark's sizing, "
                f"{self.warmup_time:g} s of warm-up, {self.repetitions} repetitions of at least "
                f"{self.min_time:g} s of calls; median of the repetitions' times per call")


def timing_of(args: argparse.Namespace) -> Timing:
    return Timing(args.warmup, args.warmup_time, args.min_time, args.repetitions)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="PyTorch is needed only to measure; see the module docstring.")
    ap.add_argument("--set", choices=("standard", "decode"), default="standard",
                    help="standard (the papers' set, default) or decode (Nq = 1 and chunked "
                         "prefill; --seqlen and --causal do not apply)")
    ap.add_argument("--dtype", nargs="+", default=list(DTYPES), choices=DTYPES)
    ap.add_argument("--head-dim", nargs="+", type=int, default=list(HEAD_DIMS), choices=HEAD_DIMS)
    ap.add_argument("--seqlen", nargs="+", type=int, default=list(SEQLENS),
                    help="sequence lengths: powers of two from 1 to 16384 (B = 16384 / N)")
    ap.add_argument("--causal", nargs="+", default=["off", "on"], choices=["off", "on"])
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    out = ap.add_mutually_exclusive_group()
    out.add_argument("--out", type=Path, metavar="DIR",
                     help="write DIR/sdpa-<backend>.json (one file per backend; "
                          "sdpa-<backend>-decode.json with --set decode)")
    out.add_argument("--results-dir", type=Path, metavar="DIR",
                     help="write DIR/<gpu>/sdpa-<backend>.json (-decode.json with --set decode), "
                          "beside bench_stepNN's files")
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed calls before the timing starts (default 1, as bench_stepNN)")
    ap.add_argument("--warmup-time", type=float, default=0.05, metavar="S",
                    help="then untimed runs until one lasts S seconds (default 0.05, as bench_stepNN)")
    ap.add_argument("--min-time", type=float, default=0.2, metavar="S",
                    help="seconds of timed calls per repetition (default 0.2, as bench_stepNN)")
    ap.add_argument("--repetitions", type=_positive, default=3,
                    help="repetitions; TFLOPS from the median of their times per call (default 3, "
                         "as bench_stepNN)")
    ap.add_argument("--filter", help="only benchmarks whose name contains this text")
    ap.add_argument("--layout", choices=LAYOUTS, default="bshd",
                    help="memory layout of Q, K, V: bshd (the standard set's, default) or bhsd")
    ap.add_argument("--no-minilm", action="store_true",
                    help="leave out the real-activation problem (MiniLM, fp16, D = 32) that the "
                         "standard set otherwise ends with, as bench_stepNN's does")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the float64 spot check (no error counters)")
    ap.add_argument("--flashsteps", nargs="*", type=int, metavar="STEP",
                    help="same-tensor comparison instead of result files: these FlashSteps steps "
                         "(none listed: every step the module has) and the SDPA backends on the "
                         "very same tensors in one process, each checked against one float64 "
                         "reference; needs the Python module flashsteps on PYTHONPATH "
                         "(build/<preset>/python); --out DIR writes DIR/same-tensors.json")
    args = ap.parse_args(argv)
    bad = [n for n in args.seqlen if n <= 0 or TOKENS % n]
    if bad:
        ap.error(f"--seqlen {bad[0]}: must divide {TOKENS} (a power of two up to {TOKENS})")
    if args.warmup < 0:
        ap.error("--warmup must be >= 0")
    for flag, value in (("--warmup-time", args.warmup_time), ("--min-time", args.min_time)):
        if not (math.isfinite(value) and 0 <= value <= 60):
            ap.error(f"{flag} {value}: must be a number of seconds from 0 to 60")
    return args


def selected_problems(args: argparse.Namespace) -> list[Problem] | list[DecodeProblem]:
    if args.set == "decode":
        dtypes = [d for d in DTYPES if d in args.dtype]
        return decode_problems(dtypes, sorted(set(args.head_dim), reverse=True), args.filter)
    causal = [c == "on" for c in ("off", "on") if c in args.causal]
    dtypes = [d for d in DTYPES if d in args.dtype]
    problems = standard_problems(dtypes, sorted(set(args.head_dim)), sorted(set(args.seqlen)),
                                 causal, args.filter)
    minilm = None if args.no_minilm or "fp16" not in dtypes else minilm_problem()
    if minilm is not None and (not args.filter or args.filter in minilm.name):
        problems.append(minilm)  # last, as bench_stepNN registers it
    return problems


def output_dir(args: argparse.Namespace, gpu_name: str) -> Path | None:
    if args.out is not None:
        return args.out
    if args.results_dir is not None:
        return args.results_dir / slugify(gpu_name)
    return None


# ----------------------------------------------------------------------------- measuring
# Everything below imports torch, lazily.

def _git_commit() -> str:
    """FLASHSTEPS_GIT_COMMIT when set (a copied tree may carry a stale .git), else git's."""
    if os.environ.get("FLASHSTEPS_GIT_COMMIT"):
        return os.environ["FLASHSTEPS_GIT_COMMIT"]
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"],
                              cwd=REPO, capture_output=True, text=True, check=True,
                              timeout=20).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _nvidia_smi(uuid: str | None) -> dict[str, str]:
    """Driver and clocks of the GPU from nvidia-smi ({} when it is not there)."""
    fields = ("driver_version", "clocks.max.sm", "clocks.max.mem", "clocks.sm", "clocks.mem")
    cmd = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    if uuid:
        cmd.append(f"--id={uuid if uuid.startswith('GPU-') else 'GPU-' + uuid}")
    try:
        lines = subprocess.run(cmd, capture_output=True, text=True, check=True,
                               timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        if uuid:  # an older nvidia-smi or a UUID it does not know: the first GPU will do
            return _nvidia_smi(None)
        return {}
    if not lines:
        return {}
    values = [v.strip() for v in lines[0].split(",")]
    if len(values) != len(fields):
        return {}
    raw = dict(zip(fields, values))
    keys = {"driver_version": "driver_version", "clocks.max.sm": "gpu_max_clock_mhz",
            "clocks.max.mem": "gpu_mem_clock_mhz", "clocks.sm": "sm_clock_mhz_at_start",
            "clocks.mem": "mem_clock_mhz_at_start"}
    return {keys[f]: v for f, v in raw.items() if v and not v.startswith("[")}


def device_context(torch) -> tuple[dict[str, str], float]:
    """Context keys describing the current device, and its tensor-core peak (0: unknown)."""
    dev = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(dev)
    hip = getattr(torch.version, "hip", None)
    ctx = {"gpu_name": torch.cuda.get_device_name(dev),
           "sm_count": str(props.multi_processor_count),
           "torch_version": str(torch.__version__), "git_commit": _git_commit()}
    if hip:
        ctx["gpu_vendor"] = "amd"
        ctx["gpu_arch"] = str(getattr(props, "gcnArchName", "unknown")).split(":")[0]
        ctx["runtime_version"] = "HIP " + ".".join(str(hip).split(".")[:2])
        ctx["driver_version"] = "unknown"
        try:
            ctx["driver_version"] = Path("/sys/module/amdgpu/version").read_text().strip()
        except OSError:
            pass
    else:
        ctx["gpu_vendor"] = "nvidia"
        ctx["gpu_arch"] = f"sm_{props.major}{props.minor}"
        ctx["runtime_version"] = f"CUDA {torch.version.cuda}"
        uuid = getattr(props, "uuid", None)
        ctx.update(_nvidia_smi(str(uuid) if uuid else None))
        ctx.setdefault("driver_version", "unknown")
    ctx["runtime_version_note"] = "the runtime PyTorch was built with (torch.version)"
    l2 = getattr(props, "L2_cache_size", None)
    if l2:
        ctx["l2_bytes"] = str(l2)
    try:
        cudnn = torch.backends.cudnn.version()
        if cudnn:
            ctx["cudnn_version"] = str(cudnn)
    except Exception:  # noqa: BLE001 - no cuDNN in this build; not an error
        pass
    peak = 0.0
    try:
        peak = peak_tflops(ctx["gpu_arch"], props.multi_processor_count,
                           float(ctx.get("gpu_max_clock_mhz", "0")))
    except ValueError:
        pass
    if peak > 0:
        ctx["peak_tc_tflops"] = f"{peak:.6f}"
    return ctx, peak


def sdpa_context(torch, backend: Backend):
    """A context manager that lets SDPA use ``backend`` alone. Raises Unavailable when this
    PyTorch has no such backend."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # PyTorch < 2.3: the older, now deprecated switch
        flags = {"enable_flash": False, "enable_math": False, "enable_mem_efficient": False}
        flags[backend.old_flag] = True
        try:
            return torch.backends.cuda.sdp_kernel(**flags)
        except TypeError as exc:
            raise Unavailable(f"PyTorch {torch.__version__} has no {backend.key} SDPA "
                              f"backend ({exc})") from None
    member = getattr(SDPBackend, backend.member, None)
    if member is None:
        raise Unavailable(f"PyTorch {torch.__version__} has no SDPBackend.{backend.member}")
    return sdpa_kernel([member])


def make_inputs(torch, p: Problem, layout: str):
    """Q, K, V as [B, H, N, D] tensors (views of [B, N, H, D] storage for bshd). The MiniLM
    problem is the fixture's own values, BHSD whatever the layout (as bench_stepNN runs it)."""
    if isinstance(p, MiniLmProblem):
        import numpy as np
        head = json.loads(Path(p.json_path).read_text())
        raw = np.fromfile(Path(p.json_path).parent / head["bin"], dtype=np.float16)
        qkv = torch.from_numpy(raw.reshape(3, p.layers, p.heads, p.seqlen, p.head_dim).copy())
        return [t.to("cuda") for t in qkv]
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[p.dtype]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed_from_name(p.name) & 0x7FFFFFFFFFFFFFFF)
    if isinstance(p, DecodeProblem):  # drawn in the dtype: the largest caches are tens of GB
        out = []
        for heads, n, offset in ((p.heads, p.seqlen_q, 0.0), (p.heads_kv, p.seqlen_k, 0.0),
                                 (p.heads_kv, p.seqlen_k, 0.5)):
            shape = (p.batch, n, heads, p.head_dim) if layout == "bshd" else \
                (p.batch, heads, n, p.head_dim)
            t = torch.randn(shape, device="cuda", dtype=dtype, generator=gen)
            if offset:
                t.add_(offset)
            out.append(t.transpose(1, 2) if layout == "bshd" else t)
        return out
    shape = (p.batch, p.seqlen, p.heads, p.head_dim) if layout == "bshd" else \
        (p.batch, p.heads, p.seqlen, p.head_dim)
    out = []
    for offset in (0.0, 0.0, 0.5):  # V is offset so O stays away from zero (as ours)
        t = torch.randn(shape, device="cuda", dtype=torch.float32, generator=gen)
        t = (t + offset).to(dtype)
        out.append(t.transpose(1, 2) if layout == "bshd" else t)
    return out


def reference_rows(torch, q, k, v, causal: bool, rows: list[int]):
    """float64 attention output at query ``rows`` of every (batch, head): [B, H, r, D].
    GQA (fewer K/V heads): query head h reads K/V head h / (Hq / Hkv). Causal is the
    bottom-right mask (the same as top-left when Nq = Nk). One batch at a time."""
    if k.shape[1] != q.shape[1] or k.shape[2] != q.shape[2] or q.shape[0] > 1:
        outs = []
        for b in range(q.shape[0]):
            kb = k[b:b + 1].repeat_interleave(q.shape[1] // k.shape[1], dim=1)
            vb = v[b:b + 1].repeat_interleave(q.shape[1] // v.shape[1], dim=1)
            outs.append(_reference_rows_mha(torch, q[b:b + 1], kb, vb, causal, rows))
        return torch.cat(outs, dim=0)
    return _reference_rows_mha(torch, q, k, v, causal, rows)


def _reference_rows_mha(torch, q, k, v, causal: bool, rows: list[int]):
    idx = torch.tensor(rows, device=q.device)
    qr = q.index_select(2, idx).double()
    s = torch.matmul(qr, k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:  # key j is visible to query i when j <= i + Nk - Nq (bottom-right)
        keys = torch.arange(k.shape[2], device=q.device)
        s = s.masked_fill(keys[None, :] > idx[:, None] + (k.shape[2] - q.shape[2]), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v.double())


def error_counters(torch, out, ref, rows: list[int]) -> dict[str, float]:
    """max_abs_err and rel_fro_err of ``out`` at ``rows`` (as compare() in compare.cpp),
    plus the largest |reference| for the tolerance. Raises Unavailable on NaN or inf."""
    idx = torch.tensor(rows, device=out.device)
    o = out.index_select(2, idx).double()
    diff = o - ref
    ref2 = float(torch.sum(ref * ref))
    diff2 = float(torch.sum(diff * diff))
    if not bool(torch.isfinite(o).all()):
        raise Unavailable("MISMATCH: NaN or inf in the output at the checked rows")
    return {"max_abs_err": float(diff.abs().max()),
            "rel_fro_err": math.sqrt(diff2 / ref2) if ref2 > 0 else math.sqrt(diff2),
            "_max_abs_ref": float(ref.abs().max())}


def copies_against_l2(set_bytes: float, l2_bytes: int) -> int:
    """How many sets of tensors the timed calls rotate over so that consecutive calls find none
    of theirs in L2: enough that the sets together reach twice the L2, at most 64 (the
    benchmark's rule, bench/bench_attention.cu, whose bytes are attention_min_bytes(): Q, K,
    V, O and the LSE). 1 when the L2 is unknown."""
    if l2_bytes <= 0:
        return 1
    return int(min(64.0, math.ceil(2.0 * l2_bytes / max(set_bytes, 1.0))))


INPUTS_ROTATED = ("the timed calls rotate over copies of Q, K, V and O until the copies reach twice the "
                  "L2 (at most 64; bench_stepNN's rule, attention_min_bytes)")


def rotated(torch, call, q, k, v):
    """``call`` wrapped to take, at each call, the next of enough copies of q, k and v that
    they do not sit in L2 (copies_against_l2 on the benchmark's bytes: Q, K, V, O and a float32
    LSE per query row; copies keep the strides, so the layout holds), and to keep each copy's
    output until that copy's next call, so that the allocator hands the call the memory of the
    output n calls back and O rotates too. The first set is the caller's tensors. Returns the
    wrapped call and n. Raises Unavailable when the copies do not fit."""
    props = torch.cuda.get_device_properties(q.device)
    set_bytes = (sum(t.numel() * t.element_size() for t in (q, k, v)) + q.numel() * q.element_size()
                 + 4 * q.shape[0] * q.shape[1] * q.shape[2])  # [B, H, N, D] views: the LSE
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    if l2 <= 0:
        print("warning: the GPU's L2 size is unknown; SDPA's inputs are not rotated", file=sys.stderr)
    n = copies_against_l2(set_bytes, l2)
    try:
        sets = [(q, k, v)] + [(q.clone(), k.clone(), v.clone()) for _ in range(n - 1)]
    except RuntimeError as exc:  # torch.cuda.OutOfMemoryError is one
        raise Unavailable(f"out of memory for {n} copies of the inputs: {str(exc).splitlines()[0]}") from None
    outputs: list[Any] = [None] * n
    turn = itertools.cycle(range(n))

    def next_call():
        i = next(turn)
        outputs[i] = None  # freed first, so this call's output takes its memory
        outputs[i] = call(*sets[i])
        return outputs[i]

    return next_call, n


def run_backend(torch, backend: Backend, q, k, v, causal: bool, timing: Timing):
    """One checked call, then timed_calls() over rotated() copies of the inputs, as the
    benchmark rotates a step's. Returns (first output, times in ms). Raises Unavailable when
    SDPA refuses the backend for these inputs."""
    base_sdpa = torch.nn.functional.scaled_dot_product_attention
    # is_causal=True is SDPA's top-left causal mask; for Nq = Nk it is the same as the
    # bottom-right mask of the standard set (Mask::causal_bottom_right). Nq < Nk (chunked
    # prefill) passes the bottom-right mask itself; fewer K/V heads than query heads, GQA.
    extra: dict[str, Any] = {}
    if k.shape[1] != q.shape[1]:
        extra["enable_gqa"] = True
    if causal and q.shape[2] != k.shape[2]:
        try:
            from torch.nn.attention.bias import causal_lower_right
        except ImportError:
            raise Unavailable(f"PyTorch {torch.__version__} has no causal_lower_right "
                              "(the bottom-right causal mask)") from None
        extra["attn_mask"] = causal_lower_right(q.shape[2], k.shape[2])
        causal = False

    def sdpa(q, k, v, is_causal):
        return base_sdpa(q, k, v, is_causal=is_causal, **extra)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_context(torch, backend):  # one context per use: they are generators
                first = sdpa(q, k, v, is_causal=causal)
                torch.cuda.synchronize()
        except Unavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - any refusal becomes a skipped entry
            oom = getattr(torch.cuda, "OutOfMemoryError", ())
            if oom and isinstance(exc, oom):
                raise Unavailable(f"out of memory: {str(exc).splitlines()[0]}") from None
            last = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise Unavailable(refusal_reason([str(w.message) for w in caught], last)) from None
    with sdpa_context(torch, backend):
        call, _ = rotated(torch, lambda q, k, v: sdpa(q, k, v, is_causal=causal), q, k, v)
        times = timed_calls(torch, call, timing)
    return first, times


def next_iterations(iters: int, seconds: float, min_time: float) -> int:
    """Google Benchmark's next iteration count (1.7, BenchmarkRunner::PredictNumItersNeeded)
    after a run of ``iters`` iterations that took ``seconds``: enough for 1.4 ``min_time`` at
    that rate, at most 10 times more while the run took under a tenth of ``min_time``, at
    least twice as many if the rate says fewer."""
    multiplier = min_time * 1.4 / max(seconds, 1e-9)
    if seconds / min_time <= 0.1:
        multiplier = min(10.0, multiplier)
    if multiplier <= 1.0:
        multiplier = 2.0
    return int(min(0.5 + max(multiplier * iters, iters + 1.0), 1e9))


_SLEEP_CYCLES_PER_S: dict[int, float] = {}


def sleep_cycles_per_s(torch) -> float:
    """The rate at which torch.cuda._sleep counts its cycles on the current device, timed once
    per device with a pair of events (an SM clock on NVIDIA, a fixed counter on AMD)."""
    device = torch.cuda.current_device() if hasattr(torch.cuda, "current_device") else 0
    if device not in _SLEEP_CYCLES_PER_S:
        cycles = 2_000_000
        torch.cuda._sleep(cycles // 10)  # the first launch of the kernel, untimed
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        stop.record()
        stop.synchronize()
        _SLEEP_CYCLES_PER_S[device] = cycles / max(start.elapsed_time(stop) / 1e3, 1e-9)
    return _SLEEP_CYCLES_PER_S[device]


def timed_calls(torch, call, timing: Timing) -> list[float]:
    """The time per call in ms of each of ``timing.repetitions`` repetitions of ``call``,
    timed as bench_stepNN times a step (bench/bench_attention.cu, run_benchmark, under Google
    Benchmark's MinWarmUpTime, MinTime and Repetitions):
    - ``timing.warmup`` untimed calls, then three single calls, each between two CUDA events;
      the batch is enough calls for about 1 ms at the fastest of them (1 to 64);
    - every event pair times one batch, behind a GPU wait (torch.cuda._sleep), and the host
      waits for it before queueing the next;
    - Google Benchmark's sizing: a run of 1 iteration (call), then more
      (next_iterations()) until a run lasts ``timing.warmup_time`` seconds of GPU time,
      untimed; then the same from 1 again until a run lasts ``timing.min_time``, which is
      the first repetition, and the other repetitions run as many calls as it did; a run
      ends with its last whole batch;
    - a repetition's time per call is its pairs' time over its calls.
    The same loop, not only the same counts: the GPU lowers its clock under sustained load,
    and how far depends on how much of the time it computes, so SDPA timed in a burst of 20
    back-to-back calls ran at 1980 MHz where step 09's longest problems ran at about 1710 MHz
    (results/nvidia-h200/runs/clock-regimes-77478c1).

    Where the two loops differ, on purpose: the GPU wait before a batch of several calls is
    the benchmark's 0.5 ms, or longer by twice what the host lags behind the GPU in queueing
    one batch (Python queues an SDPA call more slowly than the benchmark queues a step's, and
    without it the events would time the host); the three sizing calls and every single call
    of 1 ms or more also wait, 0.5 ms and 0.05 ms (the benchmark times their launch, a few
    microseconds, and Python's is longer). And one that is not: ``call`` may rotate its
    inputs (rotated()), so the three sizing calls take the first three copies, where the
    benchmark times all three on its first (on the problems that rotate, calls of a few
    microseconds, the batch is 64 either way)."""
    if not hasattr(torch.cuda, "_sleep"):
        raise RuntimeError("torch.cuda._sleep is missing: sdpa_bench.py needs it to queue each batch "
                           "of calls behind a GPU wait, as bench_stepNN does")
    cycles_per_s = sleep_cycles_per_s(torch)

    def pair(n: int, wait_s: float) -> float:
        torch.cuda._sleep(int(wait_s * cycles_per_s))
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            call()  # its output is kept or dropped by the call (rotated())
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)

    def run(iters: int, batch: int, wait_s: float) -> tuple[float, int]:
        """Whole batches until ``iters`` calls: (seconds of GPU time, calls)."""
        total_ms, calls = 0.0, 0
        while calls < iters:
            total_ms += pair(batch, wait_s)
            calls += batch
        return total_ms / 1e3, calls

    def sized(min_time: float, batch: int, wait_s: float) -> tuple[float, int, int]:
        """Runs of 1, then more iterations until one lasts ``min_time``: that run's (seconds,
        calls, iterations asked for)."""
        iters = 1
        while True:
            seconds, calls = run(iters, batch, wait_s)
            if seconds >= min_time or iters >= 1e9:
                return seconds, calls, iters
            iters = next_iterations(iters, seconds, min_time)

    for _ in range(timing.warmup):
        call()
    fastest_ms = max(min(pair(1, BATCH_WAIT_S) for _ in range(3)), 1e-3)
    batch = min(max(math.ceil(1.0 / fastest_ms), 1), 64)
    host_s = []
    for _ in range(2):  # two untimed batches: how long the host takes to queue one (the faster)
        host_start = time.perf_counter()
        for _ in range(batch):
            call()
        host_s.append(time.perf_counter() - host_start)
        torch.cuda.synchronize()
    lag_s = max(min(host_s) - batch * fastest_ms / 1e3, 0.0)
    wait_s = (BATCH_WAIT_S if batch > 1 else SINGLE_WAIT_S) + 2.0 * lag_s
    if timing.warmup_time > 0:  # as Google Benchmark, no warm-up without a warm-up time
        sized(timing.warmup_time, batch, wait_s)
    seconds, calls, iters = sized(timing.min_time, batch, wait_s)
    times = [seconds * 1e3 / calls]
    for _ in range(timing.repetitions - 1):
        seconds, calls = run(iters, batch, wait_s)
        times.append(seconds * 1e3 / calls)
    return times


def _validate(paths: list[Path]) -> list[str]:
    """Loads the written files with the results loader; returns the problems found."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "results"))
    try:
        import flashsteps_results as fr
    except ImportError:
        return []
    problems = []
    for path in paths:
        try:
            fr.load_file(path)
        except fr.ResultsError as exc:
            problems.append(str(exc))
    return problems


def run_step(torch, flashsteps, step: int, q, k, v, causal: bool, timing: Timing):
    """run_backend() for a FlashSteps step called from Python: one checked call, then
    timed_calls() on the current stream. Raises Unavailable when the step refuses the problem
    (NotImplementedError, ValueError)."""
    try:
        first = flashsteps.attention(q, k, v, step=step, causal=causal)
        torch.cuda.synchronize()
    except (NotImplementedError, ValueError) as exc:
        raise Unavailable(f"step {step:02d}: {exc}") from None
    except torch.cuda.OutOfMemoryError as exc:
        raise Unavailable(f"out of memory: {str(exc).splitlines()[0]}") from None
    call, _ = rotated(torch, lambda q, k, v: flashsteps.attention(q, k, v, step=step, causal=causal), q, k, v)
    return first, timed_calls(torch, call, timing)


def compare_same_tensors(torch, args, problems, backends, device, peak) -> int:
    """--flashsteps: steps and SDPA backends on the same tensors, one table and one JSON."""
    try:
        import flashsteps
    except ImportError as exc:
        print(f"error: the Python module flashsteps is not importable ({exc}); build it (cmake "
              "--preset cuda) and put build/<preset>/python on PYTHONPATH", file=sys.stderr)
        return 2
    built = {s.index: s for s in flashsteps.steps()}
    wanted = args.flashsteps or sorted(built)
    missing = [n for n in wanted if n not in built]
    if missing:
        print(f"error: steps {missing} are not in the module (built: {sorted(built)})", file=sys.stderr)
        return 2
    who = [f"step{n:02d}" for n in wanted] + [b.step for b in backends]
    timing = timing_of(args)
    print(f"Same tensors: FlashSteps steps {wanted} and SDPA {[b.key for b in backends]} on "
          f"{device['gpu_name']} ({device['gpu_arch']}); TFLOPS (median; {timing.text()}) and max "
          f"abs error against float64; layout {args.layout}")
    width = max(len(p.name) for p in problems)
    print(f"{'benchmark':<{width}}" + "".join(f"  {w:>22}" for w in who))
    points, notes, over = [], [], 0
    for p in problems:
        q, k, v = make_inputs(torch, p, args.layout)
        rows = check_rows(p.seqlen)
        ref = reference_rows(torch, q, k, v, p.causal, rows)
        runners = [(f"step{n:02d}", lambda n=n: None if built[n].bench_max_seqlen and
                    p.seqlen > built[n].bench_max_seqlen else
                    run_step(torch, flashsteps, n, q, k, v, p.causal, timing))
                   for n in wanted]
        runners += [(b.step, lambda b=b: run_backend(torch, b, q, k, v, p.causal, timing)) for b in backends]
        results, cells = [], []
        for name, run in runners:
            entry: dict[str, Any] = {"who": name}
            try:
                got = run()
                if got is None:
                    raise Unavailable(f"{name}: seqlen above the step's benchmark cap")
                out, times = got
                errors = error_counters(torch, out, ref, rows)
                del out
            except Unavailable as exc:
                entry["error"] = str(exc)
                if str(exc) not in notes:
                    notes.append(str(exc))
                results.append(entry)
                cells.append(f"skipped[{notes.index(str(exc)) + 1}]".rjust(22))
                continue
            median = statistics.median(times)
            ref_max = errors.pop("_max_abs_ref")
            abs_tol, rel_tol = TOLERANCE[p.dtype]
            ok = errors["max_abs_err"] <= abs_tol * max(1.0, ref_max) and errors["rel_fro_err"] <= rel_tol
            over += not ok
            entry.update({"median_ms": median, "TFLOPS": flops(p) / (median / 1e3) / 1e12,
                          "repetition_ms_per_call": times, **errors, "within_tolerance": ok})
            if peak > 0:
                entry["pct_peak"] = 100.0 * entry["TFLOPS"] / peak
            results.append(entry)
            cells.append(f"{entry['TFLOPS']:8.1f} {errors['max_abs_err']:9.2e}{' ' if ok else '!'}".rjust(22))
        print(f"{p.name:<{width}}" + "".join(f"  {c}" for c in cells), flush=True)
        points.append({"name": p.name, **shape_counters(p), "dtype": p.dtype, "layout": args.layout,
                       "checked_rows": rows, "results": results})
        del q, k, v, ref
    for i, note in enumerate(notes, 1):
        print(f"[{i}] skipped: {note}")
    if over:
        print(f"! = error above the FlashSteps tolerance of the dtype ({over} entries)")
    if args.out is not None:
        ctx = {**device, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "executable": "tools/baselines/sdpa_bench.py --flashsteps", "flashsteps_backend": flashsteps.backend,
               "steps": {f"step{n:02d}": built[n].summary for n in wanted},
               "timing": timing.text(), "inputs": INPUTS_ROTATED,
               "check": "one float64 reference on the same tensors, query rows 0, 1, N/3, 2N/3+1, N-1 "
                        "of every (batch, head)"}
        path = args.out / "same-tensors.json"
        write_json(path, {"context": ctx, "points": points})
        print(f"results: {path}")
    return 1 if over else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("error: PyTorch is not installed here; sdpa_bench.py needs a CUDA or ROCm "
              "build of torch (nothing else)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("No GPU visible to PyTorch: SDPA not benchmarked.")
        return 0
    problems = selected_problems(args)
    if not problems:
        print("No problem matches the selection.", file=sys.stderr)
        return 2
    backends = [BACKENDS[b] for b in BACKENDS if b in args.backends]
    device, peak = device_context(torch)
    if args.flashsteps is not None:
        return compare_same_tensors(torch, args, problems, backends, device, peak)
    timing = timing_of(args)
    settings = {"sdpa_layout": args.layout, "sdpa_warmup": str(args.warmup),
                "sdpa_repetitions": str(args.repetitions), "sdpa_warmup_time_s": str(args.warmup_time),
                "sdpa_min_time_s": str(args.min_time), "sdpa_timing": timing.text(),
                "sdpa_inputs": INPUTS_ROTATED,
                "sdpa_check": "off" if args.no_check else
                              "float64 reference, query rows 0, 1, N/3, 2N/3+1, N-1 of every "
                              "(batch, head)"}
    contexts = {b.key: backend_context(b, device, settings) for b in backends}
    entries: dict[str, list[dict]] = {b.key: [] for b in backends}
    out_dir = output_dir(args, device["gpu_name"])
    paths = {b.key: out_dir / b.file_for(args.set) for b in backends} if out_dir else {}

    print(f"PyTorch {torch.__version__} on {device['gpu_name']} ({device['gpu_arch']}, "
          f"{device['runtime_version']}); "
          f"{'TB/s (Q, K, V, O bytes over time)' if args.set == 'decode' else 'TFLOPS'}, "
          f"median; {timing.text()}; layout {args.layout}")
    width = max(len(p.name) for p in problems)
    print(f"{'benchmark':<{width}}" + "".join(f"  {b.key:>14}" for b in backends))
    notes: list[str] = []
    over_tolerance = 0
    for p in problems:
        try:
            q, k, v = make_inputs(torch, p, args.layout)
        except RuntimeError as exc:  # out of memory for the inputs: every backend skips
            msg = f"inputs not allocated: {str(exc).splitlines()[0]}"
            for b in backends:
                entries[b.key].append(skipped_entry(p, msg))
            print(f"{p.name:<{width}}  {msg}")
            continue
        rows = check_rows(p.seqlen)  # the query rows (Nq)
        ref = None
        if not args.no_check:
            try:
                ref = reference_rows(torch, q, k, v, p.causal, rows)
            except RuntimeError as exc:  # out of memory: time without the check
                print(f"{p.name}: no spot check ({str(exc).splitlines()[0]})")
        cells = []
        for b in backends:
            errors, mark = None, " "
            try:
                out, times = run_backend(torch, b, q, k, v, p.causal, timing)
                if ref is not None:
                    errors = error_counters(torch, out, ref, rows)
            except Unavailable as exc:
                entries[b.key].append(skipped_entry(p, str(exc)))
                if str(exc) not in notes:
                    notes.append(str(exc))
                cells.append(fmt_cell(None, f"[{notes.index(str(exc)) + 1}]").rjust(14))
                continue
            if errors is not None:
                abs_tol, rel_tol = TOLERANCE[p.dtype]
                ref_max = errors.pop("_max_abs_ref")
                if not (errors["max_abs_err"] <= abs_tol * max(1.0, ref_max)
                        and errors["rel_fro_err"] <= rel_tol):
                    mark, over_tolerance = "!", over_tolerance + 1
            del out
            new = entries_for(p, times, errors, peak)
            entries[b.key].extend(new)
            shown = new[1]["GBps"] / 1e3 if isinstance(p, DecodeProblem) else new[1]["TFLOPS"]
            cells.append(fmt_cell(shown, mark).rjust(14))
        print(f"{p.name:<{width}}" + "".join(f"  {c}" for c in cells), flush=True)
        del q, k, v, ref
        for b in backends:  # after every problem, so a run cut short keeps what it measured
            if b.key in paths:
                write_json(paths[b.key], document(contexts[b.key], entries[b.key]))
    for i, note in enumerate(notes, 1):
        print(f"[{i}] skipped: {note}")
    if over_tolerance:
        print(f"! = error above the FlashSteps tolerance of the dtype ({over_tolerance} "
              "entries; see max_abs_err and rel_fro_err)")
    if paths:
        bad = _validate(list(paths.values()))
        for problem in bad:
            print(f"error: written file does not load: {problem}", file=sys.stderr)
        for path in paths.values():
            print(f"results: {path}")
        if bad:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
