#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The memory traffic each step should cause, next to what Nsight Compute measured.

    python3 tools/book/ncu_traffic.py results 02      # print step 02's table

The book's "why it is faster" sections compare, for the profiled problem
(``tools/plot_roofline.NCU_BENCHMARK``), the counters in ``results/<gpu>/ncu/stepNN.csv``
with the counts that follow from each step's algorithm and access pattern. The model of a
step lives here, in :data:`MODELS`, one function per kernel; a step without a model gets
its measured counters only. Everything the model needs comes from the results: the shape
from the benchmark JSON (batch, heads), the launch (grid, block) from the CSV.

Counters (NVIDIA, Nsight Compute):

- ``l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum`` -- global loads requested by the SMs,
  counted in whole 32-byte sectors: a warp reading 2 bytes from each of 32 scattered rows
  counts 32 sectors, 1024 bytes;
- ``lts__t_sectors_srcunit_tex_op_read.sum`` -- 32-byte sectors that L2 sent to the L1s;
- ``dram__bytes_read.sum`` / ``dram__bytes_write.sum`` -- DRAM traffic;
- ``gpu__time_duration.sum`` -- the kernel's time in the profiled launch (clocks unlocked).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / "results"
sys.path.insert(0, str(TOOLS))
import flashsteps_results as fr  # noqa: E402
import plot_roofline as pr  # noqa: E402

LOADS = "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"
L2_TO_L1 = "lts__t_sectors_srcunit_tex_op_read.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
TIME = "gpu__time_duration.sum"
SECTOR = 32  # bytes per sector (L1/L2 granularity)
WARP = 32    # lanes per warp (Nsight Compute is NVIDIA's)

COUNTERS = (  # (metric, short name) in table order
    (LOADS, "global loads requested by the SMs"),
    (L2_TO_L1, "L2 → L1"),
    (DRAM_READ, "DRAM read"),
    (DRAM_WRITE, "DRAM write"),
    (TIME, "kernel time"),
)


@dataclass(frozen=True)
class Expected:
    value: float
    how: str  # Markdown: how the count follows from the algorithm


def _n(x: float) -> str:
    return f"{int(round(x)):,}"


def _mb(x: float) -> str:
    if x >= 1e12:
        return f"{x / 1e12:,.2f} TB"
    return f"{x / 1e6:,.1f} MB" if x < 1e9 else f"{x / 1e9:,.2f} GB"


def _tensors(p: pr.Problem) -> dict[str, int]:
    e, d = p.elem_bytes, p.head_dim
    return {"Q": p.batch * p.heads_q * p.seqlen_q * d * e,
            "K": p.batch * p.heads_kv * p.seqlen_k * d * e,
            "V": p.batch * p.heads_kv * p.seqlen_k * d * e,
            "O": p.batch * p.heads_q * p.seqlen_q * d * e,
            "LSE": p.batch * p.heads_q * p.seqlen_q * 4,
            "S": p.batch * p.heads_q * p.seqlen_q * p.seqlen_k * 4,
            "head": p.seqlen_k * d * e}  # one head's K (or V)


# ----------------------------------------------------------------------------- step 01

def _s_kernel(k: fr.NcuKernel, p: pr.Problem) -> dict[str, Expected]:
    t = _tensors(p)
    pairs = p.batch * p.heads_q * p.seqlen_q * p.seqlen_k
    return {
        LOADS: Expected(pairs * p.head_dim * (SECTOR + SECTOR / WARP),
                        f"{_n(pairs)} (query, key) pairs × D = {p.head_dim} × (one {SECTOR}-byte "
                        f"sector of K per lane, as each lane reads its own row, + one sector "
                        f"of Q per warp of {WARP}, which shares the row)"),
        DRAM_READ: Expected(t["Q"] + t["K"], f"Q and K once: {_mb(t['Q'] + t['K'])}"),
        DRAM_WRITE: Expected(t["S"], f"S once: B·Hq·N² × 4 B = {_mb(t['S'])}"),
    }


def _softmax_kernel(k: fr.NcuKernel, p: pr.Problem) -> dict[str, Expected]:
    t = _tensors(p)
    elems = p.batch * p.heads_q * p.seqlen_q * p.seqlen_k
    return {
        LOADS: Expected(3 * elems * SECTOR,
                        f"3 passes × {_n(elems)} elements of S × one {SECTOR}-byte sector "
                        "each (the lanes of a warp read 4 bytes from 32 different rows)"),
        DRAM_READ: Expected(3 * t["S"], f"S three times (it is far larger than L2): "
                                        f"{_mb(3 * t['S'])}"),
        DRAM_WRITE: Expected(t["S"] + t["LSE"], f"P over S once, and LSE: "
                                                f"{_mb(t['S'] + t['LSE'])}"),
    }


def _pv_kernel(k: fr.NcuKernel, p: pr.Problem) -> dict[str, Expected]:
    t = _tensors(p)
    warps = p.batch * p.heads_q * p.seqlen_q * p.head_dim // WARP
    v_bytes = WARP * p.elem_bytes
    return {
        LOADS: Expected(warps * p.seqlen_k * (SECTOR + v_bytes),
                        f"{_n(warps)} warps (32 consecutive d of one row) × {p.seqlen_k} keys "
                        f"× (one sector of P, the same element for every lane, + "
                        f"{WARP} × {p.elem_bytes} B of V)"),
        DRAM_READ: Expected(t["S"] + t["V"], f"P once and V once: {_mb(t['S'] + t['V'])}"),
        DRAM_WRITE: Expected(t["O"], f"O once: {_mb(t['O'])}"),
    }


# ----------------------------------------------------------------------------- steps 02, 03

def _fused(sweeps: int):
    """The fused kernel of steps 02 (K swept twice) and 03 (once): one block per query tile
    loads its Q tile once and streams the head's K ``sweeps`` times and V once."""

    def model(k: fr.NcuKernel, p: pr.Problem) -> dict[str, Expected]:
        t = _tensors(p)
        tiles = k.blocks
        block_m = p.batch * p.heads_q * p.seqlen_q / tiles  # query rows per block
        q_tile = block_m * p.head_dim * p.elem_bytes
        per_tile = q_tile + (sweeps + 1) * t["head"]
        k_times = "2 × K of the head" if sweeps == 2 else "K of the head"
        return {
            LOADS: Expected(tiles * per_tile,
                            f"{_n(tiles)} query tiles × (Q tile {block_m:g} × {p.head_dim} × "
                            f"{p.elem_bytes} B + {k_times} {p.seqlen_k} × {p.head_dim} × "
                            f"{p.elem_bytes} B + V of the head, as large)"),
            DRAM_READ: Expected(t["Q"] + t["K"] + t["V"],
                                f"Q, K and V once each ({_mb(t['Q'])} each): a head's K and V "
                                f"({_mb(t['head'])} each) stay in L2 while its "
                                f"{p.seqlen_q / block_m:g} query tiles sweep them"),
            DRAM_WRITE: Expected(t["O"] + t["LSE"], f"O and LSE once: {_mb(t['O'] + t['LSE'])}"),
        }

    return model


MODELS = {
    "01": {"s_kernel": _s_kernel, "softmax_kernel": _softmax_kernel, "pv_kernel": _pv_kernel},
    "02": {"attention_kernel": _fused(2)},
    "03": {"attention_kernel": _fused(1)},
}


def expected(kernel: fr.NcuKernel, problem: pr.Problem) -> dict[str, Expected]:
    """What the step's model predicts for this kernel ({} without a model)."""
    model = MODELS.get(kernel.step, {}).get(kernel.name)
    return model(kernel, problem) if model else {}


# ----------------------------------------------------------------------------- Markdown

def _measured(kernel: fr.NcuKernel, metric: str) -> tuple[float | None, str]:
    value = kernel.metrics.get(metric)
    if value is None:
        return None, "n/a"
    if metric == TIME:
        return value, f"{value / 1e6:,.1f} ms"
    if metric == L2_TO_L1:
        return value * SECTOR, f"{_n(value * SECTOR)} B"
    return value, f"{_n(value)} B"


def _problems(records: list[fr.Record], benchmark: str) -> dict[str, pr.Problem]:
    """{gpu: the profiled problem's shape}, from any step's record of the benchmark."""
    out = {}
    for r in records:
        if r.name == benchmark and not r.skipped and r.gpu not in out:
            out[r.gpu] = pr.problem_of(r)
    return out


def step_table(records: list[fr.Record], kernels: list[fr.NcuKernel], step: str,
               benchmark: str = pr.NCU_BENCHMARK) -> str:
    """Markdown: the step's counters, measured and expected, one table per GPU."""
    problems = _problems(records, benchmark)
    parts = []
    for gpu in sorted({k.gpu for k in kernels if k.step == step}):
        mine = [k for k in kernels if k.gpu == gpu and k.step == step]
        problem = problems.get(gpu)
        if problem is None:
            parts.append(f"`results/{gpu}/ncu/` has step {step}'s counters, but no benchmark "
                         f"JSON gives the shape of `{benchmark}`.")
            continue
        name = next((r.context["gpu_name"] for r in records if r.gpu == gpu), gpu)
        vendor = next((r.vendor for r in records if r.gpu == gpu), "nvidia")
        lines = [f"Nsight Compute on {fr.gpu_title(vendor, name)}, the correctness launch "
                 f"of `{benchmark}` ({problem.describe()}), "
                 f"`results/{gpu}/ncu/{Path(mine[0].source).name}`. All counts are bytes "
                 "(L2 → L1: sectors × 32)."]
        for k in mine:
            exp = expected(k, problem)
            lines += ["", f"`{k.name}`, {_n(k.blocks)} blocks × {k.threads_per_block} "
                          "threads:", "",
                      "| Counter | Measured | Expected | Measured / expected |",
                      "|:--|--:|--:|--:|"]
            hows = []
            for metric, label in COUNTERS:
                if metric == TIME:
                    continue
                value, _ = _measured(k, metric)
                e = exp.get(metric)
                if value is None and e is None:
                    continue
                ratio = "" if e is None or value is None else (
                    "1 (exact)" if round(value) == round(e.value) else f"{value / e.value:.3f}")
                lines.append(f"| {label} | {'n/a' if value is None else _n(value)} | "
                             f"{'' if e is None else _n(e.value)} | {ratio} |")
                if e is not None:
                    hows.append(f"- *{label}*: {e.how}.")
            if hows:
                lines += ["", "Expected from the algorithm:", ""] + hows
        if not MODELS.get(step):
            lines += ["", f"No traffic model for step {step} yet: measured counters only."]
        parts.append("\n".join(lines))
    if not parts:
        return (f"*Not measured yet:* no Nsight Compute counters of step {step} "
                f"(`results/<gpu>/ncu/step{step}.csv`).\n")
    return "\n\n".join(parts) + "\n"


def compare_table(records: list[fr.Record], kernels: list[fr.NcuKernel],
                  steps: list[str], benchmark: str = pr.NCU_BENCHMARK) -> str:
    """Markdown: the listed steps side by side (sums over each step's kernels), per GPU."""
    parts = []
    for gpu in sorted({k.gpu for k in kernels if k.step in steps}):
        lines = [f"`results/{gpu}/ncu/`, `{benchmark}`, every kernel of a step summed:", "",
                 "| Step | Kernels | Global loads requested | L2 → L1 | DRAM read | DRAM write "
                 "| Kernel time |", "|:--|:--|--:|--:|--:|--:|--:|"]
        labels = {r.step: r.step_label for r in records if r.gpu == gpu}
        for step in sorted({k.step for k in kernels if k.gpu == gpu and k.step in steps},
                           key=fr.step_sort_key):
            mine = [k for k in kernels if k.gpu == gpu and k.step == step]

            def total(metric: str, scale: float = 1.0) -> str:
                if any(metric not in k.metrics for k in mine):
                    return "n/a"
                value = sum(k.metrics[metric] for k in mine) * scale
                return f"{value / 1e6:,.1f} ms" if metric == TIME else _mb(value)

            lines.append(f"| {labels.get(step, step)} | {len(mine)} | {total(LOADS)} | "
                         f"{total(L2_TO_L1, SECTOR)} | {total(DRAM_READ)} | "
                         f"{total(DRAM_WRITE)} | {total(TIME)} |")
        parts.append("\n".join(lines))
    if not parts:
        return ("*Not measured yet:* no Nsight Compute counters under "
                "`results/<gpu>/ncu/`.\n")
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", type=Path)
    ap.add_argument("step", help="e.g. 02")
    args = ap.parse_args(argv)
    try:
        records = fr.load_results(args.results_dir)
        kernels = fr.load_ncu(args.results_dir)
    except fr.ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(step_table(records, kernels, args.step))
    sys.stdout.write("\n" + compare_table(records, kernels, [s for s in sorted(
        {k.step for k in kernels}) if s <= args.step]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
