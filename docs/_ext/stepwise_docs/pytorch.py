"""PyTorch's timings of a chapter's operations (``conf/pytorch_baselines.py``) beside its final step.

The file of a GPU lies in ``pytorch/<gpu-slug>.json`` beside that GPU's measurement file; a GPU without
one is said to have none. ``stepwise-pytorch CHAPTER`` renders, per GPU, one row per PyTorch row of
the chapter: PyTorch's median, its share of the chapter's ceiling (the final step's share scaled by
the two times: the same bytes), the final step's and cuDNN's speed over PyTorch.
"""
from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes

from . import fmt
from .common import _Base, _cell, _table, tooltip
from .data import Chapter, DataError, Dataset

FOLDER = "pytorch"
_ROW_FIELDS = {"chapter": str, "id": str, "call": str, "n": int, "problem": str, "median_ms": float,
               "min_ms": float, "max_ms": float, "samples": int, "max_error_over_max_reference": float,
               "validated": bool}
_TOP_FIELDS = {"schema": int, "gpu": dict, "torch": str, "date": str, "commit": str, "timing": str, "rows": list}


def path_of(dataset: Dataset) -> Path | None:
    """Where the PyTorch file of ``dataset``'s GPU lies (None without a measurement file)."""
    if dataset.measurement_path is None or not dataset.slug:
        return None
    return Path(dataset.measurement_path).parent / FOLDER / f"{dataset.slug}.json"


def load(path: Path, slug: str) -> dict:
    """A PyTorch file, checked: schema 1, this GPU's, every row with its fields and sane times."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable JSON file ({exc})") from None

    def check(obj: dict, fields: dict, where: str) -> None:
        for name, kind in fields.items():
            value = obj.get(name) if isinstance(obj, dict) else None
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else (
                isinstance(value, kind) and not (kind is int and isinstance(value, bool)))
            if not ok:
                raise DataError(f"{path}: {where}{name} is missing or not a {kind.__name__}")

    check(data, _TOP_FIELDS, "")
    if data["schema"] != 1:
        raise DataError(f"{path}: schema {data['schema']}, this build reads schema 1")
    if data["gpu"].get("slug") != slug:
        raise DataError(f"{path}: its GPU is {data['gpu'].get('slug')!r}, the file of {slug!r} was expected")
    for i, row in enumerate(data["rows"]):
        check(row, _ROW_FIELDS, f"rows[{i}].")
        if not 0 < row["min_ms"] <= row["median_ms"] <= row["max_ms"] or row["samples"] < 1:
            raise DataError(f"{path}: rows[{i}] ({row['id']} at {row['problem']}): times out of order or no samples")
    return data


def rows_of(chapter: Chapter, data: dict) -> list[tuple[dict, dict | None, dict | None]]:
    """The chapter's PyTorch rows, each with the final step's row and the matching cuDNN row
    (``cudnn_<op>`` for ``pytorch_<op>``) at its size and the headline's timing (None where not measured).
    A DataError where a row names a size the final step is not measured at (a registry of another commit)."""
    final = chapter.steps[-1]
    sizes = {size["n"] for size in final["sizes"]}
    timing = (chapter.headline or {}).get("timing") or chapter.timings[0]["id"]
    baselines = {b["id"] for b in chapter.baselines}
    out = []
    for row in data["rows"]:
        if row["chapter"] != chapter.id:
            continue
        if row["n"] not in sizes:
            raise DataError(f"PyTorch row {row['id']} at {row['problem']} (n={row['n']}): not a size of "
                            f"{chapter.id}/{final['id']} in this step registry")
        cudnn = "cudnn_" + row["id"].removeprefix("pytorch_")
        out.append((row, chapter.step_row(final["id"], row["n"], timing),
                    chapter.baseline_row(cudnn, row["n"], timing) if cudnn in baselines else None))
    return out


def beside(chapter: Chapter) -> str:
    """What PyTorch's rows stand beside: the final step, and cuDNN where the chapter has a library."""
    return "the final step and cuDNN" if chapter.baselines else "the final step"


def provenance(data: dict, chapter: Chapter) -> str:
    cudnn = f", cuDNN {data['cudnn']}" if data.get("cudnn") else ""
    times = "The final step's and cuDNN's times are" if chapter.baselines else "The final step's times are"
    return (f"PyTorch {data['torch']} (CUDA {data.get('cuda') or 'n/a'}{cudnn}) on {data['gpu'].get('name', '')}, "
            f"{fmt.format_date(data['date'])}, commit {data['commit'][:7]}, timed by conf/pytorch_baselines.py in "
            f"a process of its own after the timing program: {data['timing']}. {times} those of the measurement "
            "file above.")


class PytorchDirective(_Base):
    """``stepwise-pytorch CHAPTER``: PyTorch's rows of the chapter per GPU, beside the final step (and cuDNN)."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        chapter_id = self.chapter(self.arguments[0]).id
        return self.per_gpu(self._table, chapter_id)

    def _table(self, ds: Dataset, chapter: Chapter) -> list[nodes.Node]:
        path = path_of(ds)
        if path is None or not path.is_file():
            return [nodes.paragraph("", f"No PyTorch timings for {ds.gpu_name}: "
                                        f"{'no ' + str(path.name) if path else 'no measurement file'} in "
                                        f"{FOLDER}/ beside its measurement file.", classes=["stepwise-legend"])]
        self.env.note_dependency(str(path.resolve()))
        try:
            data = load(path, ds.slug)
            rows = rows_of(chapter, data)
        except DataError as exc:
            raise self.error(f"{self.name}: {exc}") from None
        if not rows:
            return [nodes.paragraph("", f"{path.name} has no PyTorch rows of {chapter.id}.",
                                    classes=["stepwise-legend"])]
        body = []
        for row, final, cudnn in rows:
            spread = fmt.format_spread(row["min_ms"], row["max_ms"], row["median_ms"])
            time = tooltip(fmt.format_time(row["median_ms"]),
                           f"{row['call']}: median of {row['samples']} samples, min\u2013max {spread}; largest "
                           f"error {fmt.sig(row['max_error_over_max_reference'], 2)} of the largest output")
            cells = [_cell(row["problem"]), _cell(nodes.paragraph("", "", time), ["stepwise-num"])]
            if not row["validated"]:
                cells[1] += nodes.paragraph("", "over the tolerance", classes=["stepwise-warning"])
            share = None if final is None or final.get("share_of_ceiling") is None else (
                final["share_of_ceiling"] * final["median_ms"] / row["median_ms"])
            cells.append(_cell(fmt.DASH if share is None else fmt.format_share(share), ["stepwise-num"]))
            for speedup in (fmt.ratio(row, final), fmt.ratio(row, cudnn)):
                cells.append(_cell(fmt.DASH if speedup is None else fmt.format_speedup(speedup), ["stepwise-num"]))
            body.append(cells)
        header = ["problem", "PyTorch", "PyTorch's share of the ceiling",
                  f"step {int(chapter.steps[-1]['id'].split('_', 1)[0])} over PyTorch", "cuDNN over PyTorch"]
        out = nodes.container(classes=["stepwise-table-block"])
        out += _table(header, body, ["stepwise-data", "stepwise-pytorch"],
                      f"PyTorch's {chapter.id} beside {beside(chapter)}")
        out += nodes.paragraph("", provenance(data, chapter), classes=["stepwise-provenance"])
        return [out]
