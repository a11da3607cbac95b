#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One FlashSteps step next to PyTorch SDPA on the same tensors (the book's "From Python").

    PYTHONPATH=build/cuda/python python3 python/examples/step_vs_sdpa.py [--step 7]

Makes a GQA problem in the BSHD layout a model keeps its activations in, calls the step and
SDPA on the same [B, H, N, D] views, and prints each one's error against float64 and its time.
"""

from __future__ import annotations

import argparse
import math
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--step", type=int, default=None, help="the step to run (default: the last one built)")
    ap.add_argument("--seqlen", type=int, default=4096)
    args = ap.parse_args(argv)  # before any import of torch: --help and a bad flag need none
    try:
        import torch
        from torch.nn.functional import scaled_dot_product_attention as sdpa
    except ImportError:
        print("error: PyTorch is not installed here; step_vs_sdpa.py needs a CUDA or ROCm build of torch",
              file=sys.stderr)
        return 2
    import flashsteps

    # [start:inputs]
    # Activations as a model holds them: [B, N, H, D] (BSHD), bf16; 32 query heads share
    # 8 key/value heads (GQA). transpose(1, 2) gives the [B, H, N, D] views both take: no copy.
    B, N, Hq, Hkv, D = 2, args.seqlen, 32, 8, 128
    q = torch.randn(B, N, Hq, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(B, N, Hkv, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    v = torch.randn(B, N, Hkv, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2) + 0.5
    # [end:inputs]

    # [start:call]
    o_step, lse = flashsteps.attention(q, k, v, step=args.step, causal=True, return_lse=True)
    o_sdpa = sdpa(q, k, v, is_causal=True, enable_gqa=True)  # Nq == Nk: both causal masks agree
    # [end:call]

    # [start:check]
    # One float64 reference on the same tensors (the last 64 query rows, to keep it small).
    rows = slice(N - 64, N)
    qd, kd, vd = (t.double() for t in (q, k, v))
    kd, vd = kd.repeat_interleave(Hq // Hkv, 1), vd.repeat_interleave(Hq // Hkv, 1)
    s = qd[:, :, rows] @ kd.transpose(-1, -2) / math.sqrt(D)
    s = s.masked_fill(torch.arange(N, device="cuda") > torch.arange(N - 64, N, device="cuda")[:, None],
                      float("-inf"))
    ref = torch.softmax(s, -1) @ vd
    for name, o in (("step", o_step), ("sdpa", o_sdpa)):
        print(f"{name}: max abs error {float((o[:, :, rows].double() - ref).abs().max()):.2e}")
    print(f"LSE of the last row, head 0: {float(lse[0, 0, -1]):.4f}")
    # [end:check]

    # [start:time]
    def ms(fn, reps=20):
        fn()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) / reps

    flops = 4 * B * Hq * D * N * (N + 1) / 2  # the course's count: visible pairs only
    for name, fn in (("step", lambda: flashsteps.attention(q, k, v, step=args.step, causal=True)),
                     ("sdpa", lambda: sdpa(q, k, v, is_causal=True, enable_gqa=True))):
        t = ms(fn)
        print(f"{name}: {t:.3f} ms, {flops / t / 1e9:.0f} TFLOP/s")
    # [end:time]
    return 0


if __name__ == "__main__":
    sys.exit(main())
