"""Tables as the pages build them: a column without a value is left out (stepwise_docs.common)."""
from __future__ import annotations

from docutils import nodes

from stepwise_docs import fmt
from stepwise_docs.common import _cell, _table, columns_with_values


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
