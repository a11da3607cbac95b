# SPDX-License-Identifier: Apache-2.0
"""Tests of tools/book/tile_views.py on the repository's tile headers and steps: the parts
marked `// [introduced:NN]` give each step the headers as it knows them, no step uses a
`tile::` word introduced after it, each step's tile.diff shows what it introduces, and the
step diffs between 03 and 04 stay small."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

BOOK_TOOLS = Path(__file__).resolve().parents[1]
REPO = BOOK_TOOLS.parents[1]
sys.path.insert(0, str(BOOK_TOOLS))

import stage_book  # noqa: E402
import step_registry as reg  # noqa: E402
import tile_views as tv  # noqa: E402

TILE_WORD_RE = re.compile(r"\btile::(\w+)")


def headers() -> dict[str, str]:
    return {Path(h).name: (REPO / h).read_text(encoding="utf-8") for h in tv.HEADERS}


def steps_using_tiles() -> list[reg.Step]:
    return [s for s in reg.from_folders(REPO)
            if '#include "flashsteps/tile.h"' in s.source.read_text(encoding="utf-8")]


def known_code(step: str, vendor_header: str) -> str:
    """tile.h and one vendor's header as ``step`` knows them, comments removed."""
    h = headers()
    return tv.code_without_comments(tv.view(h["tile.h"], step) + tv.view(h[vendor_header], step))


def test_sections_and_views_of_a_small_header():
    text = ("// preamble\n#pragma once\n// [introduced:04a]\nint a;\n// [introduced:04]\nint c;\n"
            "// [introduced:04b]\nint b;\n// [introduced:04a]\n}  // end\n")
    assert tv.introducing_steps(text) == ["04a", "04b", "04"]
    assert tv.view(text, "03") == ""
    assert tv.view(text, "04a") == "// preamble\n#pragma once\nint a;\n}  // end\n"
    assert tv.view(text, "04b") == "// preamble\n#pragma once\nint a;\nint b;\n}  // end\n"
    assert tv.view(text, "04") == "// preamble\n#pragma once\nint a;\nint c;\nint b;\n}  // end\n"
    assert tv.view(text, "05") == tv.view(text, "04")


def test_the_last_step_sees_the_whole_headers():
    for name, text in headers().items():
        last = tv.introducing_steps(text)[-1]
        assert tv.view(text, last) == "".join(
            line for line in text.splitlines(keepends=True) if not tv.MARKER_RE.match(line)), name


def test_every_step_sees_the_vendor_header():
    # A part introduced late must not swallow the lines that every step needs: tile.h's view of
    # every step from 04a on includes the vendor headers, closing the namespace before them and
    # reopening it after.
    text = headers()["tile.h"]
    for step in tv.introducing_steps(text):
        view = tv.view(text, step)
        assert '#include "flashsteps/tile_cuda.h"' in view, step
        assert '#include "flashsteps/tile_hip.h"' in view, step
        assert re.search(r'^\}  // namespace flashsteps::tile\n\n#if [^\n]*\n#if FLASHSTEPS_VENDOR_HIP\n'
                         r'#include "flashsteps/tile_hip.h"\n#else\n#include "flashsteps/tile_cuda.h"\n#endif\n\n'
                         r'namespace flashsteps::tile \{', view, re.M), step


def test_every_part_of_the_tile_headers_is_marked():
    # The three tile headers each start with a step before their first part, and the words of
    # the later steps are not in the views of the earlier ones.
    h = headers()
    for name in ("tile.h", "tile_cuda.h", "tile_hip.h"):
        assert tv.introducing_steps(h[name])[0] == "04a", name
    cuda_04a = known_code("04a", "tile_cuda.h")
    for word in ("ldmatrix", "cp.async", "ex2.approx", "load_tile_async", "store_tile", "warp_any"):
        assert word not in cuda_04a, word
    for word in ("mma.sync", "mma_ABt_plain", "mma_AB_plain", "row_allreduce_max", "smem_pitch"):
        assert word in cuda_04a, word
    cuda_04b = known_code("04b", "tile_cuda.h")
    assert "ldmatrix" in cuda_04b and "store_tile" in cuda_04b
    for word in ("cp.async", "ex2.approx", "load_tile_async", "warp_any"):
        assert word not in cuda_04b, word
    hip_04a = known_code("04a", "tile_hip.h")
    assert "__builtin_amdgcn_mfma_f32_16x16x16f16" in hip_04a and "convert4" not in hip_04a


@pytest.mark.parametrize("step", [s.number for s in steps_using_tiles()])
def test_a_step_uses_no_tile_word_introduced_after_it(step):
    """Every tile:: word of the step's code is declared in the headers as the step knows
    them, for both vendors; so 04a cannot use ldmatrix's mma_ABt, nor 04b cp.async."""
    source = reg.by_number(reg.from_folders(REPO))[step].source.read_text(encoding="utf-8")
    used = set(TILE_WORD_RE.findall(tv.code_without_comments(source)))
    assert used, "the step includes tile.h but uses no tile:: word"
    cuda_only = '"flashsteps/tile_sm90.h"' in source  # the Hopper steps are never built for HIP
    for vendor in ("tile_cuda.h",) if cuda_only else ("tile_cuda.h", "tile_hip.h"):
        code = known_code(step, vendor)
        missing = sorted(w for w in used if not re.search(rf"\b{w}\b", code))
        assert not missing, f"step {step} uses {missing}, which {vendor} introduces after it"


def test_an_intermediate_step_really_is_held_to_its_view():
    # The check above would catch 04a calling the ldmatrix product.
    code = known_code("04a", "tile_cuda.h")
    assert not re.search(r"\bmma_ABt\b", code) and not re.search(r"\bexp2_rows\b", code)


def test_tile_diff_shows_what_each_step_introduces():
    steps = reg.by_number(reg.from_folders(REPO))
    d04a = tv.header_diff(REPO, steps["04a"].base, "04a")
    assert d04a.startswith("--- /dev/null\n+++ common/include/flashsteps/tile.h\n")
    assert "+__device__ __forceinline__ void mma_ABt_plain(" in d04a and "void ldmatrix_x4" not in d04a
    d04b = tv.header_diff(REPO, "04a", "04b")
    assert "+__device__ __forceinline__ void ldmatrix_x4(" in d04b
    assert not any(line.startswith("-") and not line.startswith("---") for line in d04b.splitlines())
    d04 = tv.header_diff(REPO, "04b", "04")
    assert "cp.async.cg.shared.global" in d04 and "ex2.approx.ftz.f32" in d04
    assert tv.header_diff(REPO, "04", "05") == ""


def test_the_climb_from_03_to_04_is_in_small_steps():
    """Each of 03 -> 04a -> 04b -> 04 changes at most 150 lines of code (the count the
    chapters print: + and - lines of the code hunks, comments and blank lines aside)."""
    steps = reg.by_number(reg.from_folders(REPO))
    for num in ("04a", "04b", "04"):
        step = steps[num]
        code, *_ = stage_book.folded_diff(steps[step.base].source, step.source, REPO)
        assert stage_book.code_lines_changed(code) <= 150, (step.base, num)


def test_a_dereference_is_code_not_a_comment():
    assert not stage_book._is_comment("      *reinterpret_cast<uint4*>(p) = x[it];")
    assert stage_book._is_comment(" * a line of a block comment")
    assert stage_book._is_comment("   *")
    assert stage_book._is_comment("  // a comment")


def test_the_book_renders_with_a_lettered_step_measured(tmp_path):
    """With results for 04a and not 04b, step 04 is compared with 04a, and the tools that
    sort steps take the letter (a copy of step 04's results, relabelled: made-up numbers)."""
    import json
    import shutil

    sys.path.insert(0, str(REPO / "tools" / "results"))
    import facts
    import flashsteps_results as fr

    src = REPO / "results" / "nvidia-h200" / "step04.json"
    if not src.is_file():
        pytest.skip("results/nvidia-h200/step04.json is not checked in")
    results = tmp_path / "results"
    shutil.copytree(REPO / "results", results)
    (results / "nvidia-h200" / "step04b.json").unlink(missing_ok=True)  # 04b: not measured here
    doc = json.loads(src.read_text())
    doc["context"]["flashsteps_step"], doc["context"]["flashsteps_step_name"] = "04a", "mma_plain"
    for b in doc["benchmarks"]:
        if "TFLOPS" in b:
            b["TFLOPS"] = b["TFLOPS"] / 2
    (results / "nvidia-h200" / "step04a.json").write_text(json.dumps(doc))
    records, ceilings = fr.load_results(results), fr.load_ceilings(results)
    v = facts.facts(records, ceilings, [], reg.from_folders(REPO))
    assert v["step04"]["base"] == "04a" and v["step04b"]["base"] == "04a"
    assert v["step04"]["headline"][0]["ratio"] == "2.00"
    rows = {r["step"]: r for r in v["overview"][0]["rows"] if r["step"]}
    assert rows["04"]["ratio"].endswith("(over 04a)") and rows["04b"]["tflops"] == "n/a"
    text = stage_book.render_chapter(REPO / "book" / "steps" / "04_tensor_cores.md", v, facts.FILTERS)
    assert "times as fast as step 04a" in " ".join(text.split())
