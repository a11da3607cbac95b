# SPDX-License-Identifier: Apache-2.0
"""Sphinx math renderer that writes MathML at build time (no JavaScript, no network).

Sphinx's default renderer loads MathJax from a CDN when the page is opened, so the book
would show raw TeX offline and in CI's browser check. This extension converts each
``$...$`` / ``$$...$$`` formula with docutils' own LaTeX-to-MathML converter
(docutils.utils.math.latex2mathml) while the site is built; every current browser renders
MathML Core natively. A formula the converter cannot parse is a build warning (an error
under ``-W``), naming the chapter and line.

Enable with ``extensions += ["flashsteps_mathml"]`` and ``html_math_renderer = "mathml"``.
"""

from __future__ import annotations

from docutils import nodes
from docutils.utils.math.latex2mathml import tex2mathml
from sphinx.locale import _
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number

logger = logging.getLogger(__name__)


def _convert(self, node: nodes.Element, as_block: bool) -> str:
    tex = node.astext()
    try:
        return tex2mathml(tex, as_block=as_block)
    except Exception as exc:  # the converter raises SyntaxError and friends
        logger.warning("cannot convert formula to MathML (%s): %s", exc, tex,
                       location=node, type="flashsteps", subtype="mathml")
        return f'<code class="math-error">{self.encode(tex)}</code>'


def html_visit_math(self, node: nodes.math) -> None:
    self.body.append(self.starttag(node, "span", "", CLASS="math"))
    self.body.append(_convert(self, node, as_block=False))
    self.body.append("</span>")
    raise nodes.SkipNode


def html_visit_displaymath(self, node: nodes.math_block) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math"))
    if node["number"]:
        number = get_node_equation_number(self, node)
        self.body.append(f'<span class="eqno">({number})')
        self.add_permalink_ref(node, _("Link to this equation"))
        self.body.append("</span>")
    self.body.append(_convert(self, node, as_block=True))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app):
    app.add_html_math_renderer("mathml", (html_visit_math, None),
                               (html_visit_displaymath, None))
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
