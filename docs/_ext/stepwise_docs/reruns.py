"""Reruns of a recorded chapter, and whether its front page's ratio comes out the same in them (no Sphinx here).

A rerun is the timing program's file of a second run of the commit a chapter was recorded from, kept gzipped under
``logs/`` beside the recorded measurement files: ``<gpu-slug>-<chapter>-rerun-<commit>.json.gz`` (a run of that
chapter) or ``<gpu-slug>-rerun-<commit>.json.gz`` (a run of the whole file, or of several chapters), ``<commit>`` a
prefix of the chapter's ``run.commit``. It counts for a chapter where the file is of the same GPU (``gpu.slug``), its
chapter was measured from the same commit and its final step's rows from the same source (``source_sha256``) as the
recording's. Measurements differ from run to run (a library may pick another engine, the clocks vary), so the front
page (:class:`.overview.SummaryDirective`) reports a headline ratio, a library's median time over the final step's,
from both: where they lie more than :data:`AGREE_WITHIN` apart it says "level" instead of a ratio that names a winner,
unless both leave the final step behind by more than AGREE_WITHIN: then it gives the range of the two.
:func:`find_rerun` and :func:`compare` serve any page's prose or table as well.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from pathlib import Path

from . import fmt
from .data import Chapter, Dataset
from .inputs import DEFAULT_SCHEMA, load_measurements

#: The folder beside the recorded measurement files that keeps the reruns (and the sanitizers' and profiler's logs).
RERUN_DIR = "logs"
#: How far apart the recording's and the rerun's ratio may lie and still agree: ``|r_record / r_rerun - 1|``.
AGREE_WITHIN = 0.02
#: The fewest digits of a commit that name it, in a rerun's file name.
MIN_COMMIT_DIGITS = 7
RERUN_SUFFIX = ".json.gz"

#: The reruns read for each dataset: path -> the rerun's own dataset (the same registry and sources).
_read: "weakref.WeakKeyDictionary[Dataset, dict[Path, Dataset]]" = weakref.WeakKeyDictionary()


def same_commit(a: str, b: str) -> bool:
    """Whether two spellings of a commit (a full hash, or a prefix of at least seven digits) name the same one."""
    shorter = min(len(a), len(b))
    return shorter >= MIN_COMMIT_DIGITS and a[:shorter] == b[:shorter]


def final_step(chapter: Chapter) -> str:
    """The step a rerun must have measured from the recording's source: the chapter's final one on its GPU
    (:meth:`.data.Chapter.final_step_id`)."""
    return chapter.final_step_id()


def _sources(chapter: Chapter, step_id: str) -> set[str]:
    return {row["source_sha256"] for row in (chapter.measured or {}).get("steps", [])
            if chapter.step_id_of(row) == step_id}


def rerun_files(dataset: Dataset, chapter: Chapter) -> list[Path]:
    """The files under ``logs/`` beside the dataset's measurement file whose names say they are a rerun of the commit
    the chapter was measured from, on the dataset's GPU: the chapter's own first, then those of whole runs, by name."""
    commit = chapter.run.get("commit", "")
    if dataset.measurement_path is None or not dataset.slug or not commit:
        return []
    folder = Path(dataset.measurement_path).parent / RERUN_DIR
    if not folder.is_dir():
        return []
    out: list[Path] = []
    for prefix in (f"{dataset.slug}-{chapter.id}-rerun-", f"{dataset.slug}-rerun-"):
        for path in sorted(folder.glob(f"{prefix}*{RERUN_SUFFIX}")):
            if path.is_file() and same_commit(path.name[len(prefix):-len(RERUN_SUFFIX)], commit):
                out.append(path)
    return out


def _rerun_dataset(dataset: Dataset, path: Path, schema_path: Path) -> Dataset:
    """The rerun's file as a dataset of the same registry and sources (read once per dataset); a file that cannot be
    read or is not a measurement file is a DataError."""
    read = _read.setdefault(dataset, {})
    if path not in read:
        read[path] = Dataset(dataset.registry, load_measurements(path, schema_path), dataset.repo_root, path)
    return read[path]


def find_rerun(dataset: Dataset, chapter: Chapter, schema_path: Path = DEFAULT_SCHEMA) -> Chapter | None:
    """The chapter in a rerun of the commit it was recorded from (see the module's text), or None where none is kept.

    Of several, the first of :func:`rerun_files` that counts. A file named as such a rerun that cannot be read, or is
    not a measurement file of schema 2, is a DataError; one of another GPU, or whose chapter is of another commit or
    whose final step is of another source, does not count.
    """
    if chapter.measured is None or not chapter.steps:
        return None
    final = final_step(chapter)
    recorded = _sources(chapter, final)
    if not recorded:
        return None
    for path in rerun_files(dataset, chapter):
        other = _rerun_dataset(dataset, path, schema_path)
        candidate = other.chapters.get(chapter.id)
        if (other.slug != dataset.slug or candidate is None or candidate.measured is None
                or not same_commit(candidate.run.get("commit", ""), chapter.run["commit"])):
            continue
        if _sources(candidate, final) == recorded:
            return candidate
    return None


@dataclass
class Rerun:
    """One headline ratio, a library's median time over the final step's (above 1: the final step is faster), in the
    recording and in a rerun of its commit."""

    headline: fmt.Headline  # the recording's
    rerun: Chapter
    baseline: str
    label: str
    recorded: float
    again: float  # the rerun's ratio

    @property
    def path(self) -> Path:
        return Path(self.rerun.dataset.measurement_path)

    @property
    def apart(self) -> float:
        """``|r_record / r_rerun - 1|``."""
        return abs(self.recorded / self.again - 1)

    @property
    def disagree(self) -> bool:
        """The two runs put the ratio more than AGREE_WITHIN apart: the range they span is shown, not one ratio."""
        return self.apart > AGREE_WITHIN

    @property
    def level(self) -> bool:
        """The two runs disagree, and their range reaches within AGREE_WITHIN of 1 or past it: they do not agree that
        the final step is behind, and to name it ahead they would have to agree. Two runs that disagree but both leave
        it behind by more than AGREE_WITHIN say so: the range of their ratios is shown (range_text())."""
        return self.disagree and max(self.recorded, self.again) >= 1 / (1 + AGREE_WITHIN)

    def range_text(self) -> str:
        """The two runs' ratios as a range, ``0.367–0.381×``."""
        low, high = sorted((self.recorded, self.again))
        return f"{fmt.sig(low)}\u2013{fmt.format_speedup(high)}"

    def _rows(self) -> list[tuple[str, dict, dict]]:
        """(id, recorded row, rerun row) of the library, then of the final step."""
        h = self.headline
        return [(self.baseline, h.chapter.baseline_row(self.baseline, h.n, h.timing),
                 self.rerun.baseline_row(self.baseline, h.n, h.timing)),
                (h.final_id, h.final, self.rerun.step_row(h.final_id, h.n, h.timing))]

    def differences(self) -> list[str]:
        """What the two runs' rows show, recording / rerun: the library's and the final step's median SM clock, the
        library's configuration (its engine or algorithm) where it has one and its library where that differs, and
        each row's spread (slowest sample over fastest)."""
        def clock(row: dict) -> str:
            reading = row.get("sm_clock_mhz")
            return f"{reading['median']:,.0f} MHz" if reading else "not read"

        (bid, b1, b2), (fid, f1, f2) = self._rows()
        out = [f"{bid}\u2019s median SM clock {clock(b1)} / {clock(b2)}",
               f"{fid}\u2019s median SM clock {clock(f1)} / {clock(f2)}"]
        for key, what in (("config", "configuration"), ("engine", "engine")):
            if key in b1 or key in b2:
                out.append(f"{bid}\u2019s {what} \u201c{b1.get(key, 'none')}\u201d / \u201c{b2.get(key, 'none')}\u201d")
        if b1.get("library") != b2.get("library"):
            out.append(f"{bid}\u2019s library {b1.get('library', 'not named')} / {b2.get('library', 'not named')}")
        out += [f"{rid}\u2019s spread (slowest sample over fastest) {fmt.sig(r1['max_ms'] / r1['min_ms'])} / "
                f"{fmt.sig(r2['max_ms'] / r2['min_ms'])}" for rid, r1, r2 in ((bid, b1, b2), (fid, f1, f2))]
        return out

    def explanation(self) -> str:
        """The tooltip: both ratios, and where they lie apart, what differed between the runs."""
        h = self.headline
        commit = fmt.short_commit(self.rerun.run.get("commit", "unknown"))
        both = (f"{self.baseline}\u2019s median time over {h.final_id}\u2019s is {fmt.sig(self.recorded, 4)}\u00d7 in "
                f"the recording and {fmt.sig(self.again, 4)}\u00d7 in a rerun of the same commit {commit} "
                f"({self.path.name}), {fmt.sig(100 * self.apart, 2)} % apart")
        if not self.disagree:
            return f"{both}: within {fmt.sig(100 * AGREE_WITHIN, 2)} %, the recording\u2019s ratio is shown"
        if self.level:
            return (f"level: {both}, more than the {fmt.sig(100 * AGREE_WITHIN, 2)} % within which two runs of one "
                    "commit must agree to say which is faster than the other. The rows of the two runs, recording / "
                    "rerun: " + "; ".join(self.differences()))
        return (f"{both}, more than the {fmt.sig(100 * AGREE_WITHIN, 2)} % within which two runs of one commit must "
                "agree to give one ratio: the range is shown (both leave the final step behind). The rows of the two "
                "runs, recording / rerun: " + "; ".join(self.differences()))


def ratio_text(value: float, again: Rerun | None) -> tuple[str, str]:
    """How the final step's ratio ``value`` to a library reads, given the rerun of its recorded commit (None: none
    kept): ``("level", "level")`` where the two runs do not agree which is faster (:attr:`Rerun.level`),
    ``("range", "0.362–0.381×")`` where they disagree but both leave it behind, else
    ``("ratio", "1.02×")``. The front page's cells, its summary sentence and the README say it alike."""
    if again is not None and again.level:
        return "level", "level"
    if again is not None and again.disagree:
        return "range", again.range_text()
    return "ratio", fmt.format_speedup(value)


def compare(h: fmt.Headline, rerun: Chapter | None) -> list[Rerun | None]:
    """Per baseline of the headline (in its order), its ratio in the recording and in the rerun; None where there is no
    rerun, or either run lacks the library's or the final step's row."""
    out: list[Rerun | None] = []
    for bid, label, recorded in h.vs():
        again = None if rerun is None else fmt.ratio(rerun.baseline_row(bid, h.n, h.timing),
                                                     rerun.step_row(h.final_id, h.n, h.timing))
        out.append(None if recorded is None or again is None else Rerun(h, rerun, bid, label, recorded, again))
    return out
