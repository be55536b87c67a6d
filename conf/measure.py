#!/usr/bin/env python3
"""Measure on this GPU (``make measure``): the GPU tests, the timing program, then compute-sanitizer.

In this order, continuing past a failed stage so that every failure shows:

1. ``stepwise_bench --probe``: without a usable GPU, stop at once with its one-line reason;
2. the GPU tests, writing ``REPORTS/gpu_tests.json`` (the site shows each step's pass count from it);
3. the timing program, ``stepwise_bench --gtest-report REPORTS/gpu_tests.json --out-dir OUT_DIR
   --commit COMMIT [--dirty]``, after removing OUT_DIR's earlier ``*.json`` (only this run's file
   stays): before the sanitizers, so that a slow racecheck cannot hold the numbers back. The commit
   is ``--commit`` (a tree copied from a clean checkout to a machine whose git does not know it), else
   git's HEAD, with ``--dirty`` where git sees changes to it, else ``unknown``;
4. where ``compute-sanitizer`` is found (PATH, then the CUDA toolkit's folders), memcheck over the
   GPU tests and racecheck over those of ``--racecheck-filter`` (a gtest filter), with
   STEPWISE_UNDER_SANITIZER=1 set (tests comparing register counts skip themselves under the
   instrumentation); logs in REPORTS.

Commands are echoed with a leading ``+``. Ends with the measurement file written, or, after it,
``make measure: FAILED: <stage>`` per failed stage, and exit status 1.

Usage::

    measure.py --build-dir build --out-dir build/measurements [--commit HASH]
               [--racecheck-filter=FILTER]

(with ``=``: a gtest filter may start with ``-``.)

Exit status: 0 when every stage passed, 1 when one failed, 2 for a usage error (a malformed
``--commit``, no GPU, a missing binary).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from check import run  # conf/check.py, beside this file: the one way the stages run a command

PROG = "make measure"
#: Where compute-sanitizer is looked for after PATH (STEPWISE_CUDA_HOME overrides the root, for the tests).
CUDA_HOME = Path(os.environ.get("STEPWISE_CUDA_HOME", "/usr/local/cuda"))


def probe(bench: Path) -> tuple[bool, str]:
    """Whether a CUDA GPU is usable, and the probe's last line (its reason where not)."""
    try:
        proc = subprocess.run([str(bench), "--probe"], capture_output=True, text=True)
    except OSError as exc:
        return False, f"cannot run {bench}: {exc.strerror}"
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    message = lines[-1] if lines else "stepwise_bench --probe printed nothing"
    message = message.removeprefix("stepwise_bench: ")
    match = re.fullmatch(r"no usable CUDA GPU \((.*)\)", message)
    return proc.returncode == 0, match.group(1) if match else message


def commit_of(given: str | None) -> tuple[str, bool]:
    """The commit to name in the measurement file, and whether the tree differs from it."""
    if given:
        if not re.fullmatch(r"[0-9a-f]{7,40}", given):
            raise ValueError(f"COMMIT must be a commit hash (7 to 40 hex digits), not '{given}'")
        return given, False
    head = subprocess.run(["git", "rev-parse", "--verify", "-q", "--short=12", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode != 0 or not head.stdout.strip():
        return "unknown", False
    status = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
    return head.stdout.strip(), bool(status.stdout.strip())


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
                     env=dict(os.environ, STEPWISE_UNDER_SANITIZER="1"))
    if status != 0:
        print("\n".join(log.read_text(errors="replace").splitlines()[-25:]))
        return False
    print(f"{tool}: clean")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="measure.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, required=True, help="the build folder (build)")
    parser.add_argument("--out-dir", type=Path, required=True, help="where the measurement file goes")
    parser.add_argument("--commit", default="", help="the commit to name (default: git's HEAD)")
    parser.add_argument("--racecheck-filter", default="", help="gtest filter for the racecheck run")
    args = parser.parse_args(argv)

    try:
        commit, dirty = commit_of(args.commit)
    except ValueError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    bench = args.build_dir / "bench" / "stepwise_bench"
    gpu_tests = args.build_dir / "tests" / "stepwise_gpu_tests"
    reports = args.build_dir / "test-reports"
    for binary in (bench, gpu_tests):
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            print(f"{PROG}: the build did not produce {binary}", file=sys.stderr)
            return 2
    usable, message = probe(bench)
    if not usable:
        print(f"{PROG}: no usable CUDA GPU ({message})", file=sys.stderr)
        return 2
    print(f"GPU: {message}")
    reports.mkdir(parents=True, exist_ok=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []

    # 1. Correctness on this GPU; the JSON report feeds the per-step test counts.
    report = reports / "gpu_tests.json"
    report.unlink(missing_ok=True)
    if run([gpu_tests, f"--gtest_output=json:{report}"]) != 0:
        failed.append("GPU tests")
    # 2. Timing; only this run's file stays in the output folder.
    for old in args.out_dir.glob("*.json"):
        old.unlink()
    if run([bench, "--gtest-report", report, "--out-dir", args.out_dir, "--commit", commit]
           + (["--dirty"] if dirty else [])) != 0:
        failed.append("timing program")
    # 3. compute-sanitizer over the same binary.
    sanitizer = find_sanitizer()
    if sanitizer is None:
        print(f"compute-sanitizer not found (PATH, {CUDA_HOME}): memcheck and racecheck NOT run")
    else:
        for tool, extra in (("memcheck", []), ("racecheck", [f"--gtest_filter={args.racecheck_filter}"]
                                                             if args.racecheck_filter else [])):
            log = reports / f"{tool}.log"
            if not sanitize(sanitizer, tool, gpu_tests, log, extra):
                failed.append(f"{tool} ({log})")

    print()
    written = sorted(args.out_dir.glob("*.json"))
    for path in written:
        print(f"Measurement: {path}")
        print("  (copy it to docs/measurements/ and commit it to record these numbers for readers without a GPU)")
    if not written:
        failed.append(f"no measurement file in {args.out_dir}")
    for stage in failed:
        print(f"{PROG}: FAILED: {stage}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
