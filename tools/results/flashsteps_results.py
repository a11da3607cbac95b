"""Load and validate FlashSteps benchmark results (Google Benchmark JSON).

Each ``bench_stepNN`` executable writes standard Google Benchmark JSON with a
few extra ``context`` keys (``flashsteps_step``, ``gpu_vendor``, ...).  Result
files live in ``results/<gpu-slug>/<anything>.json``.  This module turns them
into flat :class:`Record` objects, one per benchmark per file, so the plotting
and table tools never touch raw JSON.

Only the standard library is used: the tools that import this module also run
on GPU machines without matplotlib.

A file whose ``flashsteps_step`` is not a number is a *baseline*, measured by another
program on the same problems and names: ``tools/baselines/sdpa_bench.py`` writes PyTorch SDPA's as
``sdpa-flash``, ``sdpa-cudnn`` and ``sdpa-efficient`` (``flashsteps_step_name`` "PyTorch
SDPA flash", ...; ``flashsteps_baseline`` "pytorch-sdpa").  :func:`is_baseline` tells them
apart; the plot draws them as reference lines and the tables list them after the steps.

Typical use::

    from flashsteps_results import load_results
    for r in load_results("results"):
        print(r.gpu, r.step, r.name, r.tflops, r.error)

Two other kinds of result sit beside the benchmark JSON and have their own loaders:

- the roofline ceilings, ``results/<gpu>/ceilings.json`` (fp32 FMA rate and copy
  bandwidth, written by ``tools/ceilings/ceilings.cu``) and ``gemm_ceiling.json`` (dense
  bf16 GEMM, ``tools/ceilings/gemm_ceiling.py``): :func:`load_ceilings`;
  :func:`load_results` skips these two file names;
- Nsight Compute traffic counters, ``results/<gpu>/ncu/stepNN.csv`` (``ncu --csv``):
  :func:`load_ncu`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

VENDORS = ("nvidia", "amd")
VENDOR_LABELS = {"nvidia": "NVIDIA", "amd": "AMD"}
RUNTIME_LABELS = {"nvidia": "CUDA", "amd": "HIP"}

# Context keys every FlashSteps result file must carry (as strings).
REQUIRED_CONTEXT = ("flashsteps_step", "flashsteps_step_name", "gpu_vendor", "gpu_name")
# Context keys shown in footers when present.
INFO_CONTEXT = ("gpu_arch", "sm_count", "driver_version", "runtime_version",
                "gpu_max_clock_mhz", "git_commit", "date")
# User counters written by every benchmark; TFLOPS is required unless skipped.
COUNTERS = ("TFLOPS", "GBps", "pct_peak", "max_abs_err", "rel_fro_err", "batch",
            "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal")
# Keys Google Benchmark itself writes on each entry (not user counters).
_GB_KEYS = {"name", "family_index", "per_family_instance_index", "run_name", "run_type",
            "repetitions", "repetition_index", "threads", "aggregate_name",
            "aggregate_unit", "error_occurred", "error_message", "skipped",
            "skip_message", "iterations", "real_time", "cpu_time", "time_unit",
            "label", "cpu_coefficient", "real_coefficient", "big_o", "rms",
            "allocs_per_iter", "max_bytes_used", "total_allocated_bytes",
            "net_heap_growth"}

# Roofline ceiling files beside the benchmark JSON, and what each holds: per ceiling the key of
# its value, the key of the sentence saying how it was measured, a kind, a label and a unit.
CEILING_FILES = {
    "ceilings.json": (
        ("copy_gbps", "copy_method", "bandwidth", "device-memory bandwidth (copy)", "GB/s"),
        ("fp32_fma_tflops", "fp32_fma_method", "fp32_fma", "fp32 FMA rate (no tensor cores)",
         "TFLOP/s"),
    ),
    "gemm_ceiling.json": (
        ("bf16_gemm_tflops", "bf16_gemm_method", "bf16_gemm", "dense bf16 GEMM (tensor cores)",
         "TFLOP/s"),
    ),
}
CEILING_KINDS = ("bandwidth", "fp32_fma", "bf16_gemm")

_ATTN_RE = re.compile(r"^attention/(fp16|bf16|fp32)/hd(\d+)/n(\d+)/(full|causal)$")
# The decode set (decode_problems() of problem.h): every size is in the name; a split sweep
# (bench_step10 --split-sweep) appends the forced split count, "/splits:<N>".
_DECODE_RE = re.compile(r"^decode/(fp16|bf16|fp32)/hd(\d+)/b(\d+)/hq(\d+)/hkv(\d+)/nq(\d+)/nk(\d+)/(full|causal)"
                        r"(?:/splits:(\d+))?$")
_FIXTURE_RE = re.compile(r"^[A-Za-z0-9_.-]+/(fp16|bf16|fp32)/[A-Za-z0-9_.-]+$")
# Suffixes Google Benchmark may append to a run name (repetitions set in code...).
_GB_SUFFIX_RE = re.compile(
    r"(/(repeats|threads|iterations|min_time|min_warmup_time):[^/]+|/real_time|/manual_time)+$")


class ResultsError(ValueError):
    """A result file is malformed; the message names the file and the field."""

    def __init__(self, path: Path | str, where: str, problem: str):
        super().__init__(f"{path}: {where}: {problem}")
        self.path, self.where, self.problem = str(path), where, problem


@dataclass(frozen=True)
class Record:
    """One benchmark of one step on one GPU (the median over repetitions)."""

    gpu: str                 # results sub-folder (GPU slug), e.g. "nvidia-h200"
    vendor: str              # "nvidia" or "amd"
    step: str                # "01", ... or a baseline id such as "sdpa-flash"
    step_name: str           # "naive", ...
    name: str                # benchmark base name
    kind: str                # "attention" or the fixture family ("minilm")
    dtype: str | None
    head_dim: int | None
    seqlen: int | None
    mask: str | None         # "full" / "causal" for attention benchmarks
    counters: dict[str, float] = field(default_factory=dict)
    splits: int | None = None  # a split sweep's forced count ("/splits:<N>"), else None
    error: str | None = None  # skip reason; counters are then meaningless
    context: dict[str, Any] = field(default_factory=dict, repr=False)
    source: str = ""

    @property
    def tflops(self) -> float | None:
        """TFLOPS, or None when the benchmark was skipped."""
        return None if self.error is not None else self.counters.get("TFLOPS")

    @property
    def skipped(self) -> bool:
        return self.error is not None

    @property
    def is_baseline(self) -> bool:
        return is_baseline(self.step)

    @property
    def step_label(self) -> str:
        return step_label(self.step, self.step_name)


STEP_ID_RE = re.compile(r"\d{2}[a-z]?")


def is_baseline(step: str) -> bool:
    """Numbered steps ("01", or "04a" for a step that climbs to 04) are ours; anything else
    is a baseline to overlay."""
    return not STEP_ID_RE.fullmatch(step)


def step_sort_key(step: str) -> tuple:
    """Numbered steps first in reading order (03, 04a, 04b, 04, 05), then baselines
    alphabetically."""
    return (1, 0, step) if is_baseline(step) else (0, int(step[:2]), step[2:] or "~")


def step_label(step: str, step_name: str) -> str:
    if is_baseline(step) or not step_name:
        return step_name or step
    return f"{step} {step_name}"


def parse_name(name: str) -> dict[str, Any]:
    """Split a benchmark name into kind/dtype/head_dim/seqlen/mask.

    ``attention/bf16/hd128/n4096/causal`` gives every field; a decode-set name such as
    ``decode/bf16/hd128/b8/hq32/hkv8/nq1/nk4096/full`` gives kind "decode" and seqlen = Nk
    (decode_sizes() gives the rest), and "splits": the forced split count of a split sweep's
    ``.../full/splits:8`` (None without it); a fixture such as
    ``minilm/fp16/layers6`` gives its kind and dtype only.  Returns {} when the
    name follows neither pattern.
    """
    m = _ATTN_RE.match(name)
    if m:
        return {"kind": "attention", "dtype": m[1], "head_dim": int(m[2]),
                "seqlen": int(m[3]), "mask": m[4]}
    m = _DECODE_RE.match(name)
    if m:
        return {"kind": "decode", "dtype": m[1], "head_dim": int(m[2]), "seqlen": int(m[7]),
                "mask": m[8], "splits": int(m[9]) if m[9] else None}
    m = _FIXTURE_RE.match(name)
    if m:
        return {"kind": name.split("/")[0], "dtype": m[1], "head_dim": None,
                "seqlen": None, "mask": None}
    return {}


def decode_sizes(name: str) -> dict[str, int] | None:
    """batch, heads_q, heads_kv, seqlen_q, seqlen_k of a decode-set name, else None."""
    m = _DECODE_RE.match(name)
    if not m:
        return None
    return {"batch": int(m[3]), "heads_q": int(m[4]), "heads_kv": int(m[5]),
            "seqlen_q": int(m[6]), "seqlen_k": int(m[7])}


def decode_base(name: str) -> str:
    """A decode-set name without a split sweep's ``/splits:<N>``; other names unchanged."""
    return re.sub(r"/splits:\d+$", "", name) if _DECODE_RE.match(name) else name


def base_name(entry: dict) -> str:
    """The benchmark's base name: ``run_name`` without Google Benchmark suffixes."""
    return _GB_SUFFIX_RE.sub("", entry.get("run_name") or entry.get("name", ""))


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _entry_error(entry: dict) -> str | None:
    if entry.get("error_occurred") or entry.get("skipped"):
        return str(entry.get("error_message") or entry.get("skip_message") or "skipped")
    return None


def _check_context(path: Path, data: Any) -> dict:
    if not isinstance(data, dict):
        raise ResultsError(path, "top level", "expected a JSON object")
    ctx = data.get("context")
    if not isinstance(ctx, dict):
        raise ResultsError(path, "context", "missing or not an object")
    for key in REQUIRED_CONTEXT:
        if not isinstance(ctx.get(key), str) or not ctx[key].strip():
            raise ResultsError(path, f"context.{key}", "missing or not a non-empty string")
    if ctx["gpu_vendor"] not in VENDORS:
        raise ResultsError(path, "context.gpu_vendor",
                           f"expected one of {', '.join(VENDORS)}, got {ctx['gpu_vendor']!r}")
    if not isinstance(data.get("benchmarks"), list):
        raise ResultsError(path, "benchmarks", "missing or not a list")
    return ctx


def _pick_counters(path: Path, where: str, entry: dict) -> dict[str, float]:
    counters = {}
    for key, value in entry.items():
        if key in _GB_KEYS:
            continue
        if not _is_number(value):
            if key in COUNTERS:
                raise ResultsError(path, f"{where}.{key}", f"expected a number, got {value!r}")
            continue
        counters[key] = float(value)
    return counters


def _median_counters(path: Path, where: str, entries: list[dict]) -> dict[str, float]:
    """Counters of the ``median`` aggregate (else ``mean``), else the median of
    the iteration entries' counters."""
    for agg in ("median", "mean"):
        picked = [e for e in entries if e.get("run_type") == "aggregate"
                  and e.get("aggregate_name") == agg]
        if picked:
            return _pick_counters(path, where, picked[0])
    runs = [_pick_counters(path, where, e) for e in entries
            if e.get("run_type", "iteration") == "iteration"]
    keys = sorted(set().union(*runs)) if runs else []
    return {k: statistics.median(r[k] for r in runs if k in r) for k in keys}


def _check_shape(path: Path, where: str, fields: dict, counters: dict) -> None:
    """Counters that restate the name (head_dim, seqlen, causal) must agree with it."""
    if fields["kind"] == "decode":
        expect = {"head_dim": fields["head_dim"], "causal": int(fields["mask"] == "causal"),
                  **decode_sizes(fields["name"])}
    elif fields["kind"] != "attention":
        return
    else:
        expect = {"head_dim": fields["head_dim"], "seqlen_q": fields["seqlen"],
                  "seqlen_k": fields["seqlen"], "causal": int(fields["mask"] == "causal")}
    for key, want in expect.items():
        if key in counters and counters[key] != want:
            raise ResultsError(path, f"{where}.{key}",
                               f"is {counters[key]:g} but the name says {want}")


def load_file(path: Path | str, gpu: str | None = None) -> list[Record]:
    """Read one result file.  ``gpu`` defaults to a slug of the context's GPU name."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(path, "file", f"cannot read JSON ({exc})") from None
    ctx = _check_context(path, data)
    gpu = gpu or slugify(ctx["gpu_name"])

    groups: dict[str, list[dict]] = {}
    for i, entry in enumerate(data["benchmarks"]):
        where = f"benchmarks[{i}]"
        if not isinstance(entry, dict):
            raise ResultsError(path, where, "expected an object")
        if not isinstance(entry.get("run_name", entry.get("name")), str):
            raise ResultsError(path, f"{where}.run_name", "missing or not a string")
        groups.setdefault(base_name(entry), []).append(entry)

    records = []
    for name, entries in groups.items():
        where = f"benchmark {name!r}"
        fields = parse_name(name)
        if not fields:
            raise ResultsError(path, f"{where}.name",
                               "expected attention/<dtype>/hd<D>/n<N>/<full|causal>, "
                               "decode/<dtype>/hd<D>/b<B>/hq<Hq>/hkv<Hkv>/nq<Nq>/nk<Nk>/<full|causal>[/splits:<N>] "
                               "or <fixture>/<dtype>/<variant>")
        ok = [e for e in entries if _entry_error(e) is None]
        error = None if ok else _entry_error(entries[0])
        counters = _median_counters(path, where, ok if ok else entries)
        if error is None:
            tf = counters.get("TFLOPS")
            if tf is None or not math.isfinite(tf):
                raise ResultsError(path, f"{where}.TFLOPS", "missing or not finite "
                                   "(skipped benchmarks must set error_occurred)")
            _check_shape(path, where, {**fields, "name": name}, counters)
        records.append(Record(gpu=gpu, vendor=ctx["gpu_vendor"], step=ctx["flashsteps_step"],
                              step_name=ctx["flashsteps_step_name"], name=name,
                              counters=counters, error=error, context=dict(ctx),
                              source=str(path), **fields))
    return records


def load_results(root: Path | str) -> list[Record]:
    """Load every ``*.json`` under ``root`` (recursively, in sorted order), except the
    ceiling files (:data:`CEILING_FILES`) and the same-run sets under
    ``root/<gpu>/runs/`` (:func:`load_runs`) and the traces of ``root/<gpu>/timeline/``.

    The GPU slug is the first folder below ``root`` (``root/<gpu>/x.json``); files
    directly in ``root`` take ``root``'s own name.  The same benchmark of the same
    step appearing twice for one GPU is an error (which file should win?).
    """
    root = Path(root)
    if not root.is_dir():
        raise ResultsError(root, "results folder", "not a directory")
    records: list[Record] = []
    seen: dict[tuple, str] = {}
    for path in sorted(root.rglob("*.json")):
        if path.name in CEILING_FILES:  # not benchmark output: see load_ceilings()
            continue
        rel = path.relative_to(root)
        if len(rel.parts) > 2 and rel.parts[1] == RUNS_FOLDER:  # see load_runs()
            continue
        if len(rel.parts) > 2 and rel.parts[1] == TIMELINE_FOLDER:  # traces, not benchmarks
            continue
        gpu = rel.parts[0] if len(rel.parts) > 1 else root.resolve().name
        _add_unique(records, seen, path, load_file(path, gpu=gpu))
    return records


def _add_unique(records: list[Record], seen: dict[tuple, str], path: Path, new: list[Record]) -> None:
    """Appends ``new`` (read from ``path``) to ``records``; the same benchmark of the same
    step on the same GPU twice is an error (which file should win?)."""
    for rec in new:
        key = (rec.gpu, rec.step, rec.name)
        if key in seen:
            raise ResultsError(path, f"benchmark {rec.name!r}",
                               f"step {rec.step} on {rec.gpu} already loaded from {seen[key]}")
        seen[key] = str(path)
        records.append(rec)


# A same-run set: results/<gpu>/runs/<name>/*.json, benchmark files of several steps made in
# one run, kept apart from the published files of the same steps (which may come from other
# runs), so that a chapter can compare two steps measured side by side.
RUNS_FOLDER = "runs"
# results/<gpu>/timeline/: one block's phase traces (trace_stepNN, tools/timeline/), drawn
# by the chapters of the Hopper steps; never benchmark records.
TIMELINE_FOLDER = "timeline"


def load_runs(root: Path | str) -> dict[str, list[Record]]:
    """Every same-run set under ``root``: ``{name: records}`` from ``root/<gpu>/runs/<name>/``
    (the records' GPU is ``<gpu>``). A benchmark twice in one set is an error."""
    root = Path(root)
    runs: dict[str, list[Record]] = {}
    for folder in sorted(root.glob(f"*/{RUNS_FOLDER}/*")):
        if not folder.is_dir():
            continue
        seen: dict[tuple, str] = {}
        for path in sorted(folder.glob("*.json")):
            _add_unique(runs.setdefault(folder.name, []), seen, path, load_file(path, gpu=folder.parent.parent.name))
    return runs


def steps_of(records: Iterable[Record]) -> list[tuple[str, str]]:
    """Distinct (step, step_name) pairs in display order."""
    pairs = {(r.step, r.step_name) for r in records}
    return sorted(pairs, key=lambda p: (step_sort_key(p[0]), p[1]))


def gpus_of(records: Iterable[Record]) -> list[tuple[str, str]]:
    """Distinct (vendor, gpu) pairs: NVIDIA first, then AMD, then by slug."""
    return sorted({(r.vendor, r.gpu) for r in records},
                  key=lambda p: (VENDORS.index(p[0]), p[1]))


def fmt_tflops(value: float) -> str:
    """TFLOPS with about three significant digits."""
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def name_sort_key(name: str) -> tuple:
    """Attention benchmarks by dtype, head_dim, seqlen, mask; then the decode set by dtype,
    head_dim, Hkv, Nq, B, Nk; then fixtures by name."""
    f = parse_name(name)
    if f.get("kind") == "decode":
        z = decode_sizes(name)
        return (1, ("fp16", "bf16", "fp32").index(f["dtype"]), -f["head_dim"], z["heads_kv"],
                z["seqlen_q"], z["batch"], z["seqlen_k"], f["splits"] or 0)
    if f.get("kind") != "attention":
        return (2, name)
    return (0, ("fp16", "bf16", "fp32").index(f["dtype"]), f["head_dim"], f["seqlen"],
            f["mask"] == "causal")


def _join(values: Iterable[Any]) -> str:
    vals = sorted({str(v) for v in values if v not in (None, "")})
    return ", ".join(vals) if vals else "?"


def describe_gpu(records: Iterable[Record]) -> str:
    """One line of device context for a GPU's records (distinct values joined)."""
    ctxs = [r.context for r in records]
    if not ctxs:
        return "not measured"

    def each(key: str, width: int = 0) -> str:
        return _join(str(c.get(key) or "")[:width or None] for c in ctxs)

    vendor = ctxs[0]["gpu_vendor"]
    units = "SMs" if vendor == "nvidia" else "CUs"
    dates = sorted({str(c["date"]) for c in ctxs if c.get("date")})
    date = (dates[0] if len(dates) == 1 else f"{dates[0]} … {dates[-1]}") if dates else "?"
    runtime = each("runtime_version")
    if not runtime.startswith(RUNTIME_LABELS[vendor]):  # "13.0" or already "CUDA 13.0"
        runtime = f"{RUNTIME_LABELS[vendor]} {runtime}"
    return (f"{each('gpu_name')} ({each('gpu_arch')}, {each('sm_count')} {units}) · "
            f"driver {each('driver_version')} · {runtime} · "
            f"commit {each('git_commit', 12)} · {date}")


def gpu_title(vendor: str, gpu_name: str) -> str:
    """"NVIDIA H200" for ("nvidia", "NVIDIA H200") and ("nvidia", "H200") alike."""
    label = VENDOR_LABELS[vendor]
    return gpu_name if gpu_name.startswith(label) else f"{label} {gpu_name}"


# ----------------------------------------------------------------------------- ceilings

@dataclass(frozen=True)
class Ceiling:
    """One measured roofline ceiling of one GPU (from ceilings.json or gemm_ceiling.json)."""

    gpu: str          # results sub-folder, e.g. "nvidia-h200"
    kind: str         # "bandwidth", "fp32_fma" or "bf16_gemm"
    label: str        # what it is, in words
    value: float      # in ``unit``
    unit: str         # "GB/s" (bytes read + written) or "TFLOP/s"
    method: str       # how it was measured, as the measuring tool wrote it
    gpu_name: str
    source: str
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # the file's other keys


def load_ceiling_file(path: Path | str, gpu: str) -> list[Ceiling]:
    """The ceilings of one ceilings.json / gemm_ceiling.json; every field is checked."""
    path = Path(path)
    spec = CEILING_FILES.get(path.name)
    if spec is None:
        raise ResultsError(path, "file", f"not a ceiling file ({', '.join(CEILING_FILES)})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(path, "file", f"cannot read JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ResultsError(path, "top level", "expected a JSON object")
    if not isinstance(data.get("gpu_name"), str) or not data["gpu_name"].strip():
        raise ResultsError(path, "gpu_name", "missing or not a non-empty string")
    used = {"gpu_name"}
    out = []
    for value_key, method_key, kind, label, unit in spec:
        value, method = data.get(value_key), data.get(method_key)
        if not _is_number(value) or not math.isfinite(value) or value <= 0:
            raise ResultsError(path, value_key, f"expected a positive number, got {value!r}")
        if not isinstance(method, str) or not method.strip():
            raise ResultsError(path, method_key, "missing or not a non-empty string")
        used |= {value_key, method_key}
        out.append(Ceiling(gpu=gpu, kind=kind, label=label, value=float(value), unit=unit,
                           method=method.strip(), gpu_name=data["gpu_name"], source=str(path)))
    extra = {k: v for k, v in data.items() if k not in used}
    return [Ceiling(**{**c.__dict__, "extra": dict(extra)}) for c in out]


def load_ceilings(root: Path | str) -> list[Ceiling]:
    """Every ceiling under ``root`` (``root/<gpu>/ceilings.json`` and ``gemm_ceiling.json``),
    GPUs in slug order, kinds in :data:`CEILING_KINDS` order. No files: an empty list."""
    root = Path(root)
    if not root.is_dir():
        raise ResultsError(root, "results folder", "not a directory")
    out: list[Ceiling] = []
    for name in CEILING_FILES:
        for path in sorted(root.rglob(name)):
            rel = path.relative_to(root)
            gpu = rel.parts[0] if len(rel.parts) > 1 else root.resolve().name
            out += load_ceiling_file(path, gpu)
    seen: dict[tuple, str] = {}
    for c in out:
        if (c.gpu, c.kind) in seen:
            raise ResultsError(c.source, c.kind,
                               f"{c.gpu} already has it from {seen[c.gpu, c.kind]}")
        seen[c.gpu, c.kind] = c.source
    return sorted(out, key=lambda c: (c.gpu, CEILING_KINDS.index(c.kind)))


# ----------------------------------------------------------------------------- Nsight Compute

# Units Nsight Compute may print, scaled to bytes, sectors, nanoseconds and instructions.
_NCU_UNITS = {"byte": ("byte", 1), "Kbyte": ("byte", 1e3), "Mbyte": ("byte", 1e6),
              "Gbyte": ("byte", 1e9), "Tbyte": ("byte", 1e12), "sector": ("sector", 1),
              "Ksector": ("sector", 1e3), "Msector": ("sector", 1e6), "Gsector": ("sector", 1e9),
              "ns": ("ns", 1), "nsecond": ("ns", 1), "us": ("ns", 1e3), "usecond": ("ns", 1e3),
              "ms": ("ns", 1e6), "msecond": ("ns", 1e6), "s": ("ns", 1e9), "second": ("ns", 1e9),
              # instruction counts (smsp__inst_executed_op_ldgsts: the cp.async copies)
              "inst": ("inst", 1), "Kinst": ("inst", 1e3), "Minst": ("inst", 1e6), "Ginst": ("inst", 1e9)}
_NCU_STEP_RE = re.compile(rf"step({STEP_ID_RE.pattern})\b")
_NCU_COLUMNS = ("ID", "Kernel Name", "Block Size", "Grid Size", "Metric Name", "Metric Unit",
                "Metric Value")


@dataclass(frozen=True)
class NcuKernel:
    """One profiled kernel launch: its Nsight Compute metrics in base units."""

    gpu: str
    step: str                      # "01", from the file name stepNN.csv
    launch: int                    # ncu's ID: launches in order, from 0
    name: str                      # short name, e.g. "s_kernel"
    signature: str                 # ncu's full kernel name
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    metrics: dict[str, float] = field(default_factory=dict)   # bytes, sectors, ns
    units: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


def _ncu_triple(path: Path, where: str, text: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"\(\s*(\d+),\s*(\d+),\s*(\d+)\s*\)", text.strip())
    if not m:
        raise ResultsError(path, where, f"expected (x, y, z), got {text!r}")
    return int(m[1]), int(m[2]), int(m[3])


def short_kernel_name(signature: str) -> str:
    """``void unnamed>::s_kernel<__nv_bfloat16>(unnamed>::Params<T1>)`` -> ``s_kernel``."""
    sig = signature.replace("(anonymous namespace)", "anonymous")
    head = re.split(r"[<(]", sig, maxsplit=1)[0]
    return head.split("::")[-1].split()[-1] if head.strip() else signature


def load_ncu_file(path: Path | str, gpu: str) -> list[NcuKernel]:
    """Parse ``ncu --csv`` output (one row per kernel and metric; ncu's own lines such as
    ``==PROF==`` before the header are skipped). Values lose their thousands separators and
    are scaled to bytes, sectors and nanoseconds."""
    path = Path(path)
    m = _NCU_STEP_RE.search(path.name)
    if not m:
        raise ResultsError(path, "file name", "expected stepNN in the name (e.g. step02.csv)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(path, "file", f"cannot read ({exc})") from None
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise ResultsError(path, "header", 'no CSV header line starting with "ID"')
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    missing = [c for c in _NCU_COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise ResultsError(path, "header", f"no metric rows or missing columns {missing}")
    kernels: dict[int, dict] = {}
    for n, row in enumerate(rows, start + 2):
        where = f"line {n}"
        try:
            launch = int(row["ID"])
        except (TypeError, ValueError):
            raise ResultsError(path, f"{where}.ID",
                               f"expected an integer, got {row['ID']!r}") from None
        k = kernels.setdefault(launch, {
            "signature": row["Kernel Name"], "metrics": {}, "units": {},
            "block": _ncu_triple(path, f"{where}.Block Size", row["Block Size"]),
            "grid": _ncu_triple(path, f"{where}.Grid Size", row["Grid Size"])})
        unit = row["Metric Unit"]
        if unit not in _NCU_UNITS:
            raise ResultsError(path, f"{where}.Metric Unit", f"unknown unit {unit!r}")
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except (AttributeError, ValueError):
            raise ResultsError(path, f"{where}.Metric Value",
                               f"expected a number, got {row['Metric Value']!r}") from None
        base, scale = _NCU_UNITS[unit]
        k["metrics"][row["Metric Name"]] = value * scale
        k["units"][row["Metric Name"]] = base
    return [NcuKernel(gpu=gpu, step=m[1], launch=launch, name=short_kernel_name(k["signature"]),
                      signature=k["signature"], block=k["block"], grid=k["grid"],
                      metrics=k["metrics"], units=k["units"], source=str(path))
            for launch, k in sorted(kernels.items())]


def load_ncu(root: Path | str) -> list[NcuKernel]:
    """Every ``root/<gpu>/ncu/stepNN.csv``: kernels by GPU, step and launch order."""
    root = Path(root)
    if not root.is_dir():
        raise ResultsError(root, "results folder", "not a directory")
    out: list[NcuKernel] = []
    for path in sorted(root.glob("*/ncu/*.csv")):
        out += load_ncu_file(path, path.parent.parent.name)
    return out
