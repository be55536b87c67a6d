"""Tables as the pages build them: a column without a value is left out, and the run table says once what its
runs share (stepwise_docs.common, stepwise_docs.tables)."""
from __future__ import annotations

from docutils import nodes

from stepwise_docs import fmt
from stepwise_docs.common import _cell, _table, columns_with_values
from stepwise_docs.tables import run_sections


def test_a_column_without_a_value_in_any_row_is_left_out():
    body = [[_cell("01_naive"), _cell("128 \u00b5s"), _cell(fmt.DASH), _cell(""), _cell(fmt.DASH)],
            [_cell("02_vector"), _cell("20.0 \u00b5s"), _cell(fmt.DASH), _cell(""), _cell("5.00\u00d7")]]
    assert columns_with_values(body) == [0, 1, 4]
    table = _table(["step", "median", "GB/s", "note", "vs previous"], body, ["stepwise-data"])
    assert [entry.astext() for entry in table.findall(nodes.entry)][:3] == ["step", "median", "vs previous"]
    kept = _table(["step", "median", "GB/s", "note", "vs previous"], body, ["stepwise-data"],
                  keep_empty_columns=True)
    assert len(list(kept.findall(nodes.colspec))) == 5
    assert columns_with_values([[_cell(fmt.DASH)]]) == [0]  # what each row is stays
    assert columns_with_values([]) == []


def test_several_runs_share_their_stopping_rule_once():
    rule = {"minimum samples": "50", "time limit per row": "1 s"}
    runs = [("Run of 2026-11-25", {"GPU": "NVIDIA H200", "commit": "44e8a0c", **rule}),
            ("Run of 2026-11-27", {"GPU": "NVIDIA H200", "commit": "1d9dfd2", **rule,
                                   "command": nodes.paragraph("", "", nodes.literal("", "stepwise_bench"))})]
    sections = run_sections(runs)
    assert [title for title, _rows in sections] == ["the same in every run", "Run of 2026-11-25", "Run of 2026-11-27"]
    assert [label for label, _v in sections[0][1]] == ["GPU", "minimum samples", "time limit per row"]
    assert [label for label, _v in sections[1][1]] == ["commit"]
    assert [label for label, _v in sections[2][1]] == ["commit", "command"]
    # a rule that differs between the runs is each run's own
    runs[1][1]["minimum samples"] = "10"
    assert "minimum samples" in [label for label, _v in run_sections(runs)[1][1]]
