"""Collapsed blocks: a step's full source under a one-line summary, and a chapter's worklog.

A :class:`stepwise_details` node is an HTML ``<details>`` element whose ``<summary>`` is the node's
``summary`` text; its children are the hidden content, shown on click. Other builders draw the
children as they are. The ``stepwise-worklog`` directive wraps a part of a page in one: the trials
that did not pay and the earlier runs, kept below the story they would interrupt.
"""
from __future__ import annotations

from html import escape

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

#: The summary line of a worklog block that names no title.
WORKLOG_SUMMARY = "Worklog: trials that did not pay, and earlier runs"


class stepwise_details(nodes.General, nodes.Element):
    """A block shown collapsed under its ``summary`` line (HTML ``<details>``; ``open`` shows it open)."""


def details(summary: str, children: list[nodes.Node], classes: list[str] | None = None,
            open_: bool = False) -> stepwise_details:
    """A :class:`stepwise_details` node of ``children`` under the line ``summary``."""
    node = stepwise_details("", *children, summary=summary, open=open_,
                            classes=["stepwise-details"] + (classes or []))
    return node


def visit_details_html(self, node: stepwise_details) -> None:
    attributes = {"open": "open"} if node.get("open") else {}
    self.body.append(self.starttag(node, "details", **attributes))
    self.body.append(f'<summary class="stepwise-details-summary">{escape(node["summary"])}</summary>\n')


def depart_details_html(self, node: stepwise_details) -> None:
    self.body.append("</details>\n")


def visit_details_other(self, node: stepwise_details) -> None:
    """Other builders draw the content as it is."""


def depart_details_other(self, node: stepwise_details) -> None:
    """Nothing closes: see :func:`visit_details_other`."""


class WorklogDirective(SphinxDirective):
    """``stepwise-worklog [TITLE]``: its content (MyST, with roles and directives) in a collapsed block
    whose summary line is ``Worklog: TITLE`` (without a title, :data:`WORKLOG_SUMMARY`)."""

    has_content = True
    optional_arguments = 1
    final_argument_whitespace = True

    def run(self) -> list[nodes.Node]:
        if not self.content:
            raise self.error(f"{self.name}: a worklog block needs content")
        summary = f"Worklog: {self.arguments[0]}" if self.arguments else WORKLOG_SUMMARY
        children = self.parse_content_to_nodes(allow_section_headings=False)
        node = details(summary, children, ["stepwise-worklog"])
        self.set_source_info(node)
        return [node]


def setup(app) -> None:
    """Registers the node (with its HTML and fallback visitors) and the worklog directive."""
    other = (visit_details_other, depart_details_other)
    app.add_node(stepwise_details, html=(visit_details_html, depart_details_html), latex=other, text=other,
                 man=other, texinfo=other)
    app.add_directive("stepwise-worklog", WorklogDirective)
