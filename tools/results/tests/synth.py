"""Synthetic result trees for the roofline, ceiling and traffic tests. Every number is made
up; none is a measurement.

``make_tree(root)`` writes, for GPU folder ``test-gpu`` ("Test GPU (synthetic)"):

- ``step01.json`` .. ``step03.json`` with ``attention/bf16/hd128/n4096/{full,causal}``
  (B = 2, Hq = Hkv = 4) at :data:`TFLOPS`, and ``attention/bf16/hd128/n1024/full``;
- ``ceilings.json`` and ``gemm_ceiling.json`` with :data:`CEILINGS`;
- ``ncu/step01.csv`` (three kernels), ``ncu/step02.csv``, ``ncu/step03.csv`` (one each),
  in Nsight Compute's ``--csv`` layout, with ``==PROF==`` lines before the header.
"""

from __future__ import annotations

import json
from pathlib import Path

GPU = "test-gpu"
GPU_NAME = "Test GPU (synthetic)"
HEADLINE = "attention/bf16/hd128/n4096/full"
B, H, N, D = 2, 4, 4096, 128
STEP_NAMES = {"01": "naive", "02": "tiled", "03": "online_softmax"}
# TFLOPS per step: (full, causal) at n4096, and full at n1024.
TFLOPS = {"01": (1.0, 0.8, 0.9), "02": (10.0, 5.0, 9.0), "03": (20.0, 10.0, 18.0)}
CEILINGS = {"copy_gbps": 1000.0, "fp32_fma_tflops": 50.0, "bf16_gemm_tflops": 500.0}
FLOPS = 4 * B * H * D * N * N
# DRAM bytes (read, write) per kernel of each step.
DRAM = {"01": {"s_kernel": (1e8, 2e9), "softmax_kernel": (6e9, 2e9),
               "pv_kernel": (2e9, 1e7)},
        "02": {"attention_kernel": (1.5e7, 4e6)},
        "03": {"attention_kernel": (1.5e7, 4e6)}}


def bench_json(step: str, entries: list[tuple[str, float, int, int]],
               vendor: str = "nvidia", gpu_name: str = GPU_NAME) -> dict:
    """Google Benchmark JSON: entries are (name, TFLOPS, seqlen, head_dim)."""
    ctx = {"flashsteps_step": step, "flashsteps_step_name": STEP_NAMES.get(step, step),
           "gpu_vendor": vendor, "gpu_name": gpu_name, "gpu_arch": "sm_00", "sm_count": "8",
           "driver_version": "0.0.test", "runtime_version": "0.0",
           "git_commit": f"00000synth{step}", "date": "2000-01-01T00:00:00+00:00"}
    benchmarks = []
    for name, tflops, n, d in entries:
        benchmarks.append({
            "name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
            "repetition_index": 0, "iterations": 1, "real_time": 1.0, "cpu_time": 1.0,
            "time_unit": "ms", "TFLOPS": tflops, "batch": B, "heads_q": H, "heads_kv": H,
            "seqlen_q": n, "seqlen_k": n, "head_dim": d,
            "causal": int(name.endswith("causal"))})
    return {"context": ctx, "benchmarks": benchmarks}


def ncu_csv(kernels: list[tuple[str, tuple[int, int, int], tuple[int, int, int], dict]]) -> str:
    """Nsight Compute --csv text: kernels are (name, grid, block, {metric: (unit, value)})."""
    lines = ["==PROF== Connected to process 1 (bench_stepNN)",
             '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
             '"Block Size","Grid Size","Device","CC","Section Name","Metric Name",'
             '"Metric Unit","Metric Value"']
    for i, (name, grid, block, metrics) in enumerate(kernels):
        for metric, (unit, value) in sorted(metrics.items()):
            shown = f"{value:,.0f}" if isinstance(value, int) or float(value).is_integer() \
                else f"{value:,.2f}"
            lines.append(f'"{i}","1","bench","host","void unnamed>::{name}<__nv_bfloat16>'
                         f'(unnamed>::Params<T1>)","1","7","{block}","{grid}","0","9.0",'
                         f'"Command line profiler metrics","{metric}","{unit}","{shown}"')
    return "\n".join(lines) + "\n"


def step_kernels(step: str) -> list:
    """The kernels of a step, with DRAM traffic and, for step 02/03, loads that match the
    model exactly (K swept twice / once)."""
    out = []
    for name, (read, write) in DRAM[step].items():
        metrics = {"dram__bytes_read.sum": ("byte", int(read)),
                   "dram__bytes_write.sum": ("byte", int(write)),
                   "gpu__time_duration.sum": ("ns", 1_000_000)}
        if step == "01":
            grid = (1024, 1, 1)
        else:
            tiles = B * H * N // 64  # BLOCK_M = 64
            grid = (tiles, 1, 1)
            sweeps = 2 if step == "02" else 1
            loads = tiles * (64 * D * 2 + (sweeps + 1) * N * D * 2)
            metrics["l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum"] = ("byte", loads)
            metrics["lts__t_sectors_srcunit_tex_op_read.sum"] = ("sector", loads // 64)
        out.append((name, grid, (128, 1, 1), metrics))
    return out


def make_tree(root: Path, steps=("01", "02", "03"), ceilings: bool = True,
              ncu: bool = True) -> Path:
    gpu = root / GPU
    gpu.mkdir(parents=True, exist_ok=True)
    for step in steps:
        full, causal, short = TFLOPS[step]
        entries = [(HEADLINE, full, N, D), (HEADLINE.replace("full", "causal"), causal, N, D),
                   ("attention/bf16/hd128/n1024/full", short, 1024, D)]
        (gpu / f"step{step}.json").write_text(json.dumps(bench_json(step, entries)))
    if ceilings:
        (gpu / "ceilings.json").write_text(json.dumps({
            "gpu_name": GPU_NAME, "gpu_arch": "sm_00", "sm_count": 8, "max_clock_mhz": 1000,
            "fp32_fma_tflops": CEILINGS["fp32_fma_tflops"],
            "fp32_fma_method": "synthetic FMA chains",
            "copy_gbps": CEILINGS["copy_gbps"], "copy_method": "synthetic copy"}))
        (gpu / "gemm_ceiling.json").write_text(json.dumps({
            "gpu_name": GPU_NAME, "bf16_gemm_tflops": CEILINGS["bf16_gemm_tflops"],
            "bf16_gemm_method": "synthetic GEMM", "torch_version": "0.0"}))
    if ncu:
        (gpu / "ncu").mkdir(exist_ok=True)
        for step in steps:
            (gpu / "ncu" / f"step{step}.csv").write_text(ncu_csv(step_kernels(step)))
    return root
