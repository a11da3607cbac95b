# SPDX-License-Identifier: Apache-2.0
"""book_timeline.generate(): the chapters' timeline figures and tables from the traces under
results/<gpu>/timeline/, or a line saying none is measured."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(Path(__file__).resolve().parent))
pytest.importorskip("matplotlib")

import book_timeline  # noqa: E402
from test_plot_timeline import make_trace  # noqa: E402

REPO = TOOLS.parents[1]


def fake_repo(tmp_path: Path, traces: dict[str, dict]) -> Path:
    """A repository with the real plot_timeline.py and @p traces under results/gpu-x/timeline/."""
    (tmp_path / "tools" / "timeline").mkdir(parents=True)
    (tmp_path / "tools" / "timeline" / "plot_timeline.py").write_text((TOOLS / "plot_timeline.py").read_text())
    folder = tmp_path / "results" / "gpu-x" / "timeline"
    folder.mkdir(parents=True)
    for name, doc in traces.items():
        (folder / name).write_text(json.dumps(doc))
    return tmp_path


def test_each_trace_gives_a_figure_and_a_table_of_phases(tmp_path):
    repo = fake_repo(tmp_path, {"step08_bf16_d128_n8192_full.json": make_trace(24)})
    files = book_timeline.generate(repo, tmp_path / "out", "/_generated/steps/08_x", "08")
    svg = "timeline_gpu-x_step08_bf16_d128_n8192_full.svg"
    assert set(files) == {"timeline.md", svg}
    md = files["timeline.md"]
    assert f"```{{figure}} /_generated/steps/08_x/{svg}" in md
    assert "key tiles 16 to 19" in md and "results/gpu-x/timeline/step08_bf16_d128_n8192_full.json" in md
    # Tiles 16-19 of the synthetic block: each consumer's softmax is 400 of every 1000 cycles
    # (1 µs per tile at 1000 cycles per µs), so about 1.6 µs over the four tiles.
    line = next(l for l in md.splitlines() if l.startswith("| consumer 0 | softmax"))
    assert abs(float(line.split("|")[3]) - 1.6) < 0.15, line
    assert files[svg].startswith(b"<?xml")


def test_a_short_trace_is_shown_whole_and_other_steps_are_ignored(tmp_path):
    repo = fake_repo(tmp_path, {"step09_bf16_d128_n8192_full.json": make_trace(4),
                                "step08_bf16_d128_n8192_full.json": make_trace(4)})
    md = book_timeline.generate(repo, tmp_path / "out", "/u", "09")["timeline.md"]
    assert "every tile" in md and "step09_bf16" in md and "step08_bf16" not in md


def test_without_a_trace_the_chapter_says_so(tmp_path):
    files = book_timeline.generate(fake_repo(tmp_path, {}), tmp_path / "out", "/u", "08")
    assert list(files) == ["timeline.md"]
    assert "No timeline of step 08 is measured yet" in files["timeline.md"]
