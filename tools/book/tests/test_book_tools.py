# SPDX-License-Identifier: Apache-2.0
"""Tests of the book's build tools (tools/book/*.py) on small synthetic trees.

    python3 -m pytest tools/book/tests -q

They need only the standard library and pytest; the stage_book test that runs the results
tools is skipped when matplotlib is missing.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1]
REPO = TOOLS.parents[1]
sys.path.insert(0, str(TOOLS))

import check_markers  # noqa: E402
import check_site  # noqa: E402
import stage_book  # noqa: E402

STEP = """// SPDX-License-Identifier: Apache-2.0
namespace demo {
// [start:kernel]
__global__ void kernel() {}
// [end:kernel]
// [start:empty]
// [end:empty]
}
"""


def make_repo(tmp_path: Path, chapter: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "steps" / "01_naive").mkdir(parents=True)
    (repo / "steps" / "01_naive" / "step.cu").write_text(STEP)
    (repo / "common").mkdir()
    (repo / "common" / "x.h").write_text("int a;\nint b;\nint a;\n")
    (repo / "book" / "steps").mkdir(parents=True)
    (repo / "book" / "index.md").write_text("# Index\n")
    (repo / "book" / "steps" / "01_naive.md").write_text(chapter)
    return repo


def markers(tmp_path: Path, chapter: str) -> tuple[int, str]:
    repo = make_repo(tmp_path, chapter)
    checker = check_markers.Checker(repo, (repo / "book").resolve(), None)
    for block in check_markers.parse_blocks(repo / "book" / "steps" / "01_naive.md"):
        checker.check_block(block)
    return len(checker.errors), "\n".join(checker.errors)


def include(path: str, *options: str, fence: str = "```") -> str:
    return f"# T\n\n{fence}{{literalinclude}} {path}\n" + "".join(o + "\n" for o in options) + fence + "\n"


def test_marker_that_exists_passes(tmp_path):
    n, text = markers(tmp_path, include("/steps/01_naive/step.cu", ":language: cuda",
                                        ':start-after: "[start:kernel]"', ":end-before: [end:kernel]"))
    assert n == 0, text


def test_missing_marker_fails_and_names_the_markers(tmp_path):
    n, text = markers(tmp_path, include("/steps/01_naive/step.cu", ":start-after: [start:nope]",
                                        ":end-before: [end:nope]"))
    assert n == 1 and "[start:nope]" in text and "kernel" in text


def test_missing_file_fails(tmp_path):
    n, text = markers(tmp_path, include("/steps/02_tiled/step.cu"))
    assert n == 1 and "no file" in text


def test_empty_region_fails(tmp_path):
    n, text = markers(tmp_path, include("/steps/01_naive/step.cu", ":start-after: [start:empty]",
                                        ":end-before: [end:empty]"))
    assert n == 1 and "empty" in text


def test_step_parts_need_markers_and_other_files_need_unique_text(tmp_path):
    n, text = markers(tmp_path / "a", include("/steps/01_naive/step.cu", ":start-at: __global__"))
    assert n == 1 and "marker" in text
    n, text = markers(tmp_path / "b", include("/common/x.h", ":start-at: int a;"))
    assert n == 1 and "ambiguous" in text
    n, text = markers(tmp_path / "c", include("/common/x.h", ":start-at: int b;", ":end-at: int b;"))
    assert n == 0, text


def test_lines_option_and_pasted_code_and_escaping_paths_fail(tmp_path):
    assert markers(tmp_path / "a", include("/common/x.h", ":lines: 1-2"))[0] == 1
    assert markers(tmp_path / "b", "# T\n\n```cpp\nint x;\n```\n")[0] == 1
    assert markers(tmp_path / "c", "# T\n\n```{code-block} cuda\nint x;\n```\n")[0] == 1
    assert markers(tmp_path / "d", "# T\n\n```console\n$ make\n```\n")[0] == 0
    assert markers(tmp_path / "e", include("../../steps/01_naive/step.cu"))[0] == 1


def test_includes_nested_in_directives_are_checked(tmp_path):
    chapter = "# T\n\n::::{note}\n" + include("/steps/01_naive/step.cu", ":start-after: [start:x]",
                                               ":end-before: [end:x]")[4:] + "::::\n"
    assert markers(tmp_path, chapter)[0] == 1


def test_unbalanced_markers_in_the_source_fail(tmp_path):
    repo = make_repo(tmp_path, include("/steps/01_naive/step.cu", ":start-after: [start:kernel]",
                                       ":end-before: [end:kernel]"))
    (repo / "steps" / "01_naive" / "step.cu").write_text(STEP + "// [start:kernel]\n")
    checker = check_markers.Checker(repo, (repo / "book").resolve(), None)
    for block in check_markers.parse_blocks(repo / "book" / "steps" / "01_naive.md"):
        checker.check_block(block)
    assert any("needs one [start:kernel]" in e for e in checker.errors)


def site(tmp_path: Path, body: str) -> Path:
    root = tmp_path / "html"
    (root / "sub").mkdir(parents=True)
    (root / "index.html").write_text(f'<html><body><h1 id="top">x</h1>{body}</body></html>')
    (root / "sub" / "page.html").write_text('<html><body><p id="here">y</p>'
                                            '<a href="../index.html#top">up</a></body></html>')
    (root / "style.css").write_text("body { background: url('missing.png'); }")
    return root


def test_check_site(tmp_path, capsys):
    ok = site(tmp_path / "ok", '<a href="sub/page.html#here">a</a><a href="https://x.org">e</a>'
                               '<a href="#top">t</a>')
    (ok / "style.css").write_text("body { color: red; }")
    assert check_site.main([str(ok)]) == 0
    bad = site(tmp_path / "bad", '<a href="sub/page.html#nowhere">a</a><img src="gone.png">')
    assert check_site.main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert "nowhere" in err and "gone.png" in err and "missing.png" in err


def test_stage_never_touches_the_repository_through_its_links(tmp_path):
    repo = make_repo(tmp_path, "# Step\n")
    out = tmp_path / "src"
    stage_book.stage_sources(repo, repo / "book", out)
    assert (out / "steps" / "01_naive").is_symlink() and (out / "steps" / "01_naive.md").is_file()
    assert (out / "common").is_symlink()
    # a chapter removed from book/ disappears from the staged tree; the sources stay
    (repo / "book" / "steps" / "01_naive.md").unlink()
    stage_book.stage_sources(repo, repo / "book", out)
    assert not (out / "steps" / "01_naive.md").exists()
    assert (repo / "steps" / "01_naive" / "step.cu").read_text() == STEP
    assert (repo / "common" / "x.h").is_file()


def test_step_diffs(tmp_path):
    repo = make_repo(tmp_path, "# Step\n")
    (repo / "steps" / "02_tiled").mkdir()
    (repo / "steps" / "02_tiled" / "step.cu").write_text(STEP.replace("kernel() {}", "kernel() { }"))
    gen, keep = tmp_path / "gen", set()
    stage_book.generate_steps(repo, gen, repo / "results", keep)
    first = (gen / "steps" / "01_naive" / "changes.md").read_text()
    assert "first step" in first and not (gen / "steps" / "01_naive" / "step.diff").exists()
    diff = (gen / "steps" / "02_tiled" / "step.diff").read_text()
    assert diff.startswith("--- steps/01_naive/step.cu\n+++ steps/02_tiled/step.cu\n")
    assert "adds 1 lines and removes 1" in (gen / "steps" / "02_tiled" / "changes.md").read_text()
    assert "Not measured yet" in (gen / "steps" / "02_tiled" / "run.md").read_text()


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")
def test_results_are_generated_even_when_nothing_is_measured(tmp_path):
    gen, keep = tmp_path / "gen", set()
    stage_book.generate_results(REPO, gen, tmp_path / "no-results", keep)
    assert "Not measured yet" in (gen / "results" / "status.md").read_text()
    assert "not measured" in (gen / "results" / "table.md").read_text()
    assert (gen / "results" / "tflops.svg").read_bytes().lstrip().startswith((b"<?xml", b"<svg"))
    assert "Not measured yet" in (gen / "results" / "ceilings.md").read_text()


def _ldmatrix_positions(d: int, swizzle) -> list[tuple[int, bool]]:
    """For every chunk c and every group of 8 consecutive rows (one ldmatrix 8x8 matrix) of
    a [64][d] 16-bit tile with the natural pitch: (distinct 16-byte bank positions, all
    swizzled chunks inside the row)."""
    chunks = d // 8
    out = []
    for c in range(chunks):
        for r0 in range(0, 64, 8):
            placed = [swizzle(c, i, chunks) for i in range(r0, r0 + 8)]
            inside = all(0 <= p < chunks for p in placed)
            out.append((len({(i * chunks + p) % 8 for i, p in zip(range(r0, r0 + 8), placed)}),
                        inside))
    return out


def test_step04b_exercise_swizzle_rules():
    """Step 04b's exercise 2: c xor (i mod 8) is conflict-free and stays in the row only when
    a row has a multiple of 8 chunks; at D = 32 it runs off the row, and
    c xor (floor(i / (8 / C)) mod C) works there."""
    plain = lambda c, i, chunks: c ^ (i % 8)                                   # noqa: E731
    small = lambda c, i, chunks: c ^ ((i // (8 // chunks)) % chunks)          # noqa: E731
    for d in (64, 128, 256):
        assert all(n == 8 and inside for n, inside in _ldmatrix_positions(d, plain)), d
    for d in (32, 96):
        assert not all(inside for _, inside in _ldmatrix_positions(d, plain)), d
    assert all(n == 8 and inside for n, inside in _ldmatrix_positions(32, small))
    text = (REPO / "book" / "steps" / "04b_register_p.md").read_text()
    assert "reaches chunk 7, off the end of the row" in text


def assert_new_side_is(after: str, diff: str) -> None:
    """Every hunk's new side (context and + lines) is the new file's text at its line numbers."""
    for hunk in stage_book.split_hunks(diff)[1]:
        m = re.match(r"@@ -\d+,\d+ \+(\d+),(\d+) @@", hunk)
        new = [x[1:] for x in hunk.splitlines()[1:] if x[:1] in " +"]
        start = int(m[1]) - 1
        assert new == after.splitlines()[start:start + int(m[2])]


def _folded_diff(tmp_path, before: str, after: str):
    """stage_book.folded_diff() of two step.cu texts written under tmp_path/steps/{a,b}."""
    (tmp_path / "steps" / "a").mkdir(parents=True)
    (tmp_path / "steps" / "b").mkdir()
    (tmp_path / "steps" / "a" / "step.cu").write_text(before)
    (tmp_path / "steps" / "b" / "step.cu").write_text(after)
    return stage_book.folded_diff(tmp_path / "steps" / "a" / "step.cu", tmp_path / "steps" / "b" / "step.cu", tmp_path)


def test_step_diff_folds_comment_and_rename_changes(tmp_path):
    """The chapter's diff starts at code: the header's comment changes and a namespace
    rename are folded, the code change is shown, and both parts are valid diffs."""
    before = ("// SPDX\n// step 01 header\n// says one thing\n#include <x>\n\n"
              "namespace flashsteps::step01 {\n\nint f() { return 1; }\n\nint g() {}\n\n"
              "int h() {}\n\nint k() {}\n}\n")
    after = ("// SPDX\n// step 02 header\n// says another thing\n// and more\n#include <x>\n\n"
             "namespace flashsteps::step02 {\n\nint f() { return 2; }\n\nint g() {}\n\n"
             "int h() {}\n\nint k() {}\n}\n")
    code, folded, n_code, n_comment, n_rename = _folded_diff(tmp_path, before, after)
    assert (n_code, n_comment, n_rename) == (1, 1, 1)
    assert "+int f() { return 2; }" in code and "header" not in code and "step02" not in code
    assert "+// step 02 header" in folded and "+namespace flashsteps::step02 {" in folded
    for diff in (code, folded):
        assert_new_side_is(after, diff)


def test_step_limits_from_the_sources():
    """The limits page's table comes from StepInfo, dispatch.h and CMakeLists.txt."""
    import step_limits
    rows = {r["number"]: r for r in step_limits.limits(REPO)}
    assert rows["01"]["accepts_fp32"] and rows["01"]["bench_max_seqlen"] == 8192
    assert rows["02"]["compiled"] == [32, 64, 128, 256]
    assert not rows["04"]["accepts_fp32"] and rows["04"]["head_dim_multiple"] == 8
    assert rows["04"]["compiled"] == [32, 64, 96, 128, 256]
    assert rows["07"]["max_head_dim"] == 128 and rows["07"]["compiled"] == [64, 128]
    assert rows["07"]["requires"] == ["CUDA_SM90A"]
    text = step_limits.markdown(list(rows.values()), step_limits.architectures(REPO))
    assert "| [07](steps/07_tma_wgmma.md) | fp16, bf16 | 1 to 128, a multiple of 8 | 64, 128 |" in text
    assert "NVIDIA Hopper (sm_90a) only" in text and "gfx942" in text


def test_orientation_pages_are_in_the_book():
    index = (REPO / "book" / "index.md").read_text()
    for page in ("glossary", "limits", "references"):
        assert (REPO / "book" / f"{page}.md").is_file() and f"\n{page}\n" in index
    glossary = (REPO / "book" / "glossary.md").read_text()
    for term in ("TM\n", "TN\n", "DV\n", "WARP_M\n", "slot, `kSlots`", "STAGES\n", "warpgroup\n"):
        assert term in glossary, term


def test_every_step_chapter_has_orientation_and_self_checks():
    """Time, prerequisites and the measurement the chapter hinges on at the top; two or
    three self-check questions with collapsible answers before the exercises."""
    for md in sorted((REPO / "book" / "steps").glob("[0-9][0-9]_*.md")):
        text = md.read_text()
        head = text[text.index("## Objectives"):text.index("After this chapter you can")]
        assert "Time:" in head and "Prerequisites:" in head, md.name
        assert "The one measurement it hinges on" in " ".join(head.split()), md.name
        check = text[text.index("## Check yourself"):text.index("## Exercises")]
        assert 2 <= check.count("```{details} Answer") <= 3, md.name


def test_split_wide_tables_splits_per_baseline_only():
    """A step's table with baseline columns becomes one table per baseline; a decode table
    (a column per step or baseline, no "D=<d> <mask>" header) stays whole."""
    wide = ("| N | D=64 full | PyTorch SDPA flash D=64 full |\n|--:|--:|--:|\n"
            "| 4096 | 10.0 | 20.0 (50%) |")
    out = stage_book.split_wide_tables(wide).splitlines()
    assert out[0] == "| N | D=64 full |"
    assert "*PyTorch SDPA flash* (TFLOPS; in brackets the step's share of it):" in out
    assert "| 4096 | 20.0 (50%) |" in out
    decode = ("| Problem | 10 split_kv TB/s (time) | 06 autotuned TB/s | PyTorch SDPA cuDNN TB/s |\n"
              "|:--|--:|--:|--:|\n| B=8, Nk=65536 | 4.30 (500 µs) | 1.07 (×4.00) | 4.47 (96%) |")
    assert stage_book.split_wide_tables(decode) == decode


def test_step_diff_shows_reindented_code_as_context(tmp_path):
    """Code wrapped in a new loop is not a change: only the loop's own lines are, and the
    re-indented body appears as context in its new indentation."""
    before = "int f() {\n  a();\n  b();\n  c();\n  return 0;\n}\n"
    after = "int f() {\n  for (int i = 0; i < 2; ++i) {\n    a();\n    b();\n    c();\n  }\n  return 0;\n}\n"
    code, folded, n_code, _, _ = _folded_diff(tmp_path, before, after)
    changed = [x for x in code.splitlines()[2:] if x[:1] in "+-"]
    assert changed == ["+  for (int i = 0; i < 2; ++i) {", "+  }"], changed
    assert "     a();" in code and not folded and n_code >= 1
    assert_new_side_is(after, code)


def test_timelines_go_to_the_steps_that_have_a_trace_tool(tmp_path):
    """Every step whose step.cmake adds a timeline tool gets timeline.md (figures from
    results/<gpu>/timeline/, or "not measured yet"); no other step does."""
    pytest.importorskip("matplotlib")
    keep: set[Path] = set()
    stage_book.generate_timelines(REPO, tmp_path, keep)
    traced = sorted(p.parent.name for p in tmp_path.glob("steps/*/timeline.md"))
    expected = sorted(d.name for d in (REPO / "steps").iterdir() if (d / "step.cmake").is_file()
                      and "flashsteps_add_trace_tool()" in (d / "step.cmake").read_text())
    assert traced == expected and "08_warp_specialized" in traced
    assert set(tmp_path.glob("steps/*/*")) == keep
