# SPDX-License-Identifier: Apache-2.0
"""The book's chapters rendered with given measured values, for the tests: what a reader
would read, whitespace collapsed."""

from __future__ import annotations

from pathlib import Path

import facts
import stage_book
import step_registry

REPO = Path(__file__).resolve().parents[3]


def values(records=(), ceilings=(), points=(), tuning=None, profiles=None) -> dict:
    """facts.facts() for every step of the repository."""
    return facts.facts(list(records), list(ceilings), list(points),
                       step_registry.from_folders(REPO), tuning, profiles)


def prose(v: dict) -> str:
    parts = [stage_book.render_chapter(md, v, facts.FILTERS)
             for md in sorted((REPO / "book").rglob("*.md"))]
    return " ".join(" ".join(parts).split())
