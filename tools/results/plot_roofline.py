#!/usr/bin/env python3
"""Roofline of the FlashSteps steps: measured ceilings, DRAM traffic and TFLOPS.

    python3 tools/results/plot_roofline.py results -o build/roofline [--markdown build/roofline.md]

writes ``<OUT_PREFIX>.png`` and ``<OUT_PREFIX>.svg`` (and, with --markdown, a table of the
same points). One panel per GPU that has ceilings or traffic, stacked, NVIDIA first, then
AMD; a vendor with nothing measured is named in a footnote ("Not measured yet: AMD"), and
with nothing measured at all the one panel says "not measured". In a panel:

- x is the arithmetic intensity, FLOPs per byte of DRAM traffic. The bytes are Nsight
  Compute's ``dram__bytes_read.sum + dram__bytes_write.sum`` over every kernel of the step
  (``results/<gpu>/ncu/stepNN.csv``), for one problem, :data:`NCU_BENCHMARK` (the one
  ``tools/gpu/gpu_session.sh`` profiles); the FLOPs are the course's rule,
  4 * B * Hq * D * visible pairs, with B and Hq from the benchmark JSON;
- y is the step's TFLOPS on that benchmark, from its JSON (the median of repetitions);
- the ceilings come from ``results/<gpu>/ceilings.json`` and ``gemm_ceiling.json``: the
  copy bandwidth is the slanted line (TFLOP/s = GB/s * FLOP/byte / 1000), the fp32 FMA
  rate and the dense bf16 GEMM rate are horizontal lines from their ridge points;
- a dotted vertical line marks the intensity of the least traffic the problem needs
  (Q, K, V read once, O and LSE written once).

Both axes are logarithmic. The output is deterministic (same input, same bytes).
Missing ceilings or traffic are said in the panel, never invented.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashsteps_results as fr  # noqa: E402

# The problem whose traffic tools/gpu/gpu_session.sh profiles with Nsight Compute
# (its --benchmark_filter); tools/results/tests check that the two agree.
NCU_BENCHMARK = "attention/bf16/hd128/n4096/full"
DRAM_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
# Short names of the ceilings, for table headers and sentences.
CEILING_SHORT = {"bandwidth": "copy bandwidth", "fp32_fma": "fp32 FMA ceiling",
                 "bf16_gemm": "bf16 GEMM ceiling"}


@dataclass(frozen=True)
class Problem:
    """The shape of one attention benchmark, from its name and its JSON counters."""

    name: str
    dtype: str
    batch: int
    heads_q: int
    heads_kv: int
    seqlen_q: int
    seqlen_k: int
    head_dim: int
    mask: str

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def visible_pairs(self) -> int:
        """Per head. Full: Nq * Nk. Causal (both alignments agree when Nq = Nk): N(N+1)/2."""
        if self.mask == "full":
            return self.seqlen_q * self.seqlen_k
        if self.seqlen_q != self.seqlen_k:
            raise ValueError(f"{self.name}: causal with Nq != Nk is not modelled here")
        return self.seqlen_q * (self.seqlen_q + 1) // 2

    @property
    def flops(self) -> int:
        """The course's FLOP rule: 4 * B * Hq * D * visible pairs."""
        return 4 * self.batch * self.heads_q * self.head_dim * self.visible_pairs

    @property
    def min_bytes(self) -> int:
        """Q, K, V read once, O written once, LSE (fp32) written once."""
        e, d = self.elem_bytes, self.head_dim
        q = o = self.batch * self.heads_q * self.seqlen_q * d * e
        k = v = self.batch * self.heads_kv * self.seqlen_k * d * e
        return q + k + v + o + 4 * self.batch * self.heads_q * self.seqlen_q

    def describe(self) -> str:
        kv = f"Hq = {self.heads_q}" if self.heads_q != self.heads_kv else \
            f"Hq = Hkv = {self.heads_q}"
        n = f"N = {self.seqlen_q}" if self.seqlen_q == self.seqlen_k else \
            f"Nq = {self.seqlen_q}, Nk = {self.seqlen_k}"
        mask = "non-causal" if self.mask == "full" else "causal"
        return f"{self.dtype}, B = {self.batch}, {kv}, {n}, D = {self.head_dim}, {mask}"


def problem_of(record: fr.Record) -> Problem:
    """The shape of an attention benchmark record (counters batch, heads_q, heads_kv)."""
    c = record.counters
    missing = [k for k in ("batch", "heads_q", "heads_kv") if k not in c]
    if record.kind != "attention" or missing:
        raise ValueError(f"{record.source}: {record.name} has no attention shape "
                         f"(missing counters {missing})")
    return Problem(name=record.name, dtype=record.dtype, batch=int(c["batch"]),
                   heads_q=int(c["heads_q"]), heads_kv=int(c["heads_kv"]),
                   seqlen_q=int(c.get("seqlen_q", record.seqlen)),
                   seqlen_k=int(c.get("seqlen_k", record.seqlen)),
                   head_dim=record.head_dim, mask=record.mask)


@dataclass(frozen=True)
class Point:
    """One step on one GPU, on the roofline."""

    gpu: str
    vendor: str
    step: str
    label: str
    problem: Problem
    dram_bytes: float         # read + written, every kernel of the step
    kernels: tuple[str, ...]  # the profiled kernels, in launch order
    ncu_time_ns: float        # the profiled launch's kernel time (clocks not locked)
    tflops: float             # from the benchmark JSON

    @property
    def intensity(self) -> float:
        """FLOPs per DRAM byte."""
        return self.problem.flops / self.dram_bytes

    def fraction(self, ceiling: fr.Ceiling) -> float:
        return self.tflops / ceiling.value

    def bandwidth_bound(self, bandwidth: fr.Ceiling) -> float:
        """TFLOP/s the copy bandwidth allows at this intensity."""
        return bandwidth.value * self.intensity / 1000.0


def roofline_points(records: list[fr.Record], kernels: list[fr.NcuKernel],
                    benchmark: str = NCU_BENCHMARK) -> list[Point]:
    """A point for every (GPU, step) that has both Nsight Compute traffic and a measured,
    not skipped, TFLOPS for ``benchmark``; in GPU then step order."""
    by_key = {(r.gpu, r.step): r for r in records if r.name == benchmark and not r.skipped}
    groups: dict[tuple[str, str], list[fr.NcuKernel]] = {}
    for k in kernels:
        groups.setdefault((k.gpu, k.step), []).append(k)
    points = []
    for (gpu, step), ks in groups.items():
        rec = by_key.get((gpu, step))
        if rec is None:
            continue
        missing = [m for k in ks for m in DRAM_METRICS if m not in k.metrics]
        if missing:
            raise ValueError(f"{ks[0].source}: no {', '.join(sorted(set(missing)))}")
        dram = sum(k.metrics[m] for k in ks for m in DRAM_METRICS)
        if dram <= 0:
            raise ValueError(f"{ks[0].source}: no DRAM traffic recorded")
        points.append(Point(gpu=gpu, vendor=rec.vendor, step=step, label=rec.step_label,
                            problem=problem_of(rec), dram_bytes=dram,
                            kernels=tuple(k.name for k in ks),
                            ncu_time_ns=sum(k.metrics.get("gpu__time_duration.sum", 0.0)
                                            for k in ks),
                            tflops=rec.tflops))
    vendor_rank = {v: i for i, v in enumerate(fr.VENDORS)}
    return sorted(points, key=lambda p: (vendor_rank[p.vendor], p.gpu, fr.step_sort_key(p.step)))


def ceilings_by_gpu(ceilings: list[fr.Ceiling]) -> dict[str, dict[str, fr.Ceiling]]:
    out: dict[str, dict[str, fr.Ceiling]] = {}
    for c in ceilings:
        out.setdefault(c.gpu, {})[c.kind] = c
    return out


def fmt_sig(value: float, digits: int = 3) -> str:
    """About ``digits`` significant digits, no exponent for everyday magnitudes."""
    if value == 0 or not math.isfinite(value):
        return str(value)
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(value)))))
    return f"{value:,.{decimals}f}"


def fmt_bytes(value: float) -> str:
    """Bytes in MB or GB (decimal), about three significant digits."""
    return f"{fmt_sig(value / 1e9)} GB" if value >= 1e9 else f"{fmt_sig(value / 1e6)} MB"


def fmt_pct(value: float) -> str:
    return f"{100 * value:.1f} %" if value < 0.1 else f"{100 * value:.0f} %"


def markdown(points: list[Point], ceilings: list[fr.Ceiling],
             benchmark: str = NCU_BENCHMARK) -> str:
    """The points as Markdown: one table per GPU that has any, else "not measured yet"."""
    if not points:
        return (f"*Not measured yet:* the roofline needs, for one GPU, Nsight Compute "
                f"traffic (`results/<gpu>/ncu/stepNN.csv`) and the benchmark JSON of "
                f"`{benchmark}`.\n")
    ceil = ceilings_by_gpu(ceilings)
    parts = []
    for gpu in dict.fromkeys(p.gpu for p in points):
        mine = [p for p in points if p.gpu == gpu]
        c = ceil.get(gpu, {})
        head = ["Step", "DRAM bytes", "FLOP per byte", "TFLOPS"]
        if "bandwidth" in c:
            head.append("Bandwidth allows")
        for kind in ("fp32_fma", "bf16_gemm"):
            if kind in c:
                head.append(f"Of the {CEILING_SHORT[kind]}")
        lines = [f"`results/{gpu}/`, `{benchmark}` ({mine[0].problem.describe()}), "
                 f"{fmt_sig(mine[0].problem.flops / 1e12, 4)} TFLOP by the FLOP rule. DRAM "
                 "bytes are read + written, every kernel of the step (Nsight Compute); "
                 "TFLOPS are the benchmark's:", "",
                 "| " + " | ".join(head) + " |", "|:--|" + "--:|" * (len(head) - 1)]
        for p in mine:
            row = [p.label, fmt_bytes(p.dram_bytes), fmt_sig(p.intensity),
                   fr.fmt_tflops(p.tflops)]
            if "bandwidth" in c:
                row.append(f"{fmt_sig(p.bandwidth_bound(c['bandwidth']))} TFLOP/s")
            for kind in ("fp32_fma", "bf16_gemm"):
                if kind in c:
                    row.append(fmt_pct(p.fraction(c[kind])))
            lines.append("| " + " | ".join(row) + " |")
        if not c:
            lines += ["", f"No ceilings measured for `{gpu}` yet (`ceilings.json`, "
                          "`gemm_ceiling.json`)."]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- figure

def _panels(points: list[Point], ceilings: list[fr.Ceiling],
            records: list[fr.Record]) -> tuple[list[tuple[str, str]], list[str]]:
    """(vendor, gpu) per panel, one per GPU with points or ceilings, NVIDIA first; and the
    vendors with nothing measured (said in the figure, without an empty panel)."""
    vendor_of = {r.gpu: r.vendor for r in records}
    vendor_of.update({p.gpu: p.vendor for p in points})
    gpus = {p.gpu for p in points} | {c.gpu for c in ceilings}
    panels, missing = [], []
    for vendor in fr.VENDORS:
        mine = sorted(g for g in gpus if vendor_of.get(g, _guess_vendor(g)) == vendor)
        panels += [(vendor, g) for g in mine]
        if not mine:
            missing.append(vendor)
    return panels, missing


def _guess_vendor(gpu: str) -> str:
    """A GPU with ceilings but no benchmark JSON: its vendor from the folder name."""
    return "amd" if gpu.startswith(("amd", "mi")) else "nvidia"


def plot(points: list[Point], ceilings: list[fr.Ceiling], records: list[fr.Record],
         out_prefix: Path, benchmark: str = NCU_BENCHMARK) -> list[Path]:
    """Draw the roofline and write PNG + SVG; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "flashsteps", "svg.fonttype": "none", "font.size": 9})
    panels, missing = _panels(points, ceilings, records)
    ceil = ceilings_by_gpu(ceilings)
    colors = plt.get_cmap("tab10").colors
    step_order = sorted({p.step for p in points}, key=fr.step_sort_key)
    rows = panels or [(None, None)]  # nothing measured at all: one panel that says so
    fig, axes = plt.subplots(len(rows), 1, figsize=(8, 5.2 * len(rows)), squeeze=False)
    slanted = []  # (axes, text, two points of its line): rotated once the layout is final
    for ax, (vendor, gpu) in zip(axes[:, 0], rows):
        mine = [p for p in points if p.gpu == gpu]
        c = ceil.get(gpu, {}) if gpu else {}
        name = next((x.gpu_name for x in ceilings if x.gpu == gpu),
                    next((r.context["gpu_name"] for r in records if r.gpu == gpu), gpu or ""))
        ax.set_title(fr.gpu_title(vendor, name) if gpu else "not measured")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
        ax.set_ylabel("TFLOP/s")
        ax.grid(True, which="major", alpha=0.3)
        if gpu is None:
            ax.set_xlim(1, 1e4)
            ax.set_ylim(0.1, 1e3)
            ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center",
                    va="center", fontsize=20, color="#888888")
            continue
        # Axis ranges that hold every point, the ridge points and the minimal-traffic line.
        xs = [p.intensity for p in mine] + [p.problem.flops / p.problem.min_bytes for p in mine]
        ys = [p.tflops for p in mine] + [x.value for k, x in c.items() if k != "bandwidth"]
        bw = c.get("bandwidth")
        if bw:
            xs += [x.value * 1000.0 / bw.value for k, x in c.items() if k != "bandwidth"]
        x_lo = 10 ** math.floor(math.log10(min(xs) / 2)) if xs else 1.0
        x_hi = 10 ** math.ceil(math.log10(max(xs) * 8)) if xs else 1e4  # room for labels
        y_lo = 10 ** math.floor(math.log10(min(ys) / 2)) if ys else 0.1
        y_hi = 10 ** math.ceil(math.log10(max(ys) * 2)) if ys else 1e3
        ax.set_xlim(x_lo, x_hi)
        ax.set_ylim(y_lo, y_hi)
        top = max((x.value for k, x in c.items() if k != "bandwidth"), default=y_hi)
        if bw:
            x_top = top * 1000.0 / bw.value
            ax.plot([x_lo, x_top], [bw.value * x_lo / 1000.0, top], color="#333333", lw=1.5)
            x_text = x_lo * 1.5
            slanted.append((ax, ax.text(x_text, bw.value * x_text / 1000.0 * 1.25,
                                        f"copy bandwidth {bw.value:,.0f} GB/s", fontsize=8,
                                        color="#333333", ha="left", va="bottom",
                                        rotation_mode="anchor"),
                            (x_lo, bw.value * x_lo / 1000.0), (x_top, top)))
        for kind, style in (("fp32_fma", "-"), ("bf16_gemm", "--")):
            x = c.get(kind)
            if x is None:
                continue
            start = x.value * 1000.0 / bw.value if bw else x_lo
            ax.plot([start, x_hi], [x.value, x.value], color="#333333", lw=1.5, linestyle=style)
            ax.text(x_hi / 1.15, x.value * 1.08, f"{x.label}: {x.value:,.4g} TFLOP/s",
                    ha="right", va="bottom", fontsize=8, color="#333333")
        if not c:
            ax.text(0.5, 0.92, "ceilings not measured yet", transform=ax.transAxes,
                    ha="center", fontsize=10, color="#888888")
        if mine:
            x_min = mine[0].problem.flops / mine[0].problem.min_bytes
            ax.axvline(x_min, color="#888888", linestyle=":", lw=1)
            ax.text(x_min * 0.93, y_lo * 1.3, "least traffic:\nQ, K, V read once,\nO written once",
                    ha="right", va="bottom", fontsize=7, color="#666666")
        else:
            ax.text(0.5, 0.5, f"no Nsight Compute traffic\nfor {benchmark}",
                    transform=ax.transAxes, ha="center", va="center", fontsize=11,
                    color="#888888")
        for p in mine:
            color = colors[step_order.index(p.step) % len(colors)]
            ax.plot([p.intensity], [p.tflops], marker="o", markersize=7, color=color,
                    linestyle="none")
            # Labels right of the points; a point close below a higher one puts its label
            # lower, so that steps at nearly the same intensity stay readable.
            crowded = any(q is not p and q.tflops > p.tflops and
                          abs(math.log10(q.intensity / p.intensity)) < 0.5 and
                          math.log10(q.tflops / p.tflops) < 0.4 for q in mine)
            ax.annotate(f"{p.label}\n{fr.fmt_tflops(p.tflops)} TFLOP/s",
                        xy=(p.intensity, p.tflops), xytext=(8, -6 if crowded else 2),
                        textcoords="offset points", ha="left",
                        va="top" if crowded else "center", fontsize=8, color=color)
    fig.suptitle(f"Roofline of the FlashSteps steps: {benchmark}\nDRAM bytes from Nsight "
                 "Compute, TFLOPS from the benchmark", fontsize=10)
    if missing:
        fig.text(0.01, 0.005, "Not measured yet: " +
                 ", ".join(fr.VENDOR_LABELS[v] for v in missing), fontsize=8,
                 color="#444444", va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.03 if missing else 0, 1, 1 - 0.065 / len(rows)))
    for ax, text, a, b in slanted:  # the bandwidth label follows its line on screen
        (x0, y0), (x1, y1) = ax.transData.transform([a, b])
        text.set_rotation(math.degrees(math.atan2(y1 - y0, x1 - x0)))
    from plot_results import save_figure  # matplotlib-dependent: imported only to draw

    return save_figure(fig, out_prefix)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", type=Path, help="folder with <gpu>/ result files")
    ap.add_argument("-o", "--out", required=True, type=Path,
                    help="output prefix; writes PREFIX.png and PREFIX.svg")
    ap.add_argument("--markdown", type=Path, help="also write the points as a Markdown table")
    ap.add_argument("--benchmark", default=NCU_BENCHMARK,
                    help=f"the profiled benchmark (default {NCU_BENCHMARK})")
    args = ap.parse_args(argv)
    try:
        records = fr.load_results(args.results_dir)
        ceilings = fr.load_ceilings(args.results_dir)
        kernels = fr.load_ncu(args.results_dir)
        points = roofline_points(records, kernels, args.benchmark)
    except (fr.ResultsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in plot(points, ceilings, records, args.out, args.benchmark):
        print(path)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(points, ceilings, args.benchmark), encoding="utf-8")
        print(args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
