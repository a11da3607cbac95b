"""Tests for tools/results/check_step_headers.py on the checked-in results and step headers,
and on copies of a header with one number changed."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
REPO = TOOLS.parents[1]
sys.path.insert(0, str(TOOLS))

import check_step_headers as csh  # noqa: E402
import flashsteps_results as fr  # noqa: E402

HEADER = ("// Measured on an NVIDIA H200 (bf16, D = 128, N = 4096, non-causal): {tflops} TFLOP/s, "
          "{ratio}x step 03's 19.7\n// (results/nvidia-h200/, commit {commit}).\n// Limits: none.\n")
POINT = "attention/bf16/hd128/n4096/full"


def median_tflops(step: str) -> float:
    """Step's published TFLOP/s at POINT (results/nvidia-h200/stepNN.json)."""
    doc = json.loads((REPO / "results" / "nvidia-h200" / f"step{step}.json").read_text())
    return next(b["TFLOPS"] for b in doc["benchmarks"]
                if b.get("aggregate_name") == "median" and b["run_name"].startswith(POINT + "/"))


@pytest.fixture(scope="module")
def measured():
    if not (REPO / "results" / "nvidia-h200" / "step04.json").is_file():
        pytest.skip("results/nvidia-h200/step04.json is not checked in")
    return fr.load_results(REPO / "results"), fr.load_ceilings(REPO / "results")


@pytest.fixture(scope="module")
def published():
    """Step 04's TFLOP/s, its ratio over step 03 and its commit, as published (whatever the
    current run says, so the tests below do not go stale with a new run)."""
    doc = json.loads((REPO / "results" / "nvidia-h200" / "step04.json").read_text())
    t4 = median_tflops("04")
    return t4, t4 / median_tflops("03"), str(doc["context"]["git_commit"])[:7]


def header(tflops: str, ratio: str, commit: str) -> str:
    return HEADER.format(tflops=tflops, ratio=ratio, commit=commit)


def checks(text: str, measured) -> list[csh.Check]:
    return csh.check_step("04", csh.measured_paragraph(text), *measured)


def test_the_checked_in_headers_agree_with_the_json():
    assert csh.main([str(REPO / "results"), str(REPO / "steps")]) == 0


def test_rounding_is_the_one_written(measured, published):
    t4, ratio, commit = published
    assert all(c.ok() for c in checks(header(f"{t4:.0f}", f"{ratio:.0f}", commit), measured))
    assert all(c.ok() for c in checks(header(f"{t4:.1f}", f"{ratio:.1f}", commit), measured))
    wrong_t, wrong_r = f"{round(t4) - 1}", f"{ratio + 0.1:.1f}"
    bad = [c for c in checks(header(wrong_t, wrong_r, commit), measured) if not c.ok()]
    assert [c.written for c in bad] == [wrong_t, wrong_r]


def test_a_wrong_commit_fails(measured, published):
    t4, ratio, _ = published
    text = header(f"{t4:.0f}", f"{ratio:.0f}", "abcdef1")
    assert [c.written for c in checks(text, measured) if not c.ok()] == ["abcdef1"]


def test_a_number_it_cannot_check_fails(measured, published):
    t4, ratio, commit = published
    text = header(f"{t4:.0f}", f"{ratio:.0f}", commit).replace(f"commit {commit}", "about 3 ms")
    with pytest.raises(csh.HeaderError, match="cannot read back.*3"):
        checks(text, measured)


def test_a_drifted_header_fails_the_run(measured, tmp_path, capsys):
    steps = tmp_path / "steps"
    shutil.copytree(REPO / "steps" / "04_tensor_cores", steps / "04_tensor_cores",
                    ignore=shutil.ignore_patterns("*.json", "*.md"))
    source = steps / "04_tensor_cores" / "step.cu"
    text = source.read_text()
    written = re.search(r"^// Measured on [^:]*: (\d+) TFLOP/s", text, re.M)
    assert written, "step 04's header gives its TFLOP/s"
    drifted = str(int(written[1]) + 10)
    source.write_text(text[:written.start(1)] + drifted + text[written.end(1):])
    assert csh.main([str(REPO / "results"), str(steps)]) == 1
    assert f"TFLOP/s: written {drifted}, JSON" in capsys.readouterr().out


def test_the_tensor_core_over_fma_ratio_is_read_back(measured):
    """'Xx the measured fp32 FMA rate' anywhere in the header is the GEMM ceiling over the
    FMA ceiling (13.1 on the H200), not a datasheet ratio such as ~16 or 14.8."""
    para = csh.measured_paragraph(header("320", "16", "9108a20"))
    ok = csh.check_rates("04", "a dense bf16 GEMM runs at 13.1x the measured fp32 FMA rate",
                         para, *measured)
    assert [c.ok() for c in ok] == [True]
    bad = csh.check_rates("04", "16x the measured fp32 FMA rate", para, *measured)
    assert [c.ok() for c in bad] == [False]
    text = (REPO / "steps" / "04_tensor_cores" / "step.cu").read_text()
    assert csh.TC_FMA_RE.search(csh.header_text(text)), "step 04 states the ratio, checked"
    assert "~16x the fp32" not in csh.header_text(text)


def test_not_measured_yet_passes_until_results_hold_the_step(tmp_path, capsys):
    """A step not measured yet says '// Not measured yet.' instead of the paragraph: fine
    while no results file holds the step, a failure once one does."""
    steps = tmp_path / "steps"
    shutil.copytree(REPO / "steps" / "04a_mma_plain", steps / "04a_mma_plain")
    # The header as it was before 04a was measured: 'Not measured yet.' instead of the paragraph.
    source = steps / "04a_mma_plain" / "step.cu"
    text = source.read_text()
    paragraph = re.search(r"^// Measured on .*?(?=^// Limits:)", text, re.M | re.S)
    assert paragraph, "step 04a's header has a 'Measured on' paragraph"
    source.write_text(text[:paragraph.start()] + "// Not measured yet.\n" + text[paragraph.end():])
    results = tmp_path / "results"
    gpu = results / "test-gpu"
    gpu.mkdir(parents=True)
    src = json.loads((REPO / "results" / "nvidia-h200" / "step04.json").read_text()) \
        if (REPO / "results" / "nvidia-h200" / "step04.json").is_file() else None
    if src is None:
        pytest.skip("results/nvidia-h200/step04.json is not checked in")
    (gpu / "step04.json").write_text(json.dumps(src))
    assert csh.main([str(results), str(steps)]) == 0
    assert "step 04a: not measured yet" in capsys.readouterr().out
    src["context"]["flashsteps_step"], src["context"]["flashsteps_step_name"] = "04a", "mma_plain"
    (gpu / "step04a.json").write_text(json.dumps(src))
    assert csh.main([str(results), str(steps)]) == 1
    assert "says 'Not measured yet.', but results hold it: " in capsys.readouterr().out
