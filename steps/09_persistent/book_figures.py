# SPDX-License-Identifier: Apache-2.0
"""Step 09's figures for the book: the timelines of one block measured on each GPU
(tools/timeline/book_timeline.py draws them from results/<gpu>/timeline/step09_*.json)."""
from __future__ import annotations

import importlib.util
from pathlib import Path


def generate(repo: Path, out: Path, url: str) -> dict:
    spec = importlib.util.spec_from_file_location("book_timeline", repo / "tools" / "timeline" / "book_timeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate(repo, out, url, "09")
