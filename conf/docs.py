#!/usr/bin/env python3
"""Render the site (``make docs``): from this GPU's fresh numbers where one is usable, else the recorded ones.

``--measure auto`` (the default) runs ``make measure`` when ``stepwise_bench --probe`` finds a usable GPU
and renders its numbers; without one it says why and renders ``docs/measurements/``. ``--measure yes``
fails without a GPU; ``--measure no`` renders the recorded numbers without probing. The site is built
as ``make test``'s strict stage builds it (:func:`check.build_site`, not strict here), and the last lines
say which numbers it shows and where it is::

    Docs built from fresh measurements.
    Site: /path/to/build/docs/html/index.html   (open it in a browser, or: make serve)

Usage::

    docs.py --build-dir build [--measure auto|yes|no] [--chapters "ID ..."] [--python .venv/bin/python]
            [--make make]

``--chapters`` measures only those chapters (``make measure CHAPTERS=...``, which merges them into this
GPU's file, keeping the others); without a GPU it is not used, and the site shows the recorded numbers.
The stages (measure, render) are announced and timed as ``make measure``'s are.

Exit status: 0 when the site was built; 1 when measuring or the build failed, or ``--measure yes`` found
no GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from check import RECORDED, Stages, build_site, run
from measure import probe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="docs.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--measure", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--python", default=".venv/bin/python", help="the project virtualenv's python")
    parser.add_argument("--make", default="make", help="make, to measure (make measure BOOTSTRAP=no)")
    parser.add_argument("--chapters", default="", help="measure only these chapters (space separated)")
    args = parser.parse_args(argv)
    chapters = " ".join(args.chapters.split())

    stages = Stages("make docs")
    source = "recorded"
    if args.measure != "no":
        gpu = probe(args.build_dir / "bench" / "stepwise_bench")
        if gpu.usable:
            with stages.stage("measure" + (f" ({chapters})" if chapters else "")):
                status = run([args.make, "--no-print-directory", "measure", "BOOTSTRAP=no", f"CHAPTERS={chapters}"])
            if status != 0:
                return 1
            source = "fresh"
        elif args.measure == "yes":
            print(f"make docs MEASURE=yes: no usable CUDA GPU ({gpu.message})", file=sys.stderr)
            return 1
        else:
            ignored = f" (CHAPTERS={chapters} is for measuring: not used)" if chapters else ""
            print(f"No usable CUDA GPU ({gpu.message}): rendering the recorded measurements in {RECORDED}/"
                  f"{ignored}.")
    measurements = args.build_dir / "measurements" if source == "fresh" else RECORDED
    with stages.stage("render"):
        site = build_site(args.python, args.build_dir, measurements, source, strict=False)
    if site is None:
        print("make docs: the site was not built (build_docs.py's messages are above)", file=sys.stderr)
        return 1
    print()
    print(stages.report())
    print(f"Docs built from {source} measurements.")
    print(f"Site: {site}   (open it in a browser, or: make serve)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
