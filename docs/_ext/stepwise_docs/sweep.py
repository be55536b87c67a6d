"""Time and rate against problem size, for the ``stepwise-sweep`` directive (no Sphinx here).

Which rows and sizes: a chapter's ``sweep`` (registry) names the rows (steps, baselines and
ceilings) measured at its extra ``sizes`` as well as at the main ones; without ``sweep.rows``,
every step and baseline over every size (the SGEMM chapter). ``sweep.footprint`` gives the bytes
the problem occupies at size n, ``bytes_per_n * n ** power``: where that equals the GPU's L2 cache
(``gpu.l2_bytes`` of the measurement file) the data stops fitting in L2, and the plot marks that n.

With ``sweep.axis`` (``label``, ``shape_index``) the sweep draws its own ``sizes`` only, each a
registry size with a ``shape``, against ``shape[shape_index]`` (e.g. the row length of matrices of
one total size) instead of n; there is no L2 line, the footprint being the same along such an axis.

Every number comes from the measurement file; :func:`sweep` returns plain data that is also the
key of the image's file name.
"""
from __future__ import annotations

from .data import Chapter, DataError
from .fmt import baseline_label, flop_rate_unit

KINDS = {"steps": "step", "baselines": "baseline", "ceilings": "ceiling"}


def step_number(step_id: str) -> str:
    """``11_any_shape_any_size`` -> ``"11"`` (the label of a point or a column)."""
    head = step_id.split("_", 1)[0]
    return head if head.isdigit() else step_id


def select_rows(chapter: Chapter, rows: list[str] | None = None, steps: list[str] | None = None,
                baselines: list[str] | None = None) -> list[str]:
    """The row ids to draw: ``rows`` as given; else the chapter's sweep rows (every step and
    baseline without ``sweep.rows``) with their steps replaced by ``steps`` and their baselines by
    ``baselines`` where given. Steps first, then baselines, then ceilings."""
    if rows is not None:
        for row_id in rows:
            chapter.kind_of(row_id)
        return list(rows)
    default = chapter.sweep_rows()
    if steps is not None:
        for step_id in steps:
            chapter.step(step_id)
    known = {b["id"] for b in chapter.baselines}
    for b in baselines or []:
        if b not in known:
            raise DataError(f"chapter {chapter.id!r} has no baseline {b!r} in the step registry "
                            f"(it has {', '.join(known) or 'none'})")
    of_kind = {kind: [r for r in default if chapter.kind_of(r) == kind] for kind in KINDS}
    return ((list(steps) if steps is not None else of_kind["steps"])
            + (list(baselines) if baselines is not None else of_kind["baselines"])
            + of_kind["ceilings"])


def sweep(chapter: Chapter, timing: str, rows: list[str] | None = None, steps: list[str] | None = None,
          baselines: list[str] | None = None) -> dict:
    """Median time and rate against n for the selected rows (see :func:`select_rows`), as plain data.

    The rate is the FLOP rate where the rows have it (``unit`` TFLOP/s where any is 1,000 GFLOP/s or more, else
    GFLOP/s: :func:`.fmt.flop_rate_unit`; ``metric`` says which field), else GB/s; a size where a row is not measured has
    no point (None). The sizes are every size any of the rows is to be measured at, but the keys of
    rectangular problems (:meth:`Chapter.is_size`), which have no place on an axis of n. ``l2_n`` is
    the n at which the problem's footprint equals this GPU's L2 cache, where that is within the
    sizes drawn (else None; ``l2_n_any`` has it regardless).

    With a ``sweep.axis``: the sizes are the sweep's own (:meth:`Chapter.axis_sizes`), ordered by
    their place on the axis; ``sizes`` holds those places (the x of the plot and the tables), ``ns``
    the sizes' n, ``problems`` their problem texts, ``bytes`` the data of each (the first row's
    ``bytes`` there, steps first; None where no row has them), ``axis_label`` the axis; ``l2_n``
    and ``l2_n_any`` are None. Without one the data has none of these four keys.
    """
    chapter.timing(timing)
    ids = select_rows(chapter, rows, steps, baselines)
    if not ids:
        raise DataError(f"chapter {chapter.id!r}: no rows to draw against size")
    axis = chapter.axis()
    if axis is None:
        sizes = sorted({n for row_id in ids for n in chapter.expected_sizes(row_id) if chapter.is_size(n)})
        xs = sizes
    else:
        placed = chapter.axis_sizes()
        sizes = [n for n, _x in placed]
        xs = [x for _n, x in placed]
    measured = [(row_id, chapter.kind_of(row_id), [chapter.any_row(row_id, n, timing)[1] for n in sizes])
                for row_id in ids]
    found = [r for _i, _k, rs in measured for r in rs if r is not None]
    factor = 1.0
    if any(r.get("gflops") is not None for r in found):
        metric = "gflops"
        unit, factor = flop_rate_unit(r.get("gflops") for r in found)  # one unit for the plot and its table
    elif any(r.get("gbps") is not None for r in found):
        metric, unit = "gbps", "GB/s"
    else:
        raise DataError(f"chapter {chapter.id!r} has no row with GFLOP/s or GB/s for timing {timing} "
                        f"among {', '.join(ids)}")
    series = []
    for row_id, kind, rs in measured:
        entry = chapter.entry(row_id)
        series.append({
            "id": row_id, "kind": KINDS[kind],
            "label": baseline_label(chapter, row_id) if kind == "baselines" else row_id,
            "number": step_number(row_id) if kind == "steps" else row_id,
            "same_operation": entry.get("same_operation", True) and
            all(r.get("same_operation", True) for r in rs if r is not None),
            "values": [None if r is None or r.get(metric) is None else r[metric] * factor for r in rs],
            "times": [None if r is None else r["median_ms"] for r in rs],
        })
    gpu = chapter.dataset.gpu
    l2_bytes = gpu.get("l2_bytes")
    data = {"chapter": chapter.id, "timing": timing, "metric": metric, "unit": unit,
            "sizes": xs, "series": series, "gpu": gpu.get("name", ""), "l2_bytes": l2_bytes}
    if axis is not None:
        data.update(
            axis_label=axis["label"], ns=sizes, problems=[chapter.problem(n) for n in sizes],
            bytes=[next((rs[i]["bytes"] for _i, _k, rs in measured
                         if rs[i] is not None and rs[i].get("bytes") is not None), None)
                   for i in range(len(sizes))],
            l2_n=None, l2_n_any=None)
        return data
    l2_n = chapter.l2_size(l2_bytes)
    data.update(l2_n_any=l2_n, l2_n=l2_n if l2_n is not None and sizes[0] <= l2_n <= sizes[-1] else None)
    return data
