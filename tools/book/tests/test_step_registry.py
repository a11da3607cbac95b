# SPDX-License-Identifier: Apache-2.0
"""Tests of tools/book/step_registry.py and of the diffs stage_book.py makes from it: the
steps come from the build's registry when there is one, from the folders otherwise, and a
chapter's diff is against its base step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BOOK_TOOLS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BOOK_TOOLS))

import stage_book  # noqa: E402
import step_registry as reg  # noqa: E402


def repo_with(tmp_path: Path, names: list[str]) -> Path:
    repo = tmp_path / "repo"
    for i, name in enumerate(names):
        (repo / "steps" / name).mkdir(parents=True)
        (repo / "steps" / name / "step.cu").write_text(f"// {name}\nint x = {i};\n")
    (repo / "steps" / "README.md").write_text("not a step\n")
    (repo / "steps" / "09_no_source").mkdir()
    return repo


def registry(tmp_path: Path, steps: list[dict]) -> Path:
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"version": 1, "backend": "NONE", "steps": steps}))
    return path


def test_folders_each_based_on_the_one_before(tmp_path):
    repo = repo_with(tmp_path, ["01_naive", "02_tiled", "04_tensor"])
    steps = reg.discover(repo)
    assert [(s.number, s.slug, s.base) for s in steps] == \
        [("01", "naive", None), ("02", "tiled", "01"), ("04", "tensor", "02")]
    assert reg.discover(repo, tmp_path / "not-written.json") == steps


def test_the_registry_names_the_base_step(tmp_path):
    repo = repo_with(tmp_path, ["01_naive", "02_tiled", "03_online", "04_tensor"])
    path = registry(tmp_path, [
        {"number": "01", "slug": "naive", "folder": "steps/01_naive", "base": None, "built": True},
        {"number": "02", "slug": "tiled", "folder": "steps/02_tiled", "base": "01", "built": True},
        {"number": "04", "slug": "tensor", "folder": "steps/04_tensor", "base": "02",
         "built": False}])
    steps = reg.discover(repo, path)
    assert [(s.number, s.base, s.built) for s in steps] == \
        [("01", None, True), ("02", "01", True), ("04", "02", False)]

    gen, keep = tmp_path / "gen", set()
    stage_book.generate_steps(repo, gen, tmp_path / "no-results", keep, steps)
    changes = (gen / "steps" / "04_tensor" / "changes.md").read_text()
    assert "Against step 02 (`steps/02_tiled/step.cu`)" in changes
    assert "--- steps/02_tiled/step.cu" in (gen / "steps" / "04_tensor" / "step.diff").read_text()
    assert not (gen / "steps" / "03_online").exists()      # not registered: not in the book
    assert "first step of the series" in (gen / "steps" / "01_naive" / "changes.md").read_text()


@pytest.mark.parametrize("entry, message", [
    ({"number": "5", "slug": "x"}, "number"),
    ({"number": "09", "slug": "no_source"}, "has no step.cu"),
    ({"number": "02", "slug": "tiled", "base": "07"}, "not a step registered before it"),
])
def test_a_bad_registry_names_the_field(tmp_path, entry, message):
    repo = repo_with(tmp_path, ["01_naive", "02_tiled"])
    path = registry(tmp_path, [{"number": "01", "slug": "naive", "base": None}, entry])
    with pytest.raises(reg.RegistryError, match=message):
        reg.discover(repo, path)


def test_a_lettered_step_comes_before_the_plain_one(tmp_path):
    repo = repo_with(tmp_path, ["03_online", "04_tensor", "04a_plain", "04b_registers", "05_causal"])
    steps = reg.discover(repo)
    assert [(s.number, s.base) for s in steps] == \
        [("03", None), ("04a", "03"), ("04b", "04a"), ("04", "04b"), ("05", "04")]
    assert sorted(["05", "04", "04b", "03", "04a"], key=reg.step_order) == ["03", "04a", "04b", "04", "05"]


def test_the_registry_takes_a_lettered_number(tmp_path):
    repo = repo_with(tmp_path, ["03_online", "04a_plain"])
    path = registry(tmp_path, [{"number": "03", "slug": "online"},
                               {"number": "04a", "slug": "plain", "base": "03"}])
    assert [(s.number, s.base, s.name) for s in reg.discover(repo, path)] == \
        [("03", None, "03_online"), ("04a", "03", "04a_plain")]
    bad = registry(tmp_path, [{"number": "04A", "slug": "plain"}])
    with pytest.raises(reg.RegistryError, match="number"):
        reg.from_registry(repo, bad)
