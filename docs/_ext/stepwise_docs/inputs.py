"""Reading and checking the input files: the step registry, the measurement files (against
``conf/measurement.schema.json``) and ``pending.toml``. No Sphinx here, nor in :mod:`.data`, which builds
the combined view on what this module reads.
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

#: The repository this module lives in (docs/_ext/stepwise_docs/inputs.py).
REPO_ROOT = Path(__file__).resolve().parents[3]
CONF_DIR = REPO_ROOT / "conf"
DEFAULT_SCHEMA = CONF_DIR / "measurement.schema.json"


class DataError(Exception):
    """A problem with an input file; the message is one line that names it."""


# ---------------------------------------------------------------------------
# Reading files
# ---------------------------------------------------------------------------

def _display(path: Path) -> str:
    """A path as the user would like to read it (relative to cwd if possible)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def read_input(path: Path, where: str, error: type[DataError] = DataError, encoding: str = "utf-8",
               how_to_make: str = "") -> str:
    """The text of an input file; a missing file, a folder or an unreadable file is an ``error`` (DataError or
    a subclass) whose one line starts with ``where`` (``"SASS report x.json"``), the missing file's with
    ``how_to_make`` added in parentheses where given."""
    path = Path(path)
    if not path.exists():
        raise error(f"{where} does not exist" + (f" ({how_to_make})" if how_to_make else ""))
    if not path.is_file():
        raise error(f"{where} is not a file")
    try:
        if path.name.endswith(".gz"):  # a file kept compressed (the reruns under docs/measurements/logs/)
            with gzip.open(path, "rt", encoding=encoding) as f:
                return f.read()
        return path.read_text(encoding=encoding)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise error(f"{where} cannot be read: {exc}") from exc


def load_json(path: Path, what: str) -> Any:
    """Parse a JSON file; a missing, unreadable or corrupt file is a DataError."""
    path = Path(path)
    text = read_input(path, f"{what} {_display(path)}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{what} {_display(path)} is not valid JSON: {exc.msg} "
            f"at line {exc.lineno}, column {exc.colno}"
        ) from exc


def _json_pointer(parts: Iterable[Any]) -> str:
    parts = list(parts)
    return "/" + "/".join(str(p) for p in parts) if parts else "(top level)"


def _first_schema_error(instance: Any, schema: dict) -> str | None:
    import jsonschema  # only needed here; keeps the module importable for --help

    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    best = jsonschema.exceptions.best_match(errors)
    # best_match may descend into an allOf; report the deepest, most precise error.
    message = best.message
    if len(message) > 200:
        message = message[:197] + "..."
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"at {_json_pointer(best.absolute_path)}: {message}{more}"


#: The fields of a step's ``tiling`` in the registry (and of an autotuning row's ``config``,
#: which adds ``min_blocks``), in the order the tables show them.
TILING_FIELDS = ("block_m", "block_n", "block_k", "warp_m", "warp_n", "thread_m", "thread_n",
                 "threads", "stages")


@dataclass(frozen=True)
class Tiling:
    """How a step tiles C = A B: a block computes block_m x block_n of C, block_k of K at a time,
    a warp warp_m x warp_n of it and a thread thread_m x thread_n; 0 where a level does not apply
    (no warp tiles, no shared memory, no thread tile of its own)."""

    block_m: int
    block_n: int
    block_k: int
    warp_m: int
    warp_n: int
    thread_m: int
    thread_n: int
    threads: int
    stages: int

    @classmethod
    def of(cls, entry: dict) -> "Tiling":
        return cls(**{name: int(entry[name]) for name in TILING_FIELDS})

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in TILING_FIELDS}


# The registry is printed by the timing program; this is what the docs rely on.
REGISTRY_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["schema", "chapters"],
    "properties": {
        "schema": {"const": 1},
        "chapters": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "title", "share_of", "timings", "ceilings", "baselines", "steps"],
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "title": {"type": "string"},
                    "share_of": {"type": "string"},
                    "gtest_prefix": {"type": "string", "minLength": 1,
                                     "description": "the chapter's GPU tests are the suites starting with it"},
                    "timings": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["id", "label"],
                            "properties": {"id": {"type": "string"}, "label": {"type": "string"}},
                        },
                    },
                    "ceilings": {"type": "array", "items": {"$ref": "#/$defs/ref"}},
                    "baselines": {"type": "array", "items": {"$ref": "#/$defs/ref"}},
                    "headline": {"$ref": "#/$defs/headline"},
                    "sweep": {"$ref": "#/$defs/sweep"},
                    "steps": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["id", "title", "file", "namespace", "launcher", "sizes",
                                         "kernels"],
                            "properties": {
                                "id": {"type": "string", "minLength": 1},
                                "title": {"type": "string"},
                                "file": {"type": "string", "minLength": 1},
                                "namespace": {"type": "string"},
                                "launcher": {"type": "string"},
                                "source_sha256": {"type": "string"},
                                "same_operation": {"type": "boolean"},
                                "beyond_article": {"type": "boolean"},
                                "tiling": {"$ref": "#/$defs/tiling"},
                                "needs": {"type": "string", "minLength": 1,
                                          "description": "what the GPU and the build must offer "
                                                         "(sm_80, sm_90, sm_90a); a GPU without it "
                                                         "skips the step"},
                                "formerly": {"type": "array", "minItems": 1,
                                             "items": {"type": "string", "minLength": 1},
                                             "description": "the ids the step had before the chapter's "
                                                            "steps were split or renumbered: rows measured "
                                                            "under them are this step's"},
                                "kernels": {"type": "array", "minItems": 1,
                                            "items": {"$ref": "#/$defs/kernel"}},
                                "sizes": {
                                    "type": "array",
                                    "description": "empty for a step that is not timed",
                                    "items": {
                                        "type": "object",
                                        "required": ["n"],
                                        "properties": {
                                            "n": {"type": "integer"},
                                            "problem": {"type": "string"},
                                            "shape": {
                                                "type": "array", "minItems": 2, "maxItems": 7,
                                                "items": {"type": "integer", "minimum": 1},
                                                "description": "a GEMM's M, N, K where they differ, "
                                                               "a matrix's rows, columns, an "
                                                               "attention problem's batch, heads, seq, "
                                                               "head dim, or a decoding step's batch, "
                                                               "new tokens, cached tokens (and page "
                                                               "size, heads, K/V heads, head dim): n is "
                                                               "then a key, not a size (left out of "
                                                               "plots against n; cited as #MxNxK, #RxC, "
                                                               "#BxHxSxD, #BxQxL or #BxQxLxPxHxKxD)",
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
    "$defs": {
        "tiling": {
            "type": "object",
            "description": "how a step tiles C (the SGEMM chapter): integers, 0 where not applicable",
            "required": list(TILING_FIELDS),
            "properties": {name: {"type": "integer", "minimum": 0} for name in TILING_FIELDS},
        },
        "headline": {
            "type": "object",
            "description": "the front page's row for the chapter (stepwise-summary): its first and final "
                           "step at one size and timing, and the library baseline set beside them (absent: "
                           "the chapter's first)",
            "required": ["n", "timing", "first", "final"],
            "properties": {"n": {"type": "integer", "minimum": 1}, "timing": {"type": "string"},
                           "first": {"type": "string"}, "final": {"type": "string"},
                           "baseline": {"type": "string", "minLength": 1}},
        },
        "sweep": {
            "type": "object",
            "description": "extra sizes measured for some rows only (stepwise-sweep), and the bytes the "
                           "problem occupies at size n: bytes_per_n * n ** power",
            "properties": {
                "sizes": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                "rows": {"type": "array", "items": {"type": "string"}},
                "axis": {
                    "type": "object",
                    "description": "draw the sweep's sizes (each a registry size with a shape) against "
                                   "one dimension of their shape, shape[shape_index], instead of n",
                    "required": ["label", "shape_index"],
                    "properties": {"label": {"type": "string", "minLength": 1},
                                   "shape_index": {"type": "integer", "minimum": 0}},
                },
                "main_sizes": {"type": "array", "items": {"type": "integer", "minimum": 1},
                               "description": "the sizes of the sweep that are main sizes as well (each "
                                              "in sizes; a sweep with an axis lists its whole family)"},
                "footprint": {
                    "type": "object",
                    "required": ["bytes_per_n", "power"],
                    "description": "bytes_per_n 0: unknown (no L2 line)",
                    "properties": {"bytes_per_n": {"type": "number", "minimum": 0},
                                   "power": {"type": "number", "exclusiveMinimum": 0}},
                },
            },
        },
        "ref": {
            "type": "object",
            "required": ["id", "title"],
            "properties": {"id": {"type": "string"}, "title": {"type": "string"},
                           "sizes": {"type": "array", "minItems": 1, "items": {"type": "integer"},
                                     "description": "measured at these n only (absent: every size)"}},
        },
        "kernel": {
            "type": "object",
            "required": ["name", "block", "block_threads"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "block": {"type": "array", "items": {"type": "integer", "minimum": 1},
                          "minItems": 3, "maxItems": 3},
                "block_threads": {"type": "integer", "minimum": 1},
                "dynamic_shared_bytes": {"type": "integer", "minimum": 0},
                "compiled": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["arch", "registers", "static_shared_bytes", "stack_frame_bytes",
                                     "spill_store_bytes", "spill_load_bytes", "occupancy"],
                        "properties": {
                            "arch": {"type": "string"},
                            "registers": {"type": "integer", "minimum": 0},
                            "static_shared_bytes": {"type": "integer", "minimum": 0},
                            "stack_frame_bytes": {"type": "integer", "minimum": 0},
                            "spill_store_bytes": {"type": "integer", "minimum": 0},
                            "spill_load_bytes": {"type": "integer", "minimum": 0},
                            "occupancy": {
                                "type": ["object", "null"],
                                "required": ["blocks_per_sm", "active_warps", "max_warps", "fraction",
                                             "limited_by"],
                            },
                        },
                    },
                },
            },
        },
    },
}


def load_registry(path: Path) -> dict:
    """Read and check the step registry (``stepwise_bench --list --json``)."""
    data = load_json(path, "step registry")
    problem = _first_schema_error(data, REGISTRY_SCHEMA)
    if problem:
        raise DataError(f"step registry {_display(path)} is not a step registry: {problem}")
    seen: set[str] = set()
    for chapter in data["chapters"]:
        if chapter["id"] in seen:
            raise DataError(f"step registry {_display(path)}: chapter {chapter['id']!r} appears twice")
        seen.add(chapter["id"])
        ids = [s["id"] for s in chapter["steps"]]
        ids += [c["id"] for c in chapter["ceilings"]] + [b["id"] for b in chapter["baselines"]]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise DataError(
                f"step registry {_display(path)}: chapter {chapter['id']!r} uses the id "
                f"{dupes[0]!r} twice (steps, ceilings and baselines share one namespace)"
            )
        _check_headline_and_sweep(path, chapter, ids)
        _check_former_ids(path, chapter, ids)
    return data


def _check_former_ids(path: Path, chapter: dict, ids: list[str]) -> None:
    """What the schema cannot say about the steps' ``formerly``: a former id names one step only, and is not an id
    of the chapter now (rows measured under it would be read as two steps')."""
    where = f"step registry {_display(path)}: chapter {chapter['id']!r}"
    owner: dict[str, str] = {}
    for step in chapter["steps"]:
        for old in step.get("formerly", []):
            if old in ids:
                raise DataError(f"{where}: step {step['id']!r} was formerly {old!r}, which is an id of the chapter "
                                "now; give the step that kept the name a new one")
            if old in owner:
                raise DataError(f"{where}: steps {owner[old]!r} and {step['id']!r} were both formerly {old!r}")
            owner[old] = step["id"]


def _check_headline_and_sweep(path: Path, chapter: dict, ids: list[str]) -> None:
    """What the schema cannot say about ``headline`` and ``sweep``: the ids they name exist."""
    where = f"step registry {_display(path)}: chapter {chapter['id']!r}"
    steps = {s["id"]: s for s in chapter["steps"]}
    headline = chapter.get("headline")
    if headline is not None:
        timings = [t["id"] for t in chapter["timings"]]
        if headline["timing"] not in timings:
            raise DataError(f"{where}: headline.timing {headline['timing']!r} is not one of its timings "
                            f"({', '.join(timings)})")
        for key in ("first", "final"):
            step = steps.get(headline[key])
            if step is None:
                raise DataError(f"{where}: headline.{key} {headline[key]!r} is not one of its steps")
            if not any(size["n"] == headline["n"] for size in step["sizes"]):
                raise DataError(f"{where}: headline.{key} {headline[key]!r} is not measured at "
                                f"headline.n = {headline['n']} (its sizes: "
                                f"{', '.join(str(size['n']) for size in step['sizes']) or 'none'})")
        if "baseline" in headline:
            baseline = next((b for b in chapter.get("baselines", []) if b["id"] == headline["baseline"]), None)
            if baseline is None:
                raise DataError(f"{where}: headline.baseline {headline['baseline']!r} is not one of its baselines")
            if baseline.get("sizes") and headline["n"] not in baseline["sizes"]:
                raise DataError(f"{where}: headline.baseline {headline['baseline']!r} is not measured at "
                                f"headline.n = {headline['n']}")
    unknown = [r for r in (chapter.get("sweep") or {}).get("rows", []) if r not in ids]
    if unknown:
        raise DataError(f"{where}: sweep.rows names {unknown[0]!r}, which is not one of its steps, "
                        "ceilings or baselines")
    sweep = chapter.get("sweep") or {}
    stray = [n for n in sweep.get("main_sizes", []) if n not in sweep.get("sizes", [])]
    if stray:
        raise DataError(f"{where}: sweep.main_sizes names n={stray[0]}, which is not one of sweep.sizes")
    try:
        sweep_axis_values(chapter)
    except DataError as exc:
        raise DataError(f"{where}: {exc}") from None


def sweep_axis_values(chapter: dict) -> list[tuple[int, int]]:
    """The sizes of a registry chapter's sweep with an ``axis`` and their places on it, ``(n, x)`` by x, where x is
    ``shape[axis.shape_index]`` of the step size with that n (any step's); empty without an axis. A DataError where a
    size has no such shape, or two sizes share an x."""
    sweep = chapter.get("sweep") or {}
    axis = sweep.get("axis")
    if axis is None:
        return []
    index = axis["shape_index"]
    shapes = {}
    for step in chapter["steps"]:
        for size in step["sizes"]:
            if "shape" in size:
                shapes.setdefault(size["n"], size["shape"])
    sizes = list(dict.fromkeys(sweep.get("sizes", [])))
    if not sizes:
        raise DataError("sweep.axis needs the sizes to draw (sweep.sizes is empty)")
    out: dict[int, int] = {}
    for n in sizes:
        shape = shapes.get(n)
        if shape is None or index >= len(shape):
            raise DataError(f"sweep.axis draws each size against shape[{index}], but size n={n} has "
                            + ("no shape in any step's sizes" if shape is None else f"the shape {shape}"))
        x = shape[index]
        if x in out.values():
            other = next(m for m, y in out.items() if y == x)
            raise DataError(f"sweep.axis: sizes n={other} and n={n} both have shape[{index}] = {x} "
                            "(one point per place on the axis)")
        out[n] = x
    return sorted(out.items(), key=lambda item: item[1])


def load_schema(schema_path: Path = DEFAULT_SCHEMA) -> dict:
    return load_json(schema_path, "measurement schema")


def load_measurements(path: Path, schema_path: Path = DEFAULT_SCHEMA) -> dict:
    """Read one measurement file and validate it against the schema (and a little more)."""
    data = load_json(path, "measurement file")
    if isinstance(data, dict) and data.get("schema") == 1:
        raise DataError(
            f"measurement file {_display(path)} is of schema 1 (one run for the whole file); this build reads "
            "schema 2, where each chapter carries the run that measured it: rewrite it with "
            f"`build/bench/stepwise_bench --upgrade {_display(path)}` (no GPU needed: each chapter keeps the "
            "file's run, no number changes), or measure again"
        )
    schema = load_schema(schema_path)
    problem = _first_schema_error(data, schema)
    if problem:
        raise DataError(
            f"measurement file {_display(path)} does not match {_display(schema_path)}: {problem}"
        )
    # What the schema cannot say: timing ids are unique and every row names one,
    # and each (id, n, timing) appears once.
    for ci, chapter in enumerate(data["chapters"]):
        timing_ids = [t["id"] for t in chapter["timings"]]
        if len(set(timing_ids)) != len(timing_ids):
            raise DataError(
                f"measurement file {_display(path)}: chapter {chapter['id']!r} lists a timing twice"
            )
        # Each list of rows (the autotuning configurations too) names its timings and has one row per key.
        row_lists = [(kind, chapter[kind], "row") for kind in ("steps", "ceilings", "baselines")]
        row_lists.append(("autotune", chapter.get("autotune", []), "autotuning row"))
        for kind, rows, what in row_lists:
            seen: set[tuple] = set()
            for ri, row in enumerate(rows):
                where = f"/chapters/{ci}/{kind}/{ri}"
                if row["timing"] not in timing_ids:
                    raise DataError(
                        f"measurement file {_display(path)}: at {where}: timing {row['timing']!r} "
                        f"is not one of chapter {chapter['id']!r}'s timings {timing_ids}"
                    )
                key = (row["id"], row["n"], row["timing"])
                if key in seen:
                    raise DataError(
                        f"measurement file {_display(path)}: at {where}: a second {what} for "
                        f"{row['id']} n={row['n']} timing={row['timing']}"
                    )
                seen.add(key)
    return data


#: Beside the recorded measurement files: chapters a recorded GPU's file has no numbers for yet, and why.
PENDING_FILE = "pending.toml"


def load_pending(recorded: Path | None) -> dict[str, dict[str, str]]:
    """``pending.toml`` of the recorded files' directory: a table per GPU slug, of chapter id -> reason, e.g.
    ``[nvidia-h200]`` then ``tensor_core_gemm = "..."``; empty where there is no such file."""
    if recorded is None or not (Path(recorded) / PENDING_FILE).is_file():
        return {}
    import tomllib

    path = Path(recorded) / PENDING_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DataError(f"{_display(path)} cannot be read: {exc}") from None
    for slug, chapters in data.items():
        if not isinstance(chapters, dict) or not all(isinstance(v, str) and v.strip() for v in chapters.values()):
            raise DataError(f"{_display(path)}: [{slug}] must map chapter ids to reasons (non-empty strings)")
    return data


def measurement_files(path: Path, schema_path: Path = DEFAULT_SCHEMA,
                      allow_empty: bool = False) -> list[tuple[Path, dict]]:
    """A measurement file, or every ``*.json`` of a directory (by name), loaded and checked.

    Two files for one GPU (the same ``gpu.slug``) are a DataError naming both; so is a directory
    without files, unless ``allow_empty``.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"measurement file or directory {_display(path)} does not exist")
    if path.is_file():
        return [(path, load_measurements(path, schema_path))]
    files = sorted(p for p in path.glob("*.json") if p.is_file())
    if not files and not allow_empty:
        raise DataError(
            f"no measurement files (*.json) in {_display(path)}; "
            "run `make measure` on a machine with a GPU, or pass --measurements FILE"
        )
    out: list[tuple[Path, dict]] = []
    seen: dict[str, Path] = {}
    for candidate in files:
        data = load_measurements(candidate, schema_path)
        slug = data["gpu"]["slug"]
        if slug in seen:
            raise DataError(
                f"measurement files {_display(seen[slug])} and {_display(candidate)} are both for GPU "
                f"{slug!r} (gpu.slug): keep one measurement file per GPU in {_display(path)}"
            )
        seen[slug] = candidate
        out.append((candidate, data))
    return out
