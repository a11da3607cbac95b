# SPDX-License-Identifier: Apache-2.0
"""Sphinx directive for collapsible blocks: HTML ``<details>``, no JavaScript.

In a chapter (MyST)::

    ```{details} Hint
    The content, parsed as Markdown: math, code, lists.
    ```

    ```{details} Answer
    :open:
    Shown expanded when the page opens.
    ```

Used for exercise hints and answers, self-check questions and the generated step diffs
(stage_book.py wraps each diff in one). Other builders than HTML show the content with the
summary as a heading paragraph.

Enable with ``extensions += ["flashsteps_details"]``.
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective


class details_node(nodes.General, nodes.Element):
    """A collapsible block; ``summary`` attribute: its always-visible line."""


class DetailsDirective(SphinxDirective):
    has_content = True
    required_arguments = 1
    final_argument_whitespace = True
    option_spec = {"open": directives.flag, "class": directives.class_option}

    def run(self):
        node = details_node()
        node["summary"] = self.arguments[0]
        node["open"] = "open" in self.options
        node["classes"] += ["flashsteps-details", *self.options.get("class", [])]
        self.set_source_info(node)
        self.state.nested_parse(self.content, self.content_offset, node)
        return [node]


def visit_details_html(self, node):
    summary = self.encode(node["summary"])
    attrs = " open" if node["open"] else ""
    self.body.append(f'<details class="{" ".join(node["classes"])}"{attrs}>'
                     f"<summary>{summary}</summary>\n")


def depart_details_html(self, node):
    self.body.append("</details>\n")


def visit_details_other(self, node):
    pass


def depart_details_other(self, node):
    pass


def setup(app):
    app.add_node(details_node, html=(visit_details_html, depart_details_html),
                 latex=(visit_details_other, depart_details_other),
                 text=(visit_details_other, depart_details_other))
    app.add_directive("details", DetailsDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
