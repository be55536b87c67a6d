"""Collapsed blocks: a step's full source under a one-line summary (its diff stays in view), and the
``stepwise-worklog`` directive (stepwise_docs.collapsible)."""
from __future__ import annotations

import re

from test_docs_build import build_docs, needs_doxygen, project_args

import synth
from stepwise_docs.steps import diff_counts, source_summary


def test_diff_counts_leave_out_the_file_headers():
    lines = ["--- a.cuh\n", "+++ b.cuh\n", "@@ -1,2 +1,3 @@\n", " same\n", "-old\n", "+new\n", "+more\n"]
    assert diff_counts(lines) == (2, 1)
    assert diff_counts([]) == (0, 0)


def test_the_summary_line_names_the_file_its_lines_and_the_change():
    step = {"file": "snippets/demo/02_vector.cuh"}
    assert source_summary(step, "a\nb\nc\n", {"id": "01_naive"}, (12, 3)) == \
        "Full source: 02_vector.cuh, 3 lines (+12 \u22123 over 01_naive)"
    assert source_summary(step, "a\n", None, None) == "Full source: 02_vector.cuh, 1 line"


@needs_doxygen
def test_the_diff_is_in_view_and_the_full_source_collapsed_but_the_first_steps(project):
    page = project / "docs" / "index.md"
    page.write_text(page.read_text() + """
```{stepwise-worklog} what was tried at the second step
A trial that did not pay, with a number from the file:
{stepwise-number}`demo/02_vector/median`.
```
""")
    proc = build_docs(*project_args(project, "--strict"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = synth.built_page(project)
    sources = re.findall(r'<details class="stepwise-details stepwise-source"( open="open")?[^>]*>\s*'
                         r'<summary class="stepwise-details-summary">([^<]*)</summary>', html)
    assert [(bool(opened), summary.split(",")[0]) for opened, summary in sources] == [
        (True, "Full source: 01_naive.cuh"), (False, "Full source: 02_vector.cuh")]
    assert "over 01_naive)" in sources[1][1]
    # the diff comes before the collapsed source of its step, and the download link stays outside the block
    second = html.index("Full source: 02_vector.cuh")
    assert html.index("What changed since 01_naive") < second
    assert html.index("The whole step, ready to copy", second) > html.index("</details>", second)
    # the worklog: collapsed, its summary line, its content parsed (a role resolved to a number)
    worklog = re.search(r'<details class="stepwise-details stepwise-worklog"[^>]*>\s*'
                        r'<summary class="stepwise-details-summary">([^<]*)</summary>(.*?)</details>', html, re.S)
    assert worklog is not None and 'open="open"' not in worklog.group(0).split(">")[0]
    assert worklog.group(1) == "Worklog: what was tried at the second step"
    assert "A trial that did not pay" in worklog.group(2) and "20.0 \u00b5s</abbr>" in worklog.group(2)
