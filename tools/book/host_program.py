# SPDX-License-Identifier: Apache-2.0
"""Runs a short C++ host program against the repository's headers and returns what it prints
as JSON: how the steps' book figures (steps/NN_slug/book_figures.py) evaluate the code's own
CUDA-free layout and schedule functions (swizzle.h, fragment_layout.h, causal_schedule.h)
instead of restating them in Python."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def run_json(repo: Path, source: str, what: str, include_dirs: tuple[Path, ...] = ()):
    """Compiles @p source (C++17, ``-I common/include`` and ``-I`` each of @p include_dirs) with
    $CXX, ``c++`` or ``g++``, runs it and parses its standard output as JSON. @p what names the
    figure in the error raised when no compiler is found."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        raise RuntimeError(f"{what} needs a C++ compiler (c++) to run the code's own functions")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "dump.cpp", Path(tmp) / "dump"
        src.write_text(source)
        includes = [arg for d in (repo / "common" / "include", *include_dirs) for arg in ("-I", str(d))]
        subprocess.run([cxx, "-std=c++17", *includes, str(src), "-o", str(exe)], check=True)
        return json.loads(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout)
