#!/usr/bin/env python3
"""The README's table of chapters, from the step registry and the reference GPU's recorded file.

One row per chapter of the registry, in the guide's order: its page, its steps, what its final step
reaches on the reference GPU (its time against the library the front page sets beside it, ``level``
where a kept rerun of the same commit disagrees by more than 2 %, or the range of the two ratios
where both put the library ahead by more than that; else its share of the chapter's ceiling) and
the GPU its final step needs. The README holds the table between two marker lines; so
that no number of it is typed, ``--check`` fails where the README's table is not what this prints,
and ``--write`` puts it there.

Usage::

    readme_chapters.py --registry build/registry.json [--recorded docs/measurements] [--check|--write README.md]

Exit status: 0, or 1 where ``--check`` finds the table out of date (with the line to run), 2 for a usage
error or an input that cannot be read.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import conf  # noqa: F401  (conf/conf.py, beside this file, puts docs/_ext on the path)
from stepwise_docs import fmt, reruns
from stepwise_docs.data import Chapter, DataError, load_datasets

REPO = Path(__file__).resolve().parent.parent
BEGIN = "<!-- chapters table: written by conf/readme_chapters.py --write README.md; do not edit by hand -->"
END = "<!-- end of the chapters table -->"


def final_step_text(chapter: Chapter) -> str:
    """What the chapter's final step reaches on its dataset's GPU, in words: against its library where the front
    page sets one beside it, else as a share of its ceiling; ``not measured`` where its headline has no rows."""
    h = fmt.headline(chapter)
    if h is None or h.final is None:
        return "not measured"
    against = []
    for (bid, label, value), again in zip(h.vs(), reruns.compare(h, reruns.find_rerun(chapter.dataset, chapter))):
        if value is None:
            continue
        kind, text = reruns.ratio_text(value, again)
        against.append(f"level with {label}" if kind == "level" else f"{text} {label}'s speed")
    if against:
        return f"{', '.join(against)} at {h.problem}"
    if h.share is not None:
        ceiling = chapter.entry(chapter.share_of)["title"].split(" (", 1)[0]
        return f"{fmt.format_share(h.share)} of the ceiling ({ceiling}) at {h.problem}"
    return f"{fmt.format_speedup(h.speedup)} step {h.position(h.first_id)}'s speed at {h.problem}"


def needs_text(chapter: Chapter) -> str:
    """The most a step of the chapter needs (``sm_90a: steps 5-9``), or ``any`` (compute capability 7.5 up)."""
    needing: dict[str, list[int]] = {}
    for number, step in enumerate(chapter.steps, start=1):
        if step.get("needs"):
            needing.setdefault(step["needs"], []).append(number)
    if not needing:
        return "any"
    return "; ".join(f"{need}: steps {numbers[0]}-{numbers[-1]}" if len(numbers) > 1 else f"{need}: step {numbers[0]}"
                     for need, numbers in needing.items())


def table(registry: Path, recorded: Path) -> str:
    """The markdown table, between its two marker lines."""
    reference = load_datasets(registry, recorded, REPO, "recorded").reference
    lines = [BEGIN, "",
             f"| chapter | steps | final step on the {reference.gpu_name} (the reference GPU) | needs |",
             "| --- | --- | --- | --- |"]
    for chapter in reference.chapters.values():
        title = chapter.title.split(":", 1)[0]
        lines.append(f"| [{title}](docs/{chapter.id}.md) | {len(chapter.steps)} | {final_step_text(chapter)} "
                     f"| {needs_text(chapter)} |")
    return "\n".join(lines + ["", END])


def replaced(readme: str, new_table: str) -> str:
    """``readme`` with the text from BEGIN to END replaced by ``new_table``; a ValueError where a marker is missing."""
    if BEGIN not in readme or END not in readme:
        raise ValueError("the README has no chapters table between the marker lines (see conf/readme_chapters.py)")
    head, rest = readme.split(BEGIN, 1)
    return head + new_table + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="readme_chapters.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--registry", type=Path, required=True, help="the step registry (build/registry.json)")
    parser.add_argument("--recorded", type=Path, default=REPO / "docs" / "measurements",
                        help="the recorded measurement files (default docs/measurements)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", type=Path, metavar="README", help="fail where README's table is out of date")
    action.add_argument("--write", type=Path, metavar="README", help="put the table into README")
    args = parser.parse_args(argv)
    try:
        new_table = table(args.registry, args.recorded)
        if args.check is None and args.write is None:
            print(new_table)
            return 0
        path = args.check or args.write
        readme = path.read_text(encoding="utf-8")
        updated = replaced(readme, new_table)
    except (DataError, OSError, ValueError) as exc:
        print(f"readme_chapters.py: {exc}", file=sys.stderr)
        return 2
    if args.write is not None:
        path.write_text(updated, encoding="utf-8")
        return 0
    if updated != readme:
        print(f"readme_chapters.py: {path}'s chapters table is not the recorded one; run "
              f".venv/bin/python conf/readme_chapters.py --registry {args.registry} --write {path}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
