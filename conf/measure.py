#!/usr/bin/env python3
"""Measure on this GPU (``make measure``): the GPU tests, the timing program, then compute-sanitizer.

In this order, continuing past a failed stage so that every failure shows, each stage announced
(``==> make measure: NAME``) and timed:

1. ``stepwise_bench --probe --json``: without a usable GPU, stop at once with its one-line reason;
2. the GPU tests, writing ``REPORTS/gpu_tests.json`` (the site shows each step's pass count from it);
3. the timing program, ``stepwise_bench --gtest-report REPORTS/gpu_tests.json --out FILE --commit COMMIT
   [--dirty]``: before the sanitizers, so that a slow racecheck cannot hold the numbers back. The commit
   is ``--commit`` (a tree copied from a clean checkout to a machine whose git does not know it), else
   git's HEAD, with ``--dirty`` where git sees changes to it, else ``unknown``;
4. where the run measures a chapter whose registry entry has PyTorch rows (``pytorch``),
   ``conf/pytorch_baselines.py`` with ``python3`` on PATH: PyTorch's own rows of every such chapter, into
   ``pytorch/<gpu-slug>.json`` beside the measurement file; where that Python has no PyTorch (exit status 3)
   they are left out with its line;
5. where ``compute-sanitizer`` is found (PATH, then the CUDA toolkit's folders), memcheck over the
   GPU tests and racecheck over them less the patterns of the chapters' ``racecheck_exclude`` in the
   step registry (``--racecheck-filter``, a gtest filter, replaces them), with STEPWISE_UNDER_SANITIZER
   set to the tool's name (tests of timings, register counts and the largest problems skip themselves
   under the instrumentation); logs in REPORTS.

``--chapters "transpose sgemm"`` runs only those chapters' GPU tests (the suites starting with each
chapter's ``gtest_prefix`` in the step registry), timing rows and sanitizer runs, and merges the result
into this GPU's measurement file (``stepwise_bench --merge-from``): the other chapters are kept as they
were, each with its own run. That file is FILE itself where it exists (an earlier ``make measure``), else
the recorded one, ``RECORDED/<gpu-slug>.json``. An unknown chapter is a one-line error that lists the
chapters. Without ``--chapters`` every chapter is measured and nothing is merged.

cuDNN (the row-wise chapters' baseline) is opened by the timing program at run time: from
STEPWISE_CUDNN_LIBRARY where set, else from the loader's path and the CUDA toolkit. Where neither has
it, this script looks for the ``nvidia-cudnn-cu13`` wheel's ``libcudnn.so.9`` in the site-packages
of ``python3`` on PATH (where PyTorch brings it) and sets STEPWISE_CUDNN_LIBRARY for the timing
program; the line ``cuDNN: ...`` says which.

``--record`` writes into the recorded file, ``RECORDED/<gpu-slug>.json``, instead of OUT_DIR (merging
into it where ``--chapters`` is given), and copies the sanitizer logs beside it, to
``RECORDED/logs/<gpu-slug>-<tool>[-<chapter>...].log``.

Only this run's file stays in OUT_DIR. Commands are echoed with a leading ``+``. Ends with the stages'
times and the measurement file written, or, after it, ``make measure: FAILED: <stage>`` per failed stage,
and exit status 1.

Usage::

    measure.py --build-dir build --out-dir build/measurements [--commit HASH]
               [--racecheck-filter=-FILTER] [--chapters "ID ..."] [--record] [--recorded docs/measurements]

(with ``=``: a gtest filter may start with ``-``.)

Exit status: 0 when every stage passed, 1 when one failed, 2 for a usage error (a malformed
``--commit``, an unknown chapter, no GPU, a missing binary).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from check import RECORDED, Stages, run  # conf/check.py, beside this file: how the stages run and are timed

PROG = "make measure"
#: Where compute-sanitizer is looked for after PATH (STEPWISE_CUDA_HOME overrides the root, for the tests).
CUDA_HOME = Path(os.environ.get("STEPWISE_CUDA_HOME", "/usr/local/cuda"))


class UsageError(Exception):
    """A command line or a build this script cannot run with; one line."""


@dataclass
class Probe:
    """What ``stepwise_bench --probe --json`` said: whether a GPU is usable, the reason where not, its slug."""

    usable: bool
    message: str
    slug: str = ""


def probe(bench: Path) -> Probe:
    """Whether a CUDA GPU is usable: the GPU's description, or the probe's one-line reason where not."""
    try:
        proc = subprocess.run([str(bench), "--probe", "--json"], capture_output=True, text=True)
    except OSError as exc:
        return Probe(False, f"cannot run {bench}: {exc.strerror}")
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        return Probe(False, f"{bench} --probe --json answered no JSON object"
                            + (f": {lines[-1][:200]}" if lines else ""))
    if proc.returncode != 0 or not answer.get("usable"):
        return Probe(False, answer.get("reason", "stepwise_bench --probe failed"))
    return Probe(True, f"{answer['name']} (compute capability {answer['compute_capability']}, "
                       f"{answer['sm_count']} SMs)", answer["slug"])


def commit_of(given: str | None) -> tuple[str, bool]:
    """The commit to name in the measurement file, and whether the tree differs from it."""
    if given:
        if not re.fullmatch(r"[0-9a-f]{7,40}", given):
            raise UsageError(f"COMMIT must be a commit hash (7 to 40 hex digits), not '{given}'")
        return given, False
    head = subprocess.run(["git", "rev-parse", "--verify", "-q", "--short=12", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode != 0 or not head.stdout.strip():
        return "unknown", False
    status = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
    return head.stdout.strip(), bool(status.stdout.strip())


def registry_chapters(registry: Path) -> list[dict]:
    """The step registry's chapters, in the guide's order."""
    try:
        chapters = json.loads(registry.read_text(encoding="utf-8"))["chapters"]
        missing = next((key for c in chapters for key in ("id", "gtest_prefix") if key not in c), None)
        if missing:
            raise KeyError(missing)
        return chapters
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read the chapters from the step registry {registry}: {exc}") from None


def chapter_prefixes(chapters: list[dict], wanted: list[str]) -> dict[str, str]:
    """The gtest prefix of each chapter of ``wanted``, in the guide's order (the step registry's)."""
    prefixes = {c["id"]: c["gtest_prefix"] for c in chapters}
    unknown = [c for c in wanted if c not in prefixes]
    if unknown:
        raise UsageError(f"unknown chapter '{unknown[0]}' (the chapters: {', '.join(prefixes)})")
    return {c: prefixes[c] for c in prefixes if c in wanted}


def racecheck_exclusions(chapters: list[dict]) -> str:
    """The gtest filter that leaves out what the chapters' ``racecheck_exclude`` names (``-A:B``; empty: none)."""
    patterns = [e["tests"] for c in chapters for e in c.get("racecheck_exclude") or []]
    return "-" + ":".join(patterns) if patterns else ""


def chapter_filter(prefixes: dict[str, str], racecheck_filter: str = "") -> str:
    """A gtest filter of the chapters' suites, less the negative patterns of ``racecheck_filter``."""
    negative = racecheck_filter.removeprefix("-") if racecheck_filter.startswith("-") else ""
    if racecheck_filter and not negative:
        raise UsageError("with CHAPTERS, RACECHECK_FILTER must be only patterns to leave out (-A:B), "
                         f"not '{racecheck_filter}'")
    positive = ":".join(f"{prefix}*" for prefix in prefixes.values())
    return positive + (f"-{negative}" if negative else "")


def find_sanitizer() -> str | None:
    return shutil.which("compute-sanitizer") or next(
        (str(p) for p in (CUDA_HOME / "bin" / "compute-sanitizer",
                          CUDA_HOME / "compute-sanitizer" / "compute-sanitizer")
         if p.is_file() and os.access(p, os.X_OK)), None)


def sanitize(sanitizer: str, tool: str, gpu_tests: Path, log: Path, extra: list[str]) -> bool:
    """One compute-sanitizer run over the GPU tests into ``log``; its last lines on failure."""
    with log.open("w") as out:
        status = run([sanitizer, "--tool", tool, "--error-exitcode", "1", gpu_tests, *extra],
                     stdout=out, stderr=subprocess.STDOUT,
                     env=dict(os.environ, STEPWISE_UNDER_SANITIZER=tool))
    if status != 0:
        print("\n".join(log.read_text(errors="replace").splitlines()[-25:]))
        return False
    print(f"{tool}: clean")
    return True


PYTORCH_FOLDER = "pytorch"  # beside the measurement file: <folder>/pytorch/<gpu-slug>.json


def pytorch_wanted(chapters: list[dict], measured: dict | None) -> bool:
    """Whether this run takes PyTorch's rows: it measures a chapter whose registry entry has some
    (``measured``: the chapters of ``--chapters``, None: every chapter). Every such chapter's rows are
    taken together: the PyTorch file is one run's."""
    return any(c.get("pytorch") and (measured is None or c["id"] in measured) for c in chapters)


def cudnn_library(cuda_home: Path = CUDA_HOME, python: str | None = None) -> tuple[Path | None, str]:
    """Where the timing program should open cuDNN: (a path to pass as STEPWISE_CUDNN_LIBRARY or None,
    one line saying where cuDNN comes from). STEPWISE_CUDNN_LIBRARY wins; then the CUDA toolkit's
    ``lib``/``lib64``; then the wheel in ``python``'s (default ``python3`` on PATH) site-packages."""
    if os.environ.get("STEPWISE_CUDNN_LIBRARY"):
        return None, f"STEPWISE_CUDNN_LIBRARY={os.environ['STEPWISE_CUDNN_LIBRARY']}"
    for folder in ("lib64", "lib"):
        if (cuda_home / folder / "libcudnn.so.9").is_file():
            return None, str(cuda_home / folder / "libcudnn.so.9")
    python = python or shutil.which("python3")
    if python:
        try:
            proc = subprocess.run([python, "-c", "import site, sys; print('\\n'.join(site.getsitepackages() + sys.path))"],
                                  capture_output=True, text=True)
        except OSError:
            proc = None
        for folder in proc.stdout.splitlines() if proc is not None and proc.returncode == 0 else []:
            candidate = Path(folder) / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
            if folder and candidate.is_file():
                return candidate, f"{candidate} (the nvidia-cudnn-cu13 wheel of {python})"
    return None, "not beside the CUDA toolkit nor in python3's site-packages: the loader's path only"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="measure.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, required=True, help="the build folder (build)")
    parser.add_argument("--out-dir", type=Path, required=True, help="where the measurement file goes")
    parser.add_argument("--commit", default="", help="the commit to name (default: git's HEAD)")
    parser.add_argument("--racecheck-filter", default="",
                        help="gtest filter for the racecheck run (default: less the registry's racecheck_exclude)")
    parser.add_argument("--chapters", default="", help="only these chapters (space or comma separated)")
    parser.add_argument("--record", action="store_true", help="write into the recorded file of this GPU")
    parser.add_argument("--recorded", type=Path, default=RECORDED, help="the recorded files' folder")
    args = parser.parse_args(argv)

    bench = args.build_dir / "bench" / "stepwise_bench"
    gpu_tests = args.build_dir / "tests" / "stepwise_gpu_tests"
    reports = args.build_dir / "test-reports"
    wanted = [c for c in re.split(r"[\s,]+", args.chapters) if c]
    try:
        commit, dirty = commit_of(args.commit)
        for binary in (bench, gpu_tests):
            if not (binary.is_file() and os.access(binary, os.X_OK)):
                raise UsageError(f"the build did not produce {binary}")
        chapters = registry_chapters(args.build_dir / "registry.json")
        prefixes = chapter_prefixes(chapters, wanted) if wanted else {}
        racecheck_filter = args.racecheck_filter or racecheck_exclusions(chapters)
        tests_filter = chapter_filter(prefixes) if wanted else ""
        race_filter = chapter_filter(prefixes, racecheck_filter) if wanted else racecheck_filter
        gpu = probe(bench)
        if not gpu.usable:
            raise UsageError(f"no usable CUDA GPU ({gpu.message})")
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    print(f"GPU: {gpu.message}")
    print(f"Chapters: {', '.join(prefixes) if wanted else 'all'}")
    out_dir = args.recorded if args.record else args.out_dir
    out = out_dir / f"{gpu.slug}.json"
    base = next((p for p in (out, args.recorded / f"{gpu.slug}.json") if p.is_file()), None) if wanted else None
    reports.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    stages = Stages(PROG)
    failed: list[str] = []

    # 1. Correctness on this GPU; the JSON report feeds the per-step test counts.
    report = reports / "gpu_tests.json"
    report.unlink(missing_ok=True)
    with stages.stage("GPU tests"):
        if run([gpu_tests, f"--gtest_output=json:{report}"]
               + ([f"--gtest_filter={tests_filter}"] if tests_filter else [])) != 0:
            failed.append("GPU tests")
    # 2. Timing, merged into the base file where some chapters are measured.
    written_before = out.stat().st_mtime_ns if out.is_file() else None
    if base:
        print(f"Merging into {base}: {', '.join(prefixes)} measured now, every other chapter kept as it is")
    cudnn, where = cudnn_library()
    print(f"cuDNN: {where}")
    if cudnn is not None:
        os.environ["STEPWISE_CUDNN_LIBRARY"] = str(cudnn)
    with stages.stage("timing"):
        status = run([bench, "--gtest-report", report, "--out", out, "--commit", commit]
                     + (["--dirty"] if dirty else [])
                     + [arg for c in prefixes for arg in ("--chapter", c)]
                     + (["--merge-from", base] if base else []))
        if status != 0:
            failed.append("timing program")
    if not args.record:  # only this run's file stays in the output folder
        for old in args.out_dir.glob("*.json"):
            if old.resolve() != out.resolve():
                old.unlink()
    # 3. PyTorch's own rows of the chapters that have them, by python3 where it has PyTorch.
    if pytorch_wanted(chapters, prefixes if wanted else None):
        pytorch_out = out_dir / PYTORCH_FOLDER / f"{gpu.slug}.json"
        python = shutil.which("python3")
        with stages.stage("PyTorch baselines"):
            status = 3 if python is None else run(
                [python, Path(__file__).resolve().parent / "pytorch_baselines.py", "--registry",
                 args.build_dir / "registry.json", "--gpu-slug", gpu.slug, "--commit", commit, "--out", pytorch_out])
            if status == 3:
                print("PyTorch baselines: not measured" + (" (no python3 on PATH)" if python is None else ""))
            elif status != 0:
                failed.append("PyTorch baselines")
    # 4. compute-sanitizer over the same binary.
    sanitizer = find_sanitizer()
    logs: list[Path] = []
    if sanitizer is None:
        print(f"compute-sanitizer not found (PATH, {CUDA_HOME}): memcheck and racecheck NOT run")
    else:
        for tool, gtest_filter in (("memcheck", tests_filter), ("racecheck", race_filter)):
            log = reports / f"{tool}.log"
            with stages.stage(tool):
                if not sanitize(sanitizer, tool, gpu_tests, log,
                                [f"--gtest_filter={gtest_filter}"] if gtest_filter else []):
                    failed.append(f"{tool} ({log})")
            logs.append(log)
    if args.record:
        (args.recorded / "logs").mkdir(parents=True, exist_ok=True)
        for log in logs:
            kept = args.recorded / "logs" / ("-".join([gpu.slug, log.stem, *prefixes]) + ".log")
            shutil.copyfile(log, kept)
            print(f"Log: {kept}")

    print()
    print(stages.report())
    if out.is_file() and out.stat().st_mtime_ns != written_before:
        print(f"Measurement: {out}")
        if not args.record:
            print("  (record it with make measure RECORD=yes, or copy it to docs/measurements/ and commit it)")
    else:
        failed.append(f"no measurement file written ({out})")
    for stage in failed:
        print(f"{PROG}: FAILED: {stage}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
