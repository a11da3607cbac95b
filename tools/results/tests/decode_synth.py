"""Synthetic decode-set results for the decode table and split-sweep tests. Every number is
made up; none is a measurement.

``decode_json(step, points)`` is a bench_stepNN file of the decode set in Google Benchmark's
layout (median and mean aggregates, as ``--set decode`` writes them); ``sweep_json(...)`` is a
``--split-sweep`` file: each problem once at the heuristic's count (its plain name) and once per
forced count (``.../splits:<N>``), with the counters num_splits, heuristic_splits, key_tiles.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

GPU = "test-gpu"
GPU_NAME = "Test GPU (synthetic)"
STEP_NAMES = {"06": "autotuned", "10": "split_kv", "sdpa-cudnn": "PyTorch SDPA cuDNN"}
SUFFIX = "/min_time:0.050/min_warmup_time:0.050/repeats:3/manual_time"


def sizes(name: str) -> dict[str, float]:
    m = re.match(r"decode/(\w+)/hd(\d+)/b(\d+)/hq(\d+)/hkv(\d+)/nq(\d+)/nk(\d+)/(full|causal)", name)
    d, b, hq, hkv, nq, nk = (int(m[i]) for i in range(2, 8))
    return {"head_dim": d, "batch": b, "heads_q": hq, "heads_kv": hkv, "seqlen_q": nq, "seqlen_k": nk,
            "causal": int(m[8] == "causal")}


def min_bytes(name: str) -> float:
    z = sizes(name)
    elems = z["batch"] * z["head_dim"] * (2 * z["heads_q"] * z["seqlen_q"] + 2 * z["heads_kv"] * z["seqlen_k"])
    return 2.0 * elems + 4.0 * z["batch"] * z["heads_q"] * z["seqlen_q"]


def entries(name: str, us: float | None, extra: dict | None = None, error: str | None = None) -> list[dict]:
    """The aggregates of one benchmark timed at ``us`` microseconds per call, or one skipped
    entry with ``error``."""
    if error is not None:
        return [{"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                 "repetition_index": 0, "threads": 1, "error_occurred": True, "error_message": error,
                 "iterations": 0, "real_time": 0.0, "cpu_time": 0.0, "time_unit": "ms"}]
    run = name + SUFFIX
    counters = {"TFLOPS": 4.0 * sizes(name)["batch"] * 32 * 128 * sizes(name)["seqlen_k"] / (us * 1e-6) / 1e12,
                "GBps": min_bytes(name) / (us * 1e-6) / 1e9, "us_per_call": us, **sizes(name), **(extra or {})}
    return [{"name": f"{run}_{agg}", "run_name": run, "run_type": "aggregate", "repetitions": 3,
             "threads": 1, "aggregate_name": agg, "aggregate_unit": "time", "iterations": 3,
             "real_time": us / 1e3, "cpu_time": 1.0, "time_unit": "ms", **counters}
            for agg in ("mean", "median")]


def document(step: str, benchmarks: list[dict]) -> dict:
    ctx = {"flashsteps_step": step, "flashsteps_step_name": STEP_NAMES.get(step, step),
           "gpu_vendor": "nvidia", "gpu_name": GPU_NAME, "gpu_arch": "sm_00", "sm_count": "8",
           "driver_version": "0.0.test", "runtime_version": "0.0", "git_commit": f"00000synth{step}",
           "date": "2000-01-01T00:00:00+00:00", "flashsteps_bench_set": "decode"}
    return {"context": ctx, "benchmarks": benchmarks}


def decode_json(step: str, points: dict[str, float | str]) -> dict:
    """A decode-set file: {name: microseconds per call, or a skip reason}."""
    out = []
    for name, value in points.items():
        out += entries(name, None, error=value) if isinstance(value, str) else entries(name, value)
    return document(step, out)


def sweep_json(problems: dict[str, tuple[int, int, dict[int, float | str]]], step: str = "10") -> dict:
    """A split sweep: {name: (heuristic count, key tiles, {forced count: us or skip reason})};
    the heuristic's run takes the time of its count when that was forced too, else 1.1 x the
    fastest."""
    out = []
    for name, (heuristic, tiles, counts) in problems.items():
        timed = {k: v for k, v in counts.items() if not isinstance(v, str)}
        us = timed.get(heuristic, 1.1 * min(timed.values()))
        common = {"heuristic_splits": heuristic, "key_tiles": tiles}
        out += entries(name, us, {"num_splits": heuristic, **common})
        for k, v in counts.items():
            if isinstance(v, str):
                out += entries(f"{name}/splits:{k}", None, error=v)
            else:
                out += entries(f"{name}/splits:{k}", v, {"num_splits": k, **common})
    return document(step, out)


def write(path: Path, doc: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


B1 = "decode/bf16/hd128/b1/hq32/hkv8/nq1/nk16384/full"
B8 = "decode/bf16/hd128/b8/hq32/hkv8/nq1/nk65536/full"
PREFILL = "decode/bf16/hd128/b1/hq32/hkv8/nq128/nk8192/causal"
B1_HKV32 = "decode/bf16/hd128/b1/hq32/hkv32/nq1/nk16384/full"
COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def make_tree(root: Path) -> Path:
    """results/<GPU>/: steps 06 and 10 and SDPA cuDNN on a few decode problems (step 06 skips
    one), plus a split sweep of step 10 under runs/ (which load_results leaves out)."""
    gpu = root / GPU
    write(gpu / "step06-decode.json", decode_json("06", {B1: 100.0, B8: 2000.0, PREFILL: "synthetic: no"}))
    write(gpu / "step10-decode.json", decode_json("10", {B1: 25.0, B8: 500.0, PREFILL: 80.0, B1_HKV32: 60.0}))
    write(gpu / "sdpa-cudnn-decode.json", decode_json("sdpa-cudnn", {B1: 20.0, B8: 480.0, PREFILL: 100.0}))
    write(gpu / "runs" / "step10-split-sweep" / "step10.json", sweep_json(default_sweep()))
    return root


def default_sweep() -> dict:
    """B = 1 (heuristic 33, not a power of two: its run is the only point there) and B = 8
    (heuristic 8), the time falling then rising over the counts; B = 8 skips 256."""
    b1 = {k: 400.0 / k + 0.2 * k for k in COUNTS}
    b8 = {k: 4000.0 / k + 2.0 * k for k in COUNTS[:-1]}
    b8[256] = "synthetic: skipped"
    return {B1: (33, 256, b1), B8: (8, 1024, b8)}
