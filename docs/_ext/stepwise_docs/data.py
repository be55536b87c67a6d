"""The step registry and the measurement files, combined: what each GPU measured of what should be there.

The files are read and checked by :mod:`.inputs`. This module does not import Sphinx:
``conf/build_docs.py`` uses it to check its inputs before it starts Sphinx, and the tests use it
directly.

Two inputs, both contracts owned by the timing program:

* the **step registry** (``stepwise_bench --list --json``): which chapters and
  steps exist, in what order, their files, launchers, sizes and timings, and
  optionally a chapter's ``headline`` and size ``sweep``;
* **measurement files** (validated against ``conf/measurement.schema.json``):
  each one run of the timing program on one GPU.

Every number the site shows comes from a measurement file. A :class:`Dataset`
is the registry and one GPU's file; :class:`Datasets` all of a build's, the
reference one first (:func:`load_datasets`). The registry says what *should* be
there; :meth:`Dataset.problems` says what is not (a step without rows, or whose
source changed since it was measured). A *second GPU* (a recorded GPU other than
the reference one, :attr:`Dataset.is_second_gpu`) keeps the rows of a step that
changed after it was recorded, and lacks those of steps added since: the pages show
its numbers as of their commit (:meth:`Chapter.stale_steps`,
:meth:`Chapter.added_steps`, :func:`.fmt.as_of_note`), and neither is a problem.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .inputs import (DEFAULT_SCHEMA, PENDING_FILE, DataError, Tiling, _display, load_pending, load_registry,
                     measurement_files, sweep_axis_values)
from .source_hash import source_sha256  # THE definition (the build runs it too)


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
        #: A step's ids before the chapter's steps were split or renumbered (its ``formerly``) -> its id now: a
        #: GPU's rows measured under a former id are that step's, as of their commit (:meth:`step_id_of`).
        self.renamed: dict[str, str] = {old: s["id"] for s in self.steps for old in s.get("formerly", [])}
        #: Steps, ceilings and baselines this GPU cannot run, and why (``unsupported``: id -> reason).
        self.unsupported: dict[str, str] = {self.step_id_of(u): u["reason"]
                                            for u in (measured or {}).get("unsupported", [])}
        if measured is not None:
            for kind in ("steps", "ceilings", "baselines"):
                for row in measured[kind]:
                    row_id = self.step_id_of(row) if kind == "steps" else row["id"]
                    self._rows[(kind, row_id, row["n"], row["timing"])] = row
        self.states: dict[str, StepState] = {s["id"]: self._state(s) for s in self.steps}

    def current_id(self, step_id: str) -> str:
        """The id now of the step a measurement named ``step_id``: the same, or where the step was renamed since
        (``formerly``), the new one."""
        return self.renamed.get(step_id, step_id)

    def step_id_of(self, row: dict) -> str:
        """The id now of the step a measured row (or ``unsupported`` entry) names (:meth:`current_id`)."""
        return self.current_id(row["id"])

    def measured_as(self, step_id: str) -> str:
        """The id this GPU measured the step under: a former one where its rows carry it, else ``step_id``."""
        for row in self.states[step_id].rows.values():
            return row["id"]
        return step_id

    @property
    def run(self) -> dict:
        """The run that measured this chapter (its ``run``: date, commit, driver, clocks, stopping rule, its GPU
        tests); empty where the file has no numbers for it."""
        return (self.measured or {}).get("run", {})

    def measured_where(self) -> str:
        """``on GPU, commit abc1234`` of the run that measured this chapter, for messages."""
        dirty = " (dirty)" if self.run.get("dirty") else ""
        return f"on {self.dataset.gpu_name}, commit {self.run.get('commit', 'unknown')}{dirty}"

    @property
    def pending(self) -> str:
        """Why this GPU's recorded file has no numbers for the chapter, where ``pending.toml`` beside the
        recorded files says so and the file indeed has none; else empty. The pages show the reason for that
        GPU, and its steps are not *missing* rows (which a strict build fails on)."""
        if self.measured is not None:
            return ""
        return self.dataset.pending.get(self.id, "")

    def added_steps(self) -> list[dict]:
        """On a second GPU that measured this chapter (:attr:`Dataset.is_second_gpu`): the steps of which it has no
        row at all and that it did not mark as beyond it, added to the chapter after its run. It is kept as of its
        commit (:func:`.fmt.as_of_note`), and they are not *missing* rows. Else empty."""
        if not self.dataset.is_second_gpu or self.measured is None:
            return []
        return [step for step in self.steps
                if not self.states[step["id"]].rows and not self.states[step["id"]].unsupported]

    def added_sizes(self) -> list[dict]:
        """On a second GPU that measured this chapter (:attr:`Dataset.is_second_gpu`): the sizes the step registry
        expects of which its file has no row at all, of any step, ceiling or library, added to the chapter after its
        run, as the registry's sizes (``n``, ``problem``, ``shape``), in registry order. It is kept as of its commit
        (:func:`.fmt.as_of_note`), and its rows there are not *missing*. Else empty."""
        if not self.dataset.is_second_gpu or self.measured is None:
            return []
        seen = {n for (_kind, _row_id, n, _timing) in self._rows}  # measured, then each added size once
        out = []
        for size in (size for step in self.steps for size in step["sizes"]):
            if size["n"] not in seen:
                seen.add(size["n"])
                out.append(size)
        return out

    def final_step_id(self) -> str:
        """The step this GPU's numbers end the chapter with: the headline's final one, else the last step; on a
        second GPU that measured the chapter before that step was added (:meth:`added_steps`), the last step it
        measured."""
        final = self.headline["final"] if self.headline else self.steps[-1]["id"]
        added = {step["id"] for step in self.added_steps()}
        if final not in added:
            return final
        measured = [step["id"] for step in self.steps if step["id"] not in added]
        return measured[-1] if measured else final

    def stale_steps(self) -> list[tuple[dict, StepState]]:
        """The steps whose rows are stale (their source changed since this chapter's run measured them), with
        their states, in registry order: the same states that mark their rows ``stepwise-stale``."""
        return [(step, self.states[step["id"]]) for step in self.steps if self.states[step["id"]].stale]

    # -- lookups ---------------------------------------------------------
    def _by_id(self, entries: list[dict], wanted: str, what: str, where: str = "") -> dict:
        """The entry of ``entries`` whose id is ``wanted``; else a DataError that lists the ids there are."""
        for entry in entries:
            if entry["id"] == wanted:
                return entry
        raise DataError(
            f"chapter {self.id!r} has no {what} {wanted!r}{where} "
            f"(it has {', '.join(e['id'] for e in entries) or 'none'})"
        )

    def timing(self, timing_id: str) -> dict:
        return self._by_id(self.timings, timing_id, "timing")

    def step(self, step_id: str) -> dict:
        return self._by_id(self.steps, step_id, "step", " in the step registry")

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
        steps but the extra sizes of its sweep (see :meth:`sweep_only_sizes`)."""
        extra = self.sweep_only_sizes()
        return [(n, problem) for n, problem in self._step_sizes().items() if n not in extra]

    def _step_sizes(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for s in self.steps:
            for size in s["sizes"]:
                out.setdefault(size["n"], size.get("problem", f"n = {size['n']}"))
        return out

    def sweep_sizes(self) -> list[int]:
        """The sizes of the sweep (``sweep.sizes``; none without one), measured for the sweep's rows."""
        return list(dict.fromkeys(self.sweep.get("sizes", [])))

    def sweep_only_sizes(self) -> set[int]:
        """The sweep's sizes that are not main sizes: all of them but those of ``sweep.main_sizes`` and
        those a step outside the sweep's rows is measured at (a sweep with an ``axis`` lists every size
        of its family, main ones among them)."""
        rows = set(self.sweep_rows())
        main = {size["n"] for s in self.steps if s["id"] not in rows for size in s["sizes"]}
        main.update(self.sweep.get("main_sizes", []))
        return {n for n in self.sweep_sizes() if n not in main}

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
        """A size's ``shape`` where the registry gives one (a GEMM's M, N, K; a matrix's rows,
        columns), else None."""
        for s in self.steps:
            for size in s["sizes"]:
                if size["n"] == n and "shape" in size:
                    return tuple(size["shape"])
        return None

    def is_size(self, n: int) -> bool:
        """Whether n is a size, to be drawn against the others: not a key (a size with a registry
        ``shape``, e.g. a rectangular GEMM or a matrix of rows x columns)."""
        return self.shape(n) is None

    def axis(self) -> dict | None:
        """The sweep's ``axis`` (``label``, ``shape_index``): its sizes are drawn against
        ``shape[shape_index]`` instead of n; None without one."""
        return self.sweep.get("axis")

    def axis_sizes(self) -> list[tuple[int, int]]:
        """The sweep's sizes with an ``axis`` and their places on it, ``(n, x)`` by x (empty without
        one); a DataError where a size has no shape with that dimension, or two share an x."""
        try:
            return sweep_axis_values(self.reg)
        except DataError as exc:
            raise DataError(f"chapter {self.id!r}: {exc}") from None

    def n_of(self, text: str) -> int:
        """The n of a size as the pages cite it: ``4096``; ``MxNxK`` or ``RxC`` for a size with that
        ``shape``; where several sizes share the shape (fp32 and bf16), ``RxC/WORD`` for the one whose
        problem text ends in WORD (``16384x8192/bf16``, any case), or ``RxC/WORD/WORD...`` for the one
        whose problem has each WORD (``16384x8192/layernorm/bf16``). An unknown or ambiguous shape is a
        DataError naming the candidates."""
        shape_text, slash, suffix = text.partition("/")
        if "x" not in shape_text and not slash:
            return int(text)
        try:
            wanted = tuple(int(part) for part in shape_text.split("x"))
        except ValueError:
            raise DataError(f"size {text!r}: expected N, MxNxK or RxC (and /WORD, the last word of its "
                            "problem, where sizes share a shape)") from None
        candidates: dict[int, str] = {}
        for s in self.steps:
            for size in s["sizes"]:
                if tuple(size.get("shape", ())) == wanted:
                    candidates.setdefault(size["n"], size.get("problem", ""))
        if not candidates:
            raise DataError(f"chapter {self.id!r} has no size of shape {shape_text!r} in the step registry")
        named = ", ".join(repr(p) for p in candidates.values())
        if slash:
            # One word: the last of the problem ("16384x8192/bf16"); several: each among its words
            # ("16384x8192/layernorm/bf16").
            words = [w.strip().lower() for w in suffix.split("/")]
            found = [n for n, p in candidates.items()
                     if p.split() and (p.split()[-1].lower() == words[0] if len(words) == 1
                                       else all(w in [q.lower() for q in p.split()] for w in words))]
            if len(found) == 1:
                return found[0]
            raise DataError(
                f"chapter {self.id!r}: {'no' if not found else 'more than one'} size of shape "
                f"{shape_text!r} has a problem ending in {suffix!r} (its sizes of that shape: {named})")
        if len(candidates) > 1:
            raise DataError(
                f"chapter {self.id!r}: size {text!r} is ambiguous, {len(candidates)} sizes have that shape "
                f"({named}); name one as {shape_text}/WORD, WORD the last word of its problem")
        return next(iter(candidates))

    def problem(self, n: int) -> str:
        """The problem text of size n, as the steps list it (``n = N`` where none does)."""
        return self._step_sizes().get(n, f"n = {n}")

    def size_text(self, n: int) -> str:
        """A size as messages and tooltips name it: ``n = 4096`` for a size drawn against others, the problem text
        (``16384 x 8192 LayerNorm fp32``) for one whose n is a key that stands for a shape (:meth:`is_size`)."""
        return f"n = {n}" if self.is_size(n) else self.problem(n)

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
        main size), and for a row of ``sweep.rows`` the sweep's sizes as well, but where a reference's
        ``sizes`` leave some of them out (a library that does not take a size: CUTLASS at 4095³)."""
        kind, entry = self.kind_of(row_id), self.entry(row_id)
        if kind == "steps":
            out = [size["n"] for size in entry["sizes"]]
        else:
            out = list(entry.get("sizes") or [n for n, _p in self.sizes()])
        if row_id in self.sweep.get("rows", []):
            listed = entry.get("sizes") if kind != "steps" else None
            out += [n for n in self.sweep_sizes() if not listed or n in listed]
        return list(dict.fromkeys(out))

    def _footprint(self) -> dict | None:
        """``sweep.footprint``, or None where absent or 0 bytes per n (unknown: a sweep along an axis has none)."""
        fp = self.sweep.get("footprint")
        return fp if fp is not None and fp["bytes_per_n"] > 0 else None

    def footprint_bytes(self, n: float) -> float | None:
        """The bytes the problem occupies at size n (``sweep.footprint``), or None where unknown."""
        fp = self._footprint()
        return None if fp is None else fp["bytes_per_n"] * float(n) ** fp["power"]

    def l2_size(self, l2_bytes: int | None) -> float | None:
        """The n at which the problem's footprint equals ``l2_bytes`` (None without a footprint)."""
        fp = self._footprint()
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


@dataclass
class RunGroup:
    """One run of the timing program and the chapters of a file it measured (see :meth:`Dataset.runs`)."""

    run: dict
    chapters: list[str] = field(default_factory=list)


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
        #: Whether this is the build's reference dataset, the one the prose cites (set by :class:`Datasets`; a
        #: dataset on its own is its own reference).
        self.is_reference: bool = True
        #: Whether this is a second GPU: a recorded file that is neither the reference dataset nor of the reference
        #: GPU (set by :class:`Datasets`). Its stale rows are shown as of their commit rather than reported.
        self.is_second_gpu: bool = False
        measured_chapters = {c["id"]: c for c in (measurements or {}).get("chapters", [])}
        self.chapters: dict[str, Chapter] = {
            c["id"]: Chapter(self, c, measured_chapters.get(c["id"])) for c in registry["chapters"]
        }

    @classmethod
    def load(cls, registry_path: Path, measurement_path: Path, repo_root: Path,
             source: str = "recorded", schema_path: Path = DEFAULT_SCHEMA) -> "Dataset":
        """The reference dataset of a file or a directory of them (see :func:`load_datasets`, which
        a build uses to load every GPU's)."""
        return load_datasets(registry_path, measurement_path, repo_root, source, schema_path).reference

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
        """The run that last wrote the file (which chapters it measured, which it kept); each chapter's own run is
        :attr:`Chapter.run`."""
        return (self.measurements or {}).get("run", {})

    def runs(self) -> list[RunGroup]:
        """The runs the file's chapters were measured in, earliest first, each with its chapters in registry order:
        one where the whole file was measured at once, more where runs of some chapters were merged into it."""
        groups: dict[tuple, RunGroup] = {}
        for chapter in self.chapters.values():
            run = chapter.run
            if not run:
                continue
            key = (run.get("commit"), run.get("dirty"), run.get("seed"), run.get("command"))
            group = groups.setdefault(key, RunGroup(run))
            group.chapters.append(chapter.id)
            if run.get("date", "") < group.run.get("date", ""):  # the run's start: its first chapter's date
                group.run = run
        return sorted(groups.values(), key=lambda g: g.run.get("date", ""))

    def problems(self) -> list[Problem]:
        """Every step whose numbers are missing or stale, in registry order, and every entry of
        ``pending.toml`` for this file that is no longer true (the chapter is recorded, or unknown).

        A second GPU's stale rows are not among them (:attr:`is_second_gpu`), nor the rows of steps or sizes added
        after it measured a chapter (:meth:`Chapter.added_steps`, :meth:`Chapter.added_sizes`): the pages show its
        numbers as of their commit (:func:`.fmt.as_of_note`). Its other missing rows are, as every dataset's."""
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
            added = chapter.added_steps()
            added_sizes = {size["n"] for size in chapter.added_sizes()}
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
                if state.stale and not self.is_second_gpu:
                    out.append(Problem(
                        "stale", chapter.id, step["id"], step["file"],
                        f"stale measurement: {where} ({state.stale_reason} "
                        f"{chapter.measured_where()}, in {file_name}); re-run make measure CHAPTERS={chapter.id}",
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
                # A step the GPU cannot run is not missing, nor one of a chapter the file has no numbers for, nor one
                # added after a second GPU measured the chapter.
                missing = [(n, t) for n, t in state.missing if n not in added_sizes]
                if (missing and not state.unsupported and not chapter.pending
                        and step not in added):
                    pairs = ", ".join(f"n={n} timing={t}" for n, t in missing)
                    out.append(Problem(
                        "missing", chapter.id, step["id"], step["file"],
                        f"missing measurement: {where} ({step['file']}) has no row for {pairs} "
                        f"in {file_name}; re-run make measure CHAPTERS={chapter.id}",
                    ))
            for kind, entries in (("ceiling", chapter.ceilings), ("baseline", chapter.baselines)):
                for entry in entries:
                    missing = [
                        (n, t["id"])
                        for n in chapter.expected_sizes(entry["id"])  # main, its own, the sweep's
                        for t in chapter.timings
                        if chapter.any_row(entry["id"], n, t["id"])[1] is None and n not in added_sizes
                    ]
                    if missing and entry["id"] not in chapter.unsupported and not chapter.pending:
                        pairs = ", ".join(f"n={n} timing={t}" for n, t in missing)
                        out.append(Problem(
                            "missing", chapter.id, entry["id"], "",
                            f"missing measurement: {chapter.id}/{entry['id']} ({kind}) has no row "
                            f"for {pairs} in {file_name}; re-run make measure CHAPTERS={chapter.id}",
                        ))
        return out


def _is_sha256(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


# ---------------------------------------------------------------------------
# Several GPUs: one dataset per measurement file
# ---------------------------------------------------------------------------

#: The reference GPU: the one whose recorded numbers the prose cites when no fresh measurement is
#: rendered, and whose recorded file must be current (conf value ``stepwise_reference_gpu``). The one
#: place that names it; every other recorded GPU is a second GPU.
REFERENCE_GPU = "nvidia-h200"


class Datasets:
    """Every GPU's dataset, the reference one first, then the others by GPU slug.

    The reference dataset is the one the prose cites (the roles, the step sections' code and API,
    the SGEMM chapter's bounds, roofline and autotuning): the fresh one if there is one, else the
    one of ``reference_gpu``, else the first by slug. Tables and plots are drawn once per dataset.

    Every other recorded dataset whose GPU is not ``reference_gpu`` is a *second GPU*
    (:attr:`Dataset.is_second_gpu`): where a step changed after it was recorded, its rows stay, shown as
    of their commit (:func:`.fmt.as_of_note`), and are no problem. The reference dataset, a fresh one
    and the recorded file of the reference GPU must be current.
    """

    def __init__(self, datasets: list[Dataset], reference_gpu: str = REFERENCE_GPU):
        if not datasets:
            raise DataError("no measurement files")
        fresh = [d for d in datasets if d.source == "fresh"]
        pool = sorted(fresh or datasets, key=lambda d: d.slug)
        reference = next((d for d in pool if d.slug == reference_gpu), pool[0])
        self.all: list[Dataset] = [reference] + sorted((d for d in datasets if d is not reference),
                                                       key=lambda d: d.slug)
        for dataset in self.all:
            dataset.is_reference = dataset is reference
            dataset.is_second_gpu = (dataset is not reference and dataset.source == "recorded"
                                     and dataset.slug != reference_gpu)

    @property
    def reference(self) -> Dataset:
        """The dataset the prose cites: the fresh one, else the reference GPU's, else the first by slug."""
        return self.all[0]

    def __iter__(self):
        return iter(self.all)

    def __len__(self) -> int:
        return len(self.all)

    def problems(self) -> list[Problem]:
        """Every dataset's problems, the reference one's first (a second GPU's stale rows are none, see
        :meth:`Dataset.problems`); a problem of the sources or the registry (the same for every dataset) once."""
        out: dict[str, Problem] = {}
        for dataset in self.all:
            for problem in dataset.problems():
                out.setdefault(problem.message, problem)
        return list(out.values())

    def paths(self) -> list[Path]:
        return [d.measurement_path for d in self.all if d.measurement_path is not None]


def load_datasets(registry_path: Path, measurements: Path, repo_root: Path, source: str = "recorded",
                  schema_path: Path = DEFAULT_SCHEMA, recorded: Path | None = None,
                  reference_gpu: str = REFERENCE_GPU) -> Datasets:
    """The datasets of a build: every file of ``measurements`` (a file or a directory; labelled
    ``source``), then every file of ``recorded`` (a directory of recorded files, labelled recorded)
    whose GPU the first ones do not cover. So a fresh measurement replaces the recorded one of its
    GPU and is shown beside the recorded ones of the other GPUs. ``reference_gpu``: see :class:`Datasets`."""
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
    return Datasets(datasets, reference_gpu)

