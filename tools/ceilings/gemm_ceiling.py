#!/usr/bin/env python3
"""Dense bf16 GEMM ceiling of the current GPU through PyTorch (cuBLAS / hipBLASLt).

An 8192 x 8192 x 8192 bf16 product on random inputs (never zeros), timed with CUDA events:
3 warm-ups, median of 20. Prints JSON; with a path argument, also writes it there.
PyTorch is an optional tool here, never a build dependency.
    python3 tools/ceilings/gemm_ceiling.py [out.json]
"""
import argparse
import datetime
import json
import statistics
import subprocess
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="also write the JSON to this file")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("error: PyTorch is not installed here; gemm_ceiling.py needs a CUDA or ROCm build of torch",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("No GPU visible to PyTorch: GEMM ceiling not measured.")
        return 0
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    times = []
    for i in range(23):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(a, b)
        stop.record()
        stop.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(stop))
    ms = statistics.median(times)
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_commit": commit,
        "gpu_name": torch.cuda.get_device_name(),
        "bf16_gemm_tflops": round(2 * n**3 / (ms / 1e3) / 1e12, 1),
        "bf16_gemm_method": f"torch.matmul {n}x{n}x{n} bf16, randn inputs, median of 20 after 3 warm-ups",
        "torch_version": torch.__version__,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
