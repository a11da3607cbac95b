#!/usr/bin/env python3
"""Draw the timeline of one block of a Hopper step from the JSON of trace_stepNN.

    python3 tools/timeline/plot_timeline.py trace.json -o out/timeline [--tiles 8 11]
                                            [--window-us A B] [--title TEXT] [--summary]

writes ``<OUT_PREFIX>.png`` and ``<OUT_PREFIX>.svg``: one lane per warpgroup (the producer
at the top, then consumer 0, consumer 1, ...), one bar per phase, x in microseconds from the
block's start, and a legend of the phases drawn. A phase lasts from its mark to the lane's
next mark (trace_sm90.h: one store per phase change); the time from a lane's start to its
first mark is "setup". Cycles of the SM clock become microseconds at the clock measured over
the block (the JSON's ``clock.cycles_per_us``). Arrows show the ping-pong hand-over: from the
end of one consumer's GEMM issue to the start of the next issue, made by another consumer
(drawn when the window holds at most 60 of them).

``--tiles A B`` zooms to the consumers' phases on key/value tiles A to B; ``--window-us``
sets the span directly. ``--summary`` prints each lane's time per phase (microseconds and
share of the lane's span) over the window. The output is deterministic: the same input gives
byte-identical SVG/PNG.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "results"))
from plot_results import save_figure  # noqa: E402

FORMAT, VERSION = "flashsteps-timeline", 1
MAX_ARROWS = 60

# Every phase of trace_sm90.h's TracePhase (and "setup"): legend label and colour. Data
# arriving and stalls are light, the tensor-core issue and the softmax strong.
PHASES: dict[str, tuple[str, str]] = {
    "setup": ("setup (barriers, setmaxnreg)", "#e0e0e0"),
    "q_load": ("TMA issue: Q", "#08519c"),
    "k_empty_wait": ("wait: K buffer released (k_empty)", "#c6dbef"),
    "k_load": ("TMA issue: K tile", "#3182bd"),
    "v_empty_wait": ("wait: V buffer released (v_empty)", "#deebf7"),
    "v_load": ("TMA issue: V tile", "#6baed6"),
    "q_wait": ("wait: Q landed (q_full)", "#fdd0a2"),
    "k_wait": ("wait: K landed (k_full)", "#fdae6b"),
    "v_wait": ("wait: V landed (v_full)", "#fee6ce"),
    "turn": ("wait: turn (named barrier)", "#bcbddc"),
    "issue": ("GEMM issue: S = QKᵀ, O += PV", "#d62728"),
    "s_wait": ("wait: S (wgmma.wait_group 1)", "#f7b6d2"),
    "softmax": ("softmax", "#2ca02c"),
    "pv_wait": ("wait: PV (wgmma.wait_group 0)", "#c49c94"),
    "rescale": ("rescale O, pack P", "#98df8a"),
    "epilogue": ("epilogue: O, LSE", "#8c564b"),
    "o_buffer_wait": ("wait: O buffer read by TMA", "#e7cb94"),
    "o_write": ("epilogue: O / l into shared memory", "#a0522d"),
    "o_fence": ("epilogue: proxy fence, barrier", "#d6616b"),
    "o_store": ("TMA issue: O", "#636363"),
    "next_tile": ("on to the next work tile", "#9edae5"),
}
# Where a step's code does other work in a phase than PHASES' label says, its own label: step
# 09 rescales O inside its turn (after issuing S, before the P V), so its "rescale" mark only
# packs P.
STEP_LABELS: dict[str, dict[str, str]] = {
    "09": {"issue": "GEMM issue: S = QKᵀ, O *= α, O += PV", "rescale": "pack P",
           "epilogue": "epilogue: row sums, 1 / l, LSE"},
}
UNKNOWN_COLOR = "#7f7f7f"
ARROW_COLOR = "#333333"


def phase_label(doc: dict, phase: str) -> str:
    """The legend label of @p phase in the trace @p doc (its step's own where it has one)."""
    return STEP_LABELS.get(str(doc.get("step", "")), {}).get(phase) or PHASES.get(phase, (phase, ""))[0]


class TraceError(ValueError):
    """A trace file that is not what trace_stepNN writes; the message names file and field."""


@dataclass(frozen=True)
class Interval:
    """One phase of one lane, in cycles from the block's start."""
    phase: str
    tile: int
    start: int
    end: int


def load_trace(path: Path) -> dict:
    """Reads and checks a trace file (format, version, clock, lanes and their events)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise TraceError(f"{path}: {exc}") from exc

    def need(cond: bool, field: str, what: str) -> None:
        if not cond:
            raise TraceError(f"{path}: {field}: {what}")

    need(isinstance(doc, dict) and doc.get("format") == FORMAT, "format", f"expected {FORMAT!r}")
    need(doc.get("version") == VERSION, "version", f"expected {VERSION}, got {doc.get('version')!r}")
    rate = doc.get("clock", {}).get("cycles_per_us") if isinstance(doc.get("clock"), dict) else None
    need(isinstance(rate, (int, float)) and rate > 0, "clock.cycles_per_us", "a positive number")
    lanes = doc.get("lanes")
    need(isinstance(lanes, list) and lanes, "lanes", "a non-empty list")
    for i, lane in enumerate(lanes):
        where = f"lanes[{i}]"
        need(isinstance(lane, dict), where, "an object")
        need(isinstance(lane.get("role"), str), f"{where}.role", "a string")
        need(isinstance(lane.get("start"), int), f"{where}.start", "an integer (cycles)")
        need(lane.get("stop") is None or isinstance(lane.get("stop"), int), f"{where}.stop",
             "an integer (cycles) or null")
        events = lane.get("events")
        need(isinstance(events, list), f"{where}.events", "a list")
        last = lane["start"]
        for k, ev in enumerate(events):
            ew = f"{where}.events[{k}]"
            need(isinstance(ev, list) and len(ev) == 4, ew, "[cycles, phase, edge, tile]")
            need(isinstance(ev[0], int) and ev[0] >= last, f"{ew}[0]",
                 "integer cycles, not before the lane's start or the previous event")
            need(isinstance(ev[1], str), f"{ew}[1]", "a phase name")
            need(ev[2] in ("begin", "end"), f"{ew}[2]", "'begin' or 'end'")
            need(isinstance(ev[3], int), f"{ew}[3]", "an integer tile")
            last = ev[0]
    return doc


def intervals(lane: dict) -> list[Interval]:
    """The lane's phases: each begin lasts until the lane's next event (or its stop); an end
    event closes the open phase. The time before the first event is "setup"."""
    events = lane["events"]
    out = []
    if events and events[0][0] > lane["start"]:
        out.append(Interval("setup", -1, lane["start"], events[0][0]))
    for k, (t, phase, edge, tile) in enumerate(events):
        if edge != "begin":
            continue
        end = events[k + 1][0] if k + 1 < len(events) else lane.get("stop")
        if end is not None and end > t:
            out.append(Interval(phase, tile, t, end))
    return out


def to_us(doc: dict, cycles: float) -> float:
    """Cycles from the block's start in microseconds, at the clock measured over the block."""
    return cycles / doc["clock"]["cycles_per_us"]


def tile_window(doc: dict, first: int, last: int) -> tuple[float, float]:
    """(start, end) in microseconds of the consumers' phases on tiles first .. last."""
    spans = [(iv.start, iv.end) for lane in doc["lanes"] if lane["role"] != "producer"
             for iv in intervals(lane) if first <= iv.tile <= last]
    if not spans:
        raise TraceError(f"no consumer phase on tiles {first} to {last}")
    return to_us(doc, min(s for s, _ in spans)), to_us(doc, max(e for _, e in spans))


def handovers(doc: dict) -> list[tuple[int, Interval, int, Interval]]:
    """The ping-pong hand-overs: every GEMM issue of the consumers in time order, paired with
    the next one when another consumer makes it, as (lane index, issue, lane index, next issue)."""
    issues = sorted(((iv.start, li, iv) for li, lane in enumerate(doc["lanes"])
                     if lane["role"] != "producer" for iv in intervals(lane) if iv.phase == "issue"),
                    key=lambda x: (x[0], x[1]))
    return [(a[1], a[2], b[1], b[2]) for a, b in zip(issues, issues[1:]) if a[1] != b[1]]


def summary(doc: dict, window: tuple[float, float] | None = None) -> dict[str, dict[str, float]]:
    """Microseconds per phase of every lane (clipped to the window, in microseconds)."""
    out: dict[str, dict[str, float]] = {}
    for lane in doc["lanes"]:
        totals: dict[str, float] = {}
        for iv in intervals(lane):
            a, b = to_us(doc, iv.start), to_us(doc, iv.end)
            if window:
                a, b = max(a, window[0]), min(b, window[1])
            if b > a:
                totals[iv.phase] = totals.get(iv.phase, 0.0) + (b - a)
        out[lane["role"]] = totals
    return out


def format_summary(doc: dict, window: tuple[float, float] | None = None) -> str:
    """summary() as a table: per lane, each phase's microseconds and share of the lane."""
    lines = []
    for role, totals in summary(doc, window).items():
        span = sum(totals.values())
        lines.append(f"{role}: {span:.2f} us")
        for phase, us in sorted(totals.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {phase:<14} {us:9.2f} us {100 * us / span:5.1f} %")
    return "\n".join(lines)


def default_title(doc: dict) -> str:
    """Step, block, problem and GPU, from the trace's metadata."""
    prob, launch, meta = doc.get("problem", {}), doc.get("launch", {}), doc.get("meta", {})
    step = f"Step {doc.get('step', '?')} ({doc.get('step_name', '?')})"
    block = f"block {doc.get('traced_block', '?')} of {launch.get('grid', '?')}"
    shape = (f"{prob.get('dtype', '?')}, D = {prob.get('head_dim', '?')}, N = {prob.get('seqlen_q', '?')}, "
             f"{'causal' if prob.get('causal') else 'full'}")
    return f"{step}: {block}, {shape}, {meta.get('gpu_name', '?')}"


def plot(doc: dict, out_prefix: Path, window: tuple[float, float] | None = None,
         title: str | None = None) -> list[Path]:
    """Draws the timeline (optionally only the window, in microseconds) and writes PNG + SVG;
    returns the paths written."""
    plt.rcParams.update({"svg.hashsalt": "flashsteps", "svg.fonttype": "none", "font.size": 9})
    lanes = doc["lanes"]
    y_of = {li: len(lanes) - 1 - li for li in range(len(lanes))}  # the producer at the top
    drawn: dict[str, str] = {}
    bars: list[tuple[int, str, list[tuple[float, float]]]] = []
    for li, lane in enumerate(lanes):
        by_phase: dict[str, list[tuple[float, float]]] = {}
        for iv in intervals(lane):
            a, b = to_us(doc, iv.start), to_us(doc, iv.end)
            if window and (b < window[0] or a > window[1]):
                continue
            by_phase.setdefault(iv.phase, []).append((a, b - a))
        for phase, spans in by_phase.items():
            drawn.setdefault(phase, PHASES.get(phase, (phase, UNKNOWN_COLOR))[1])
            bars.append((li, phase, spans))
    pairs = handovers(doc)
    if window:
        pairs = [p for p in pairs if window[0] <= to_us(doc, p[1].end) and to_us(doc, p[3].start) <= window[1]]
    arrows = pairs if len(pairs) <= MAX_ARROWS else []

    order = [p for p in PHASES if p in drawn] + sorted(p for p in drawn if p not in PHASES)
    handles = [Patch(facecolor=drawn[p], label=phase_label(doc, p)) for p in order]
    if arrows:
        handles.append(Line2D([], [], color=ARROW_COLOR, lw=0.7, marker=">", markersize=4,
                              label="hand-over of the tensor cores"))
    legend_rows = -(-len(handles) // 4)
    dropped = sum(lane.get("dropped", 0) for lane in lanes)
    height = 0.55 * len(lanes) + 1.3 + 0.22 * legend_rows + (0.2 if dropped else 0)
    fig, ax = plt.subplots(figsize=(12, height))
    for li, phase, spans in bars:
        ax.broken_barh(spans, (y_of[li] - 0.35, 0.7), facecolors=drawn[phase], edgecolors="none")
    for la, a, lb, b in arrows:
        up = y_of[lb] > y_of[la]  # from the top or bottom edge of one bar to the facing edge of the next
        ax.annotate("", xy=(to_us(doc, b.start), y_of[lb] - 0.35 * (1 if up else -1)),
                    xytext=(to_us(doc, a.end), y_of[la] + 0.35 * (1 if up else -1)),
                    arrowprops={"arrowstyle": "->", "lw": 0.7, "color": ARROW_COLOR, "shrinkA": 0, "shrinkB": 0})
    ax.set_yticks([y_of[li] for li in range(len(lanes))], [lane["role"] for lane in lanes])
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    if window:
        ax.set_xlim(*window)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_xlabel(f"time from the block's start (µs; SM clock {doc['clock']['cycles_per_us']:.0f} MHz, "
                  "measured over the block)")
    ax.set_title((title or default_title(doc)) + (f"\n({dropped} marks dropped: buffer full)" if dropped else ""))
    fig.legend(handles=handles, loc="lower center", ncol=4, frameon=False, fontsize=8)
    fig.tight_layout(rect=(0, (0.05 + 0.19 * legend_rows) / height, 1, 1))
    return save_figure(fig, out_prefix)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", type=Path, help="JSON written by trace_stepNN")
    ap.add_argument("-o", "--out", required=True, type=Path,
                    help="output prefix; writes PREFIX.png and PREFIX.svg")
    zoom = ap.add_mutually_exclusive_group()
    zoom.add_argument("--tiles", nargs=2, type=int, metavar=("FIRST", "LAST"),
                      help="zoom to the consumers' phases on key/value tiles FIRST to LAST")
    zoom.add_argument("--window-us", nargs=2, type=float, metavar=("START", "END"),
                      help="zoom to this span, microseconds from the block's start")
    ap.add_argument("--title", help="figure title (default: step, block, problem and GPU)")
    ap.add_argument("--summary", action="store_true", help="print each lane's time per phase")
    args = ap.parse_args(argv)
    try:
        doc = load_trace(args.trace)
        window = tile_window(doc, *args.tiles) if args.tiles else tuple(args.window_us) if args.window_us else None
        if window and not window[0] < window[1]:
            raise TraceError(f"empty window {window[0]} to {window[1]} us")
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in plot(doc, args.out, window, args.title):
        print(path)
    if args.summary:
        print(format_summary(doc, window))
    return 0


if __name__ == "__main__":
    sys.exit(main())
