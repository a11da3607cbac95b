"""Tests of tools/timeline/plot_timeline.py on synthetic traces in the format trace_stepNN
writes (tools/timeline/trace_main.cu). Every number is made up; none is a measurement."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOOLS))
pytest.importorskip("matplotlib")

import plot_timeline as pt  # noqa: E402

RATE = 1000.0  # cycles per microsecond: 1000 cycles = 1 us
TILES = 4
# A consumer's tile, in cycles from its GEMM issue I: (phase, offset from I). Each lasts until
# the next; rescale lasts until the next tile's k_wait at I + 1000 - 150.
TILE_PHASES = [("k_wait", -150), ("turn", -100), ("issue", 0), ("s_wait", 100), ("softmax", 300),
               ("pv_wait", 700), ("rescale", 750)]


def issue_at(consumer: int, j: int) -> int:
    """Cycle of consumer's GEMM issue on tile j: the two alternate every 500 cycles."""
    return 1000 + 500 * consumer + 1000 * j


def make_trace(tiles: int = TILES) -> dict:
    """A block of a producer and two consumers in ping-pong, as trace_main.cu writes it."""
    producer = [[100, "q_load", "begin", 0]]
    for j in range(tiles):
        t = 150 + 1000 * j
        producer += [[t, "k_empty_wait", "begin", j], [t + 10, "k_load", "begin", j],
                     [t + 20, "v_empty_wait", "begin", j], [t + 30, "v_load", "begin", j]]
    producer.append([150 + 1000 * (tiles - 1) + 40, "none", "end", -1])
    lanes = [{"warpgroup": 0, "role": "producer", "sm": 7, "start": 0, "stop": producer[-1][0],
              "marks": len(producer), "dropped": 0, "events": producer}]
    for c in range(2):
        events = [[200, "q_wait", "begin", 0]]
        for j in range(tiles):
            events += [[issue_at(c, j) + off, phase, "begin", j] for phase, off in TILE_PHASES]
        end_of_tiles = issue_at(c, tiles - 1) + 850
        events += [[end_of_tiles, "epilogue", "begin", -1], [end_of_tiles + 200, "none", "end", -1]]
        lanes.append({"warpgroup": c + 1, "role": f"consumer {c}", "sm": 7, "start": 3,
                      "stop": end_of_tiles + 200, "marks": len(events), "dropped": 0, "events": events})
    return {
        "format": "flashsteps-timeline", "version": 1, "step": "08", "step_name": "warp_specialized",
        "meta": {"gpu_name": "Test GPU (synthetic)", "git_commit": "0123456789ab", "date": "2026-01-01T00:00:00Z"},
        "problem": {"name": "attention/bf16/hd128/n8192/full", "dtype": "bf16", "head_dim": 128,
                    "seqlen_q": 8192, "seqlen_k": 8192, "causal": False},
        "launch": {"grid": 2048, "threads": 384, "warpgroups": 3, "block_m": 128, "block_n": 128, "stages": 2},
        "traced_block": 1024,
        "clock": {"source": "clock64", "cycles_per_us": RATE, "max_clock_mhz": 1980},
        "event_fields": ["cycles", "phase", "edge", "tile"],
        "lanes": lanes,
    }


def write(tmp_path: Path, doc: dict, name: str = "trace.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# --- reading -------------------------------------------------------------------------------

def test_intervals_run_from_mark_to_mark_and_setup_before_the_first():
    consumer = make_trace()["lanes"][1]
    ivs = pt.intervals(consumer)
    assert ivs[0] == pt.Interval("setup", -1, 3, 200)
    assert ivs[1] == pt.Interval("q_wait", 0, 200, 850)       # until tile 0's k_wait
    assert ivs[2] == pt.Interval("k_wait", 0, 850, 900)
    assert ivs[4] == pt.Interval("issue", 0, 1000, 1100)
    assert ivs[8] == pt.Interval("rescale", 0, 1750, 1850)    # until tile 1's k_wait
    assert ivs[-1] == pt.Interval("epilogue", -1, 4850, 5050)  # closed by the end record
    assert all(a.end == b.start for a, b in zip(ivs, ivs[1:]))  # contiguous: every cycle is a phase


def test_an_open_phase_ends_at_the_lanes_stop_and_zero_length_phases_are_dropped():
    lane = {"role": "consumer 0", "start": 0, "stop": 500,
            "events": [[0, "q_wait", "begin", 0], [100, "k_wait", "begin", 0], [100, "turn", "begin", 0]]}
    assert pt.intervals(lane) == [pt.Interval("q_wait", 0, 0, 100), pt.Interval("turn", 0, 100, 500)]
    lane["stop"] = None  # a lane that never stopped: its last phase has no end
    assert pt.intervals(lane) == [pt.Interval("q_wait", 0, 0, 100)]


def test_an_end_record_leaves_a_gap_until_the_next_begin():
    lane = {"role": "producer", "start": 0, "stop": 400,
            "events": [[0, "k_load", "begin", 0], [50, "none", "end", -1], [300, "v_load", "begin", 0]]}
    assert pt.intervals(lane) == [pt.Interval("k_load", 0, 0, 50), pt.Interval("v_load", 0, 300, 400)]


def test_summary_in_microseconds_at_the_measured_clock():
    totals = pt.summary(make_trace())
    assert totals["consumer 0"]["softmax"] == pytest.approx(TILES * 400 / RATE)
    assert totals["consumer 1"]["issue"] == pytest.approx(TILES * 100 / RATE)
    assert totals["consumer 1"]["q_wait"] == pytest.approx((1350 - 200) / RATE)
    assert totals["producer"]["k_load"] == pytest.approx(TILES * 10 / RATE)
    # Clipped to a window: tile 1 of consumer 0 (1850 .. 2850 cycles) holds one softmax.
    assert pt.summary(make_trace(), (1.85, 2.85))["consumer 0"]["softmax"] == pytest.approx(0.4)


def test_handovers_alternate_between_the_consumers():
    pairs = pt.handovers(make_trace())
    assert len(pairs) == 2 * TILES - 1
    (la, a, lb, b) = pairs[0]
    assert (la, a.start, lb, b.start) == (1, 1000, 2, 1500)
    assert [(p[0], p[2]) for p in pairs[:3]] == [(1, 2), (2, 1), (1, 2)]


def test_two_issues_of_one_consumer_in_a_row_are_no_handover():
    doc = make_trace()
    # Consumer 1 loses its issue of tile 0 (it becomes a softmax): consumer 0 issues twice in a row.
    for ev in doc["lanes"][2]["events"]:
        if ev[1] == "issue" and ev[3] == 0:
            ev[1] = "softmax"
    pairs = pt.handovers(doc)
    assert len(pairs) == 2 * TILES - 3
    assert (pairs[0][0], pairs[0][1].start, pairs[0][3].start) == (1, 2000, 2500)


def test_tile_window_spans_the_consumers_phases_on_those_tiles():
    start, end = pt.tile_window(make_trace(), 1, 2)
    assert (start, end) == pytest.approx(((issue_at(0, 1) - 150) / RATE, (issue_at(1, 2) + 850) / RATE))
    with pytest.raises(pt.TraceError, match="tiles 9 to 9"):
        pt.tile_window(make_trace(), 9, 9)


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d.update(version=2), "version"),
    (lambda d: d["clock"].update(cycles_per_us=0), "clock.cycles_per_us"),
    (lambda d: d.update(lanes=[]), "lanes"),
    (lambda d: d["lanes"][1].pop("role"), "lanes[1].role"),
    (lambda d: d["lanes"][1]["events"][3].__setitem__(0, 10), "lanes[1].events[3][0]"),
    (lambda d: d["lanes"][0]["events"][2].__setitem__(2, "middle"), "lanes[0].events[2][2]"),
    (lambda d: d["lanes"][2]["events"][1].pop(), "lanes[2].events[1]"),
])
def test_malformed_traces_name_the_file_and_the_field(tmp_path, edit, field):
    doc = make_trace()
    edit(doc)
    path = write(tmp_path, doc)
    with pytest.raises(pt.TraceError) as exc:
        pt.load_trace(path)
    assert str(path) in str(exc.value) and f"{field}:" in str(exc.value)


def test_load_trace_reads_what_make_trace_writes(tmp_path):
    doc = make_trace()
    assert pt.load_trace(write(tmp_path, doc)) == doc


# --- drawing -------------------------------------------------------------------------------

def test_plot_writes_png_and_svg_with_a_legend_of_the_phases_drawn(tmp_path):
    paths = pt.plot(make_trace(), tmp_path / "timeline")
    assert [p.name for p in paths] == ["timeline.png", "timeline.svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = paths[1].read_text()
    for label in ("softmax", "wait: turn (named barrier)", "TMA issue: K tile", "epilogue: O, LSE",
                  "setup (barriers, setmaxnreg)"):
        assert label in svg
    assert "hand-over of the tensor cores" in svg
    assert "consumer 1" in svg and "producer" in svg
    assert "block 1024 of 2048" in svg and "Test GPU (synthetic)" in svg


def test_plot_is_deterministic(tmp_path):
    a = pt.plot(make_trace(), tmp_path / "a")
    b = pt.plot(make_trace(), tmp_path / "b")
    assert a[0].read_bytes() == b[0].read_bytes() and a[1].read_bytes() == b[1].read_bytes()


def test_a_window_leaves_out_the_phases_outside_it(tmp_path):
    window = pt.tile_window(make_trace(), 1, 1)
    svg = pt.plot(make_trace(), tmp_path / "zoom", window)[1].read_text()
    assert pt.PHASES["softmax"][0] in svg
    assert pt.PHASES["epilogue"][0] not in svg and pt.PHASES["q_load"][0] not in svg


def test_a_phase_the_tool_does_not_know_is_drawn_under_its_own_name(tmp_path):
    doc = make_trace()
    doc["lanes"][1]["events"][3][1] = "new_phase_of_step_09"
    svg = pt.plot(doc, tmp_path / "unknown")[1].read_text()
    assert "new_phase_of_step_09" in svg


def test_dropped_marks_are_said_in_the_title(tmp_path):
    doc = make_trace()
    doc["lanes"][1]["dropped"] = 12
    svg = pt.plot(doc, tmp_path / "dropped")[1].read_text()
    assert "12 marks dropped" in svg


def test_command_line_zoom_and_summary(tmp_path):
    path = write(tmp_path, make_trace())
    run = subprocess.run([sys.executable, str(TOOLS / "plot_timeline.py"), str(path), "-o", str(tmp_path / "fig"),
                          "--tiles", "1", "2", "--summary"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "fig.png").exists() and (tmp_path / "fig.svg").exists()
    assert "consumer 0:" in run.stdout and "softmax" in run.stdout


def test_command_line_rejects_a_malformed_trace(tmp_path):
    doc = make_trace()
    doc["version"] = 7
    run = subprocess.run([sys.executable, str(TOOLS / "plot_timeline.py"), str(write(tmp_path, doc)),
                          "-o", str(tmp_path / "fig")], capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "version" in run.stderr
    assert not (tmp_path / "fig.png").exists()


def test_a_step_that_moved_work_between_phases_gets_its_own_labels(tmp_path):
    """Step 09 rescales O inside its turn, so its legend says so and its "rescale" mark is
    labelled as what is left there (packing P); step 08's keep the common labels."""
    doc = make_trace()
    doc["step"] = "09"
    svg = pt.plot(doc, tmp_path / "s09")[1].read_text()
    assert pt.phase_label(doc, "rescale") == "pack P" and "pack P" in svg
    assert pt.PHASES["rescale"][0] not in svg and pt.PHASES["issue"][0] not in svg
    assert pt.phase_label(doc, "softmax") == pt.PHASES["softmax"][0]
    assert pt.phase_label(make_trace(), "rescale") == pt.PHASES["rescale"][0]
