"""Loading and checking the step registry and the measurement files.

This module does not import Sphinx: ``conf/build_docs.py`` uses it to check
its inputs before it starts Sphinx, and the tests use it directly.

Two inputs, both contracts owned by the timing program:

* the **step registry** (``stepwise_bench --list --json``): which chapters and
  steps exist, in what order, their files, launchers, sizes and timings, and
  optionally a chapter's ``headline`` and size ``sweep``;
* **measurement files** (validated against ``conf/measurement.schema.json``):
  each one run of the timing program on one GPU.

Every number the site shows comes from a measurement file. A :class:`Dataset`
is the registry and one GPU's file; :class:`Datasets` all of a build's, the
primary one first (:func:`load_datasets`). The registry says what *should* be
there; :meth:`Dataset.problems` says what is not (a step without rows, or whose
source changed since it was measured).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

#: The repository this module lives in (docs/_ext/stepwise_docs/data.py).
REPO_ROOT = Path(__file__).resolve().parents[3]
CONF_DIR = REPO_ROOT / "conf"
DEFAULT_SCHEMA = CONF_DIR / "measurement.schema.json"

if str(CONF_DIR) not in sys.path:
    sys.path.insert(0, str(CONF_DIR))
from source_hash import source_sha256  # noqa: E402  (conf/source_hash.py: THE definition)


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


def load_json(path: Path, what: str) -> Any:
    """Parse a JSON file; a missing, unreadable or corrupt file is a DataError."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{what} {_display(path)} does not exist")
    if not path.is_file():
        raise DataError(f"{what} {_display(path)} is not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{what} {_display(path)} cannot be read: {exc}") from exc
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
                                                "type": "array", "minItems": 3, "maxItems": 3,
                                                "items": {"type": "integer", "minimum": 1},
                                                "description": "a GEMM's M, N, K where they differ: n is "
                                                               "then a key, not a size (left out of plots "
                                                               "against n; cited as #MxNxK)",
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
                           "step at one size and timing",
            "required": ["n", "timing", "first", "final"],
            "properties": {"n": {"type": "integer", "minimum": 1}, "timing": {"type": "string"},
                           "first": {"type": "string"}, "final": {"type": "string"}},
        },
        "sweep": {
            "type": "object",
            "description": "extra sizes measured for some rows only (stepwise-sweep), and the bytes the "
                           "problem occupies at size n: bytes_per_n * n ** power",
            "properties": {
                "sizes": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                "rows": {"type": "array", "items": {"type": "string"}},
                "footprint": {
                    "type": "object",
                    "required": ["bytes_per_n", "power"],
                    "properties": {"bytes_per_n": {"type": "number", "exclusiveMinimum": 0},
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
    return data


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
    unknown = [r for r in (chapter.get("sweep") or {}).get("rows", []) if r not in ids]
    if unknown:
        raise DataError(f"{where}: sweep.rows names {unknown[0]!r}, which is not one of its steps, "
                        "ceilings or baselines")


def load_schema(schema_path: Path = DEFAULT_SCHEMA) -> dict:
    return load_json(schema_path, "measurement schema")


def load_measurements(path: Path, schema_path: Path = DEFAULT_SCHEMA) -> dict:
    """Read one measurement file and validate it against the schema (and a little more)."""
    data = load_json(path, "measurement file")
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


# ---------------------------------------------------------------------------
# The combined view
# ---------------------------------------------------------------------------

@dataclass
class Problem:
    """A step whose numbers cannot be shown as current."""

    kind: str  # "missing" | "stale" | "registry_stale" | "no_file" | "no_resources"
    chapter: str
    step: str
    file: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class StepState:
    step: dict
    rows: dict = field(default_factory=dict)  # (n, timing) -> row
    missing: list = field(default_factory=list)  # [(n, timing)]
    stale: bool = False
    stale_reason: str = ""
    current_sha256: str | None = None
    #: Why this GPU did not run the step (the measurement's ``unsupported`` entry), or empty.
    unsupported: str = ""

    @property
    def ok(self) -> bool:
        return not self.missing and not self.stale


class Chapter:
    """One registry chapter and its rows in the measurement file."""

    def __init__(self, dataset: "Dataset", reg: dict, measured: dict | None):
        self.dataset = dataset
        self.reg = reg
        self.measured = measured
        self.id: str = reg["id"]
        self.title: str = reg["title"]
        self.share_of: str = reg["share_of"]
        self.timings: list[dict] = reg["timings"]
        self.steps: list[dict] = reg["steps"]
        self.ceilings: list[dict] = reg["ceilings"]
        self.baselines: list[dict] = reg["baselines"]
        #: The front page's row (``headline``: n, timing, first and final step), or None.
        self.headline: dict | None = reg.get("headline")
        #: ``sweep``: extra sizes for some rows and the problem's footprint ({} where absent).
        self.sweep: dict = reg.get("sweep") or {}
        self._rows: dict[tuple[str, str, int, str], dict] = {}
        #: The measured configurations of the chapter's autotuning sweep (``autotune`` rows), if any.
        self.autotune: list[dict] = list((measured or {}).get("autotune", []))
        #: Steps, ceilings and baselines this GPU cannot run, and why (``unsupported``: id -> reason).
        self.unsupported: dict[str, str] = {u["id"]: u["reason"]
                                            for u in (measured or {}).get("unsupported", [])}
        if measured is not None:
            for kind in ("steps", "ceilings", "baselines"):
                for row in measured[kind]:
                    self._rows[(kind, row["id"], row["n"], row["timing"])] = row
        self.states: dict[str, StepState] = {s["id"]: self._state(s) for s in self.steps}

    @property
    def pending(self) -> str:
        """Why this GPU's recorded file has no numbers for the chapter, where ``pending.toml`` beside the
        recorded files says so and the file indeed has none; else empty. The pages show the reason for that
        GPU, and its steps are not *missing* rows (which a strict build fails on)."""
        if self.measured is not None:
            return ""
        return self.dataset.pending.get(self.id, "")

    # -- lookups ---------------------------------------------------------
    def timing(self, timing_id: str) -> dict:
        for t in self.timings:
            if t["id"] == timing_id:
                return t
        raise DataError(
            f"chapter {self.id!r} has no timing {timing_id!r} "
            f"(it has {', '.join(t['id'] for t in self.timings)})"
        )

    def step(self, step_id: str) -> dict:
        for s in self.steps:
            if s["id"] == step_id:
                return s
        raise DataError(
            f"chapter {self.id!r} has no step {step_id!r} in the step registry "
            f"(it has {', '.join(s['id'] for s in self.steps) or 'none'})"
        )

    def previous_step(self, step_id: str) -> dict | None:
        ids = [s["id"] for s in self.steps]
        i = ids.index(self.step(step_id)["id"])
        return self.steps[i - 1] if i > 0 else None

    def tiling(self, step_id: str) -> Tiling | None:
        """The step's ``tiling`` from the registry, or None where it has none."""
        entry = self.step(step_id).get("tiling")
        return None if entry is None else Tiling.of(entry)

    def autotune_rows(self, n: int, timing: str) -> list[dict]:
        """The autotuning rows measured at one size and timing, in file order."""
        return [r for r in self.autotune if r["n"] == n and r["timing"] == timing]

    def sizes(self) -> list[tuple[int, str]]:
        """The chapter's main problem sizes, in the order the steps list them: every size of its
        steps but the extra sizes of its sweep (``sweep.sizes``, see :meth:`sweep_sizes`)."""
        extra = set(self.sweep_sizes())
        return [(n, problem) for n, problem in self._step_sizes().items() if n not in extra]

    def _step_sizes(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for s in self.steps:
            for size in s["sizes"]:
                out.setdefault(size["n"], size.get("problem", f"n = {size['n']}"))
        return out

    def sweep_sizes(self) -> list[int]:
        """The extra sizes measured only for the sweep's rows (``sweep.sizes``; none without one)."""
        return list(self.sweep.get("sizes", []))

    def all_sizes(self) -> list[tuple[int, str]]:
        """Every size anything of the chapter is measured at: the main sizes, then the other sizes
        its ceilings and baselines list, then the sweep's, with each size's problem text."""
        out = dict(self.sizes())
        for entry in self.ceilings + self.baselines:
            for n in entry.get("sizes", []):
                out.setdefault(n, self.problem(n))
        for n in self.sweep_sizes():
            out.setdefault(n, self.problem(n))
        return list(out.items())

    def shape(self, n: int) -> tuple[int, ...] | None:
        """A size's ``shape`` (M, N, K) where the registry gives one, else None."""
        for s in self.steps:
            for size in s["sizes"]:
                if size["n"] == n and "shape" in size:
                    return tuple(size["shape"])
        return None

    def is_size(self, n: int) -> bool:
        """Whether n is a size, to be drawn against the others: not a key of a rectangular problem
        (a registry ``shape`` whose dimensions differ)."""
        shape = self.shape(n)
        return shape is None or len(set(shape)) == 1

    def n_of(self, text: str) -> int:
        """The n of a size as the pages cite it: ``4096``, or ``MxNxK`` for a size with that ``shape``."""
        if "x" not in text:
            return int(text)
        try:
            wanted = tuple(int(part) for part in text.split("x"))
        except ValueError:
            raise DataError(f"size {text!r}: expected N or MxNxK") from None
        for s in self.steps:
            for size in s["sizes"]:
                if tuple(size.get("shape", ())) == wanted:
                    return size["n"]
        raise DataError(f"chapter {self.id!r} has no size of shape {text!r} in the step registry")

    def problem(self, n: int) -> str:
        """The problem text of size n, as the steps list it (``n = N`` where none does)."""
        return self._step_sizes().get(n, f"n = {n}")

    def sweep_rows(self) -> list[str]:
        """The ids the sweep is drawn for (``sweep.rows``); without them, every step and baseline."""
        if "rows" in self.sweep:
            return list(self.sweep["rows"])
        return [s["id"] for s in self.steps] + [b["id"] for b in self.baselines]

    def kind_of(self, row_id: str) -> str:
        """``"steps"``, ``"ceilings"`` or ``"baselines"``; a DataError for an unknown id."""
        for kind in ("steps", "ceilings", "baselines"):
            if any(e["id"] == row_id for e in getattr(self, kind)):
                return kind
        raise DataError(
            f"chapter {self.id!r} has no step, ceiling or baseline {row_id!r} in the step registry"
        )

    def entry(self, row_id: str) -> dict:
        """The registry entry of a step, ceiling or baseline."""
        kind = self.kind_of(row_id)
        return next(e for e in getattr(self, kind) if e["id"] == row_id)

    def expected_sizes(self, row_id: str) -> list[int]:
        """The sizes a row must be measured at: a step's sizes, a reference's ``sizes`` (absent: every
        main size), and for a row of ``sweep.rows`` the sweep's sizes as well."""
        kind, entry = self.kind_of(row_id), self.entry(row_id)
        if kind == "steps":
            out = [size["n"] for size in entry["sizes"]]
        else:
            out = list(entry.get("sizes") or [n for n, _p in self.sizes()])
        if row_id in self.sweep.get("rows", []):
            out += [n for n in self.sweep_sizes() if n not in out]
        return out

    def footprint_bytes(self, n: float) -> float | None:
        """The bytes the problem occupies at size n (``sweep.footprint``), or None where unknown."""
        fp = self.sweep.get("footprint")
        return None if fp is None else fp["bytes_per_n"] * float(n) ** fp["power"]

    def l2_size(self, l2_bytes: int | None) -> float | None:
        """The n at which the problem's footprint equals ``l2_bytes`` (None without a footprint)."""
        fp = self.sweep.get("footprint")
        if fp is None or not l2_bytes:
            return None
        return (l2_bytes / fp["bytes_per_n"]) ** (1.0 / fp["power"])

    def step_row(self, step_id: str, n: int, timing: str) -> dict | None:
        return self._rows.get(("steps", step_id, n, timing))

    def ceiling_row(self, ceiling_id: str, n: int, timing: str) -> dict | None:
        return self._rows.get(("ceilings", ceiling_id, n, timing))

    def baseline_row(self, baseline_id: str, n: int, timing: str) -> dict | None:
        return self._rows.get(("baselines", baseline_id, n, timing))

    def any_row(self, row_id: str, n: int, timing: str) -> tuple[str, dict | None]:
        """Find a step, ceiling or baseline row by id; returns (kind, row)."""
        for kind, entries in (("steps", self.steps), ("ceilings", self.ceilings),
                              ("baselines", self.baselines)):
            if any(e["id"] == row_id for e in entries):
                return kind, self._rows.get((kind, row_id, n, timing))
        raise DataError(
            f"chapter {self.id!r} has no step, ceiling or baseline {row_id!r} in the step registry"
        )

    # -- state -----------------------------------------------------------
    def _state(self, step: dict) -> StepState:
        state = StepState(step=step, unsupported=self.unsupported.get(step["id"], ""))
        path = self.dataset.repo_root / step["file"]
        if path.is_file():
            state.current_sha256 = source_sha256(path)
        for n in self.expected_sizes(step["id"]):
            for t in self.timings:
                row = self.step_row(step["id"], n, t["id"])
                if row is None:
                    state.missing.append((n, t["id"]))
                else:
                    state.rows[(n, t["id"])] = row
        for row in state.rows.values():
            if row["file"] != step["file"]:
                state.stale = True
                state.stale_reason = f"measured from {row['file']}, the registry names {step['file']}"
                break
            if state.current_sha256 is not None and row["source_sha256"] != state.current_sha256:
                state.stale = True
                state.stale_reason = f"{step['file']} changed since it was measured"
                break
        return state


class Dataset:
    """The registry, one measurement file (or none) and the repository they describe."""

    def __init__(self, registry: dict, measurements: dict | None, repo_root: Path,
                 measurement_path: Path | None = None, source: str = "recorded",
                 pending: dict[str, str] | None = None):
        self.registry = registry
        #: Chapters this recorded file has no numbers for yet, and why (from ``pending.toml``).
        self.pending: dict[str, str] = dict(pending or {})
        self.measurements = measurements
        self.repo_root = Path(repo_root)
        self.measurement_path = measurement_path
        if source not in ("fresh", "recorded"):
            raise DataError(f"source must be 'fresh' or 'recorded', not {source!r}")
        self.source = source
        measured_chapters = {c["id"]: c for c in (measurements or {}).get("chapters", [])}
        self.chapters: dict[str, Chapter] = {
            c["id"]: Chapter(self, c, measured_chapters.get(c["id"])) for c in registry["chapters"]
        }

    @classmethod
    def load(cls, registry_path: Path, measurement_path: Path, repo_root: Path,
             source: str = "recorded", schema_path: Path = DEFAULT_SCHEMA) -> "Dataset":
        """The primary dataset of a file or a directory of them (see :func:`load_datasets`, which
        a build uses to load every GPU's)."""
        return load_datasets(registry_path, measurement_path, repo_root, source, schema_path).primary

    def chapter(self, chapter_id: str) -> Chapter:
        try:
            return self.chapters[chapter_id]
        except KeyError:
            raise DataError(
                f"unknown chapter {chapter_id!r}: the step registry has "
                f"{', '.join(self.chapters) or 'no chapters'}"
            ) from None

    @property
    def gpu(self) -> dict:
        return (self.measurements or {}).get("gpu", {})

    @property
    def slug(self) -> str:
        """The GPU's slug (``gpu.slug``, e.g. ``nvidia-h100-80gb-hbm3``); empty without a file."""
        return self.gpu.get("slug", "")

    @property
    def gpu_name(self) -> str:
        return self.gpu.get("name", "an unknown GPU")

    @property
    def limits(self) -> dict | None:
        """The GPU's limits (``gpu.limits``: clock, FMA lanes, registers, shared memory), if recorded."""
        return self.gpu.get("limits")

    @property
    def run(self) -> dict:
        return (self.measurements or {}).get("run", {})

    def measured_where(self) -> str:
        gpu = self.gpu.get("name", "an unknown GPU")
        commit = self.run.get("commit", "unknown")
        dirty = " (dirty)" if self.run.get("dirty") else ""
        return f"on {gpu}, commit {commit}{dirty}"

    def problems(self) -> list[Problem]:
        """Every step whose numbers are missing or stale, in registry order, and every entry of
        ``pending.toml`` for this file that is no longer true (the chapter is recorded, or unknown)."""
        out: list[Problem] = []
        file_name = _display(self.measurement_path) if self.measurement_path else "the measurement file"
        for chapter_id in self.pending:
            chapter = self.chapters.get(chapter_id)
            if chapter is None or chapter.measured is not None:
                out.append(Problem(
                    "pending", chapter_id, "", "",
                    f"{PENDING_FILE} says {file_name} has no numbers for chapter {chapter_id!r}, but "
                    + ("the step registry has no such chapter" if chapter is None else "it has")
                    + f"; remove the entry [{self.slug}] {chapter_id}"))
        for chapter in self.chapters.values():
            for step in chapter.steps:
                state = chapter.states[step["id"]]
                where = f"{chapter.id}/{step['id']}"
                if state.current_sha256 is None:
                    out.append(Problem(
                        "no_file", chapter.id, step["id"], step["file"],
                        f"missing source: {where} names {step['file']}, which does not exist "
                        f"under {self.repo_root}",
                    ))
                    continue
                if state.stale:
                    out.append(Problem(
                        "stale", chapter.id, step["id"], step["file"],
                        f"stale measurement: {where} ({state.stale_reason} "
                        f"{self.measured_where()}, in {file_name}); re-run make measure",
                    ))
                reg_sha = step.get("source_sha256", "")
                if _is_sha256(reg_sha) and reg_sha != state.current_sha256:
                    out.append(Problem(
                        "registry_stale", chapter.id, step["id"], step["file"],
                        f"stale step registry: {where} ({step['file']} changed since the timing "
                        "program was built); rebuild it (make) and regenerate the registry",
                    ))
                uncounted = [k["name"] for k in step["kernels"] if not k.get("compiled")]
                if uncounted:
                    out.append(Problem(
                        "no_resources", chapter.id, step["id"], step["file"],
                        f"no compiled resources: {where} ({step['file']}): the step registry has no "
                        f"registers or occupancy for {', '.join(uncounted)}; build with make, which "
                        "writes the registry from the compiler's --resource-usage reports",
                    ))
                # A step the GPU cannot run is not missing, nor one of a chapter the file has no numbers for.
                if state.missing and not state.unsupported and not chapter.pending:
                    pairs = ", ".join(f"n={n} timing={t}" for n, t in state.missing)
                    out.append(Problem(
                        "missing", chapter.id, step["id"], step["file"],
                        f"missing measurement: {where} ({step['file']}) has no row for {pairs} "
                        f"in {file_name}; re-run make measure",
                    ))
            for kind, entries in (("ceiling", chapter.ceilings), ("baseline", chapter.baselines)):
                for entry in entries:
                    missing = [
                        (n, t["id"])
                        for n in chapter.expected_sizes(entry["id"])  # main, its own, the sweep's
                        for t in chapter.timings
                        if chapter.any_row(entry["id"], n, t["id"])[1] is None
                    ]
                    if missing and entry["id"] not in chapter.unsupported and not chapter.pending:
                        pairs = ", ".join(f"n={n} timing={t}" for n, t in missing)
                        out.append(Problem(
                            "missing", chapter.id, entry["id"], "",
                            f"missing measurement: {chapter.id}/{entry['id']} ({kind}) has no row "
                            f"for {pairs} in {file_name}; re-run make measure",
                        ))
        return out


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


def _is_sha256(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


# ---------------------------------------------------------------------------
# Several GPUs: one dataset per measurement file
# ---------------------------------------------------------------------------

#: The GPU whose recorded numbers the prose cites when no fresh measurement is rendered
#: (conf value ``stepwise_primary_gpu``).
DEFAULT_PRIMARY_GPU = "nvidia-h100-80gb-hbm3"


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


class Datasets:
    """Every GPU's dataset, the primary one first, then the others by GPU slug.

    The primary dataset is the one the prose cites (the roles, the step sections' code and API,
    the SGEMM chapter's bounds, roofline and autotuning): the fresh one if there is one, else the
    one of ``primary_gpu``, else the first by slug. Tables and plots are drawn once per dataset.
    """

    def __init__(self, datasets: list[Dataset], primary_gpu: str = DEFAULT_PRIMARY_GPU):
        if not datasets:
            raise DataError("no measurement files")
        fresh = [d for d in datasets if d.source == "fresh"]
        pool = sorted(fresh or datasets, key=lambda d: d.slug)
        primary = next((d for d in pool if d.slug == primary_gpu), pool[0])
        self.all: list[Dataset] = [primary] + sorted((d for d in datasets if d is not primary),
                                                     key=lambda d: d.slug)

    @property
    def primary(self) -> Dataset:
        return self.all[0]

    def __iter__(self):
        return iter(self.all)

    def __len__(self) -> int:
        return len(self.all)

    def problems(self) -> list[Problem]:
        """Every dataset's problems, primary first; a problem of the sources or the registry (the
        same for every dataset) once."""
        out: dict[str, Problem] = {}
        for dataset in self.all:
            for problem in dataset.problems():
                out.setdefault(problem.message, problem)
        return list(out.values())

    def paths(self) -> list[Path]:
        return [d.measurement_path for d in self.all if d.measurement_path is not None]


def load_datasets(registry_path: Path, measurements: Path, repo_root: Path, source: str = "recorded",
                  schema_path: Path = DEFAULT_SCHEMA, recorded: Path | None = None,
                  primary_gpu: str = DEFAULT_PRIMARY_GPU) -> Datasets:
    """The datasets of a build: every file of ``measurements`` (a file or a directory; labelled
    ``source``), then every file of ``recorded`` (a directory of recorded files, labelled recorded)
    whose GPU the first ones do not cover. So a fresh measurement replaces the recorded one of its
    GPU and is shown beside the recorded ones of the other GPUs."""
    registry = load_registry(registry_path)
    # pending.toml speaks of the recorded files only: a fresh measurement of the same GPU replaces them.
    pending = load_pending(recorded if recorded is not None else
                           (measurements if source == "recorded" and Path(measurements).is_dir() else None))
    datasets = [Dataset(registry, data, repo_root, path, source,
                        pending.get(data["gpu"]["slug"]) if source == "recorded" else None)
                for path, data in measurement_files(measurements, schema_path)]
    if recorded is not None:
        covered = {d.slug for d in datasets}
        resolved = {Path(p).resolve() for p in (d.measurement_path for d in datasets)}
        for path, data in measurement_files(recorded, schema_path, allow_empty=True):
            if data["gpu"]["slug"] not in covered and path.resolve() not in resolved:
                datasets.append(Dataset(registry, data, repo_root, path, "recorded",
                                        pending.get(data["gpu"]["slug"])))
    return Datasets(datasets, primary_gpu)

