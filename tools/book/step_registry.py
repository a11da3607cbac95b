# SPDX-License-Identifier: Apache-2.0
"""Which steps the book has, and which step each is diffed against.

The book tooling never names a step. It reads the registry the CMake build writes
(``<build>/steps.json``, one entry per ``add_step`` line: number, slug, folder, base step,
built or not) when it is given one, and otherwise finds every ``steps/NN_slug/step.cu`` and
takes the step before it by number as its base. A number is two digits, optionally followed
by one lowercase letter: the lettered steps climb to the plain one, so the reading order is
03, 04a, 04b, 04, 05 (``step_order``). A step's extras are found the same way: a
``tuned/`` folder beside its ``step.cu`` holds tuning tables (tools/book/plot_search_space.py).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# What a step number is, and the reading order, are the results tools' (one definition).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "results"))
from flashsteps_results import STEP_ID_RE, step_sort_key  # noqa: E402

STEP_NUMBER = STEP_ID_RE.pattern  # two digits, maybe a letter: 04, 04a
STEP_DIR_RE = re.compile(rf"^({STEP_NUMBER})_([a-z0-9_]+)$")


def step_order(number: str) -> tuple:
    """Sort key of a step number in reading order: 03 < 04a < 04b < 04 < 05."""
    return step_sort_key(number)


class RegistryError(ValueError):
    """The registry file is malformed or names a folder without a step; says which field."""


@dataclass(frozen=True)
class Step:
    number: str            # "06"
    slug: str              # "autotuned"
    folder: Path           # <repo>/steps/06_autotuned
    base: str | None       # the step its diff is against ("05"); None for the first one
    built: bool = True     # False: the build registered it but could not build it here

    @property
    def name(self) -> str:
        return f"{self.number}_{self.slug}"

    @property
    def source(self) -> Path:
        return self.folder / "step.cu"

    @property
    def tuned(self) -> Path | None:
        """The step's tuning tables folder, when it has one."""
        path = self.folder / "tuned"
        return path if path.is_dir() else None


def from_folders(repo: Path) -> list[Step]:
    """Every steps/NN_slug/step.cu, in order, each based on the step before it."""
    found = []
    steps_dir = repo / "steps"
    for d in sorted(steps_dir.iterdir()) if steps_dir.is_dir() else []:
        m = STEP_DIR_RE.match(d.name)
        if m and (d / "step.cu").is_file():
            found.append((m[1], m[2], d))
    found.sort(key=lambda f: step_order(f[0]))
    return [Step(num, slug, d, found[i - 1][0] if i else None)
            for i, (num, slug, d) in enumerate(found)]


def from_registry(repo: Path, path: Path) -> list[Step]:
    """The steps of the build's registry (``flashsteps_write_registry`` in cmake/), in its
    order; a missing ``base`` means the step registered before it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RegistryError(f"{path}: cannot read the step registry ({exc})") from None
    entries = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise RegistryError(f"{path}: no \"steps\" list")
    steps: list[Step] = []
    for i, entry in enumerate(entries):
        where = f"{path}: steps[{i}]"
        if not isinstance(entry, dict):
            raise RegistryError(f"{where} is not an object")
        number, slug = str(entry.get("number", "")), entry.get("slug")
        if not re.fullmatch(STEP_NUMBER, number) or not isinstance(slug, str):
            raise RegistryError(f"{where}: \"number\" (two digits, maybe a letter: 04a) or \"slug\" is missing")
        folder = repo / entry.get("folder", f"steps/{number}_{slug}")
        if not (folder / "step.cu").is_file():
            raise RegistryError(f"{where}: \"folder\" {folder} has no step.cu")
        base = entry.get("base", steps[-1].number if steps else None)
        if base is not None and not any(s.number == str(base) for s in steps):
            raise RegistryError(f"{where}: \"base\" {base!r} is not a step registered before it")
        steps.append(Step(number, slug, folder, None if base is None else str(base),
                          bool(entry.get("built", True))))
    return steps


def discover(repo: Path, registry: Path | None = None) -> list[Step]:
    """The registry's steps when ``registry`` exists, the folders' otherwise."""
    if registry is not None and registry.is_file():
        return from_registry(repo, registry)
    return from_folders(repo)


def by_number(steps: list[Step]) -> dict[str, Step]:
    return {s.number: s for s in steps}
