# SPDX-License-Identifier: Apache-2.0
# Sphinx configuration of the FlashSteps book. Not run from book/ directly: the `book`
# target (book/CMakeLists.txt) first lays the chapters out in <build>/book/src with
# tools/book/stage_book.py, which links the repository's directories beside them and
# generates diffs, tables and figures into _generated/. See tools/book/README.md.
import os
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent          # <build>/book/src (the staged tree)
REPO = (SRC / "tools").resolve().parent if (SRC / "tools").exists() else SRC.parent
sys.path.insert(0, str(REPO / "tools" / "book"))

project = "FlashSteps"
author = "FlashSteps contributors"
copyright = "FlashSteps contributors, Apache-2.0"

extensions = ["myst_parser", "breathe", "flashsteps_mathml", "flashsteps_details"]

# Chapters are Markdown (MyST); code only ever enters through literalinclude.
source_suffix = {".md": "markdown"}
root_doc = "index"
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

# Measured numbers are already in the chapters: stage_book.py renders each one through Jinja
# with the values of tools/book/facts.py (a chapter writes {{ step03.fma[0].pct }} and keeps
# its "not measured yet" branch in {% if %} blocks). Built without staging, they would be
# missing.
if not (SRC / "_generated" / "facts.json").is_file():
    raise RuntimeError(f"{SRC / '_generated' / 'facts.json'} is missing: the book is built by "
                       "the `book` target, which runs tools/book/stage_book.py first")

# The staged tree links steps/, common/, results/, ... next to the chapters so that
# literalinclude can name files by their repository path; none of that is a document.
exclude_patterns = ["_generated", "_extra"] + sorted(
    str(path.relative_to(SRC)) for path in [*SRC.iterdir(), *(p for d in SRC.iterdir()
    if d.is_dir() and not d.is_symlink() for p in d.iterdir())] if path.is_symlink())

# Math becomes MathML at build time (tools/book/flashsteps_mathml.py): no CDN needed.
html_math_renderer = "mathml"

# API pages come from Doxygen's XML (target `docs`), built next to the book.
breathe_projects = {"flashsteps": os.environ.get(
    "FLASHSTEPS_DOXYGEN_XML", str((SRC / ".." / ".." / "docs" / "xml").resolve()))}
breathe_default_project = "flashsteps"
breathe_default_members = ("members",)
breathe_domain_by_extension = {"h": "cpp", "hpp": "cpp", "cu": "cpp", "cuh": "cpp"}
cpp_index_common_prefix = ["flashsteps::"]

highlight_language = "text"
pygments_style = "friendly"
pygments_dark_style = "monokai"

html_theme = "furo"
html_title = "FlashSteps"
html_static_path = ["_static"]
# Doxygen's own HTML reference is published inside the site, as doxygen/.
html_extra_path = ["_extra"] if (SRC / "_extra").is_dir() else []
html_css_files = ["flashsteps.css"]
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
html_theme_options = {
    "navigation_with_keys": True,
    "top_of_page_buttons": [],
}

# Warnings are errors (sphinx-build -W); nothing is suppressed.
nitpicky = False
