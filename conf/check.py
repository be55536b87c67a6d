#!/usr/bin/env python3
"""Everything CI checks (``make test``), continuing past failures, then a PASS/FAIL summary.

Stages:

0. the build, through ``make build BOOTSTRAP=no`` (snippets, each also compiled alone; tests; the
   timing program; the registry). If it fails, nothing else can run, and the summary says so;
1. GoogleTest through CTest (GPU tests skip with a reason where there is no GPU), its log in
   ``BUILD/test-reports/ctest.log``; the summary line quotes CTest's count and the skipped tests;
2. ``pytest tests/docs`` and ``pytest tests/browser``;
3. the strict docs build (``conf/build_docs.py --strict``) of what ``make docs`` would render
   without measuring: the build folder's fresh measurement if ``make measure`` left one, else the
   recorded ones. :func:`build_site` is the one way both this and ``make docs`` build the site;
4. the built site in headless Chromium (``tests/browser/check_site.py``), whose front page must show
   every GPU recorded in ``docs/measurements/``.

Each stage's header is ``==> NAME``; the summary ends with ``N passed, M failed``. Commands are
echoed with a leading ``+``.

Usage::

    check.py --build-dir build [--python .venv/bin/python] [--make make]

Exit status: 0 when every stage passed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import contextlib
import re
import subprocess
import sys
import time
from pathlib import Path

RECORDED = Path("docs/measurements")


def run(args: list, log: Path | None = None, **kwargs) -> int:
    """Echoes ``+ ARGS`` to stderr, as the Makefile's recipes do, and runs them (``kwargs`` go to
    subprocess.run); with ``log``, their output goes to the terminal and to ``log`` (as ``tee``). Their exit
    status."""
    args = [str(a) for a in args]
    print("+ " + " ".join(args), file=sys.stderr, flush=True)
    if log is None:
        return subprocess.run(args, **kwargs).returncode
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc, \
            log.open("w") as out:
        for line in proc.stdout:
            sys.stdout.write(line)
            out.write(line)
        sys.stdout.flush()
    return proc.returncode


def measurements_to_render(build_dir: Path) -> tuple[Path, str]:
    """The build folder's fresh measurements if ``make measure`` left any, else the recorded ones."""
    fresh = build_dir / "measurements"
    return (fresh, "fresh") if any(fresh.glob("*.json")) else (RECORDED, "recorded")


def build_site(python: str, build_dir: Path, measurements: Path, source: str, strict: bool) -> Path | None:
    """Builds the site with conf/build_docs.py (its output also in ``BUILD/docs-build.log``) and records its
    folder in ``BUILD/site-dir.txt`` for make serve and make check-site; the site's ``index.html``, or None
    when the build failed or named no file."""
    log = build_dir / "docs-build.log"
    status = run([python, "conf/build_docs.py", "--build-dir", build_dir, "--registry",
                  build_dir / "registry.json", "--measurements", measurements, "--source", source,
                  "--recorded", RECORDED] + (["--strict"] if strict else []), log)
    if status != 0:
        return None
    sites = re.findall(r"^Site: (.+)$", log.read_text(), flags=re.MULTILINE)
    if not sites or not Path(sites[-1]).is_file():
        print("build_docs.py did not print 'Site: <index.html>' naming a file", file=sys.stderr)
        return None
    site = Path(sites[-1])
    (build_dir / "site-dir.txt").write_text(f"{site.parent}\n")
    return site


class Summary:
    """The stages' verdicts, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def stage(self, name: str, passed: bool) -> bool:
        self.lines.append(f"{'PASS' if passed else 'FAIL'}  {name}")
        return passed

    def print(self) -> int:
        passed = sum(line.startswith("PASS") for line in self.lines)
        print()
        print("==================== make test: summary ====================")
        print("\n".join(self.lines))
        print(f"{passed} passed, {len(self.lines) - passed} failed")
        return 0 if passed == len(self.lines) else 1


def header(name: str) -> None:
    print(f"\n==> {name}", flush=True)


class Stages:
    """The stages of ``make measure`` and ``make docs``: each announced as it starts (``==> PROG: NAME``) and
    timed; :meth:`report` lists their wall times."""

    def __init__(self, prog: str, clock=time.monotonic) -> None:
        self.prog, self.clock = prog, clock
        self.times: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def stage(self, name: str):
        header(f"{self.prog}: {name}")
        start = self.clock()
        try:
            yield
        finally:
            seconds = self.clock() - start
            self.times.append((name, seconds))
            print(f"{self.prog}: {name}: {seconds:.0f} s", flush=True)

    def report(self) -> str:
        """``make measure: stage times: GPU tests 12 s, timing 40 s; 52 s in all``."""
        parts = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in self.times)
        return f"{self.prog}: stage times: {parts}; {sum(s for _n, s in self.times):.0f} s in all"


def ctest_verdict(log_text: str) -> str:
    """``100% tests passed, 0 tests failed out of 502 (406 skipped)``: CTest's count and the skipped tests."""
    counts = re.findall(r"^\d+% tests passed.*$", log_text, flags=re.MULTILINE)
    skipped = log_text.count("***Skipped")
    return (counts[-1] if counts else "no summary line") + (f" ({skipped} skipped)" if skipped else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="check.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--python", default=".venv/bin/python", help="the project virtualenv's python")
    parser.add_argument("--make", default="make", help="make, to build (make build BOOTSTRAP=no)")
    args = parser.parse_args(argv)
    build, python = args.build_dir, args.python
    summary = Summary()

    name = f"build (cmake --build {build}; every snippet compiled alone; registry)"
    header(name)
    if not summary.stage(name, run([args.make, "--no-print-directory", "build", "BOOTSTRAP=no"]) == 0):
        summary.stage("ctest, pytest, docs and browser check: not run, the build failed", False)
        return summary.print()

    reports = build / "test-reports"
    reports.mkdir(parents=True, exist_ok=True)
    header("ctest")
    log = reports / "ctest.log"
    passed = run(["ctest", "--test-dir", build, "--output-on-failure"], log) == 0
    summary.stage(f"ctest: {ctest_verdict(log.read_text(errors='replace'))}", passed)

    for suite in ("tests/docs", "tests/browser"):
        header(f"pytest {suite}")
        summary.stage(f"pytest {suite}", run([python, "-m", "pytest", "-q", suite]) == 0)

    measurements, source = measurements_to_render(build)
    name = f"strict docs build ({source} measurements)"
    header(name)
    site = build_site(python, build, measurements, source, strict=True)
    summary.stage(name, site is not None)

    if site is None:
        summary.stage("browser check: not run, no site was built", False)
    else:
        name = f"browser check of {site.parent}"
        header(name)
        gpus = max(1, len(list(RECORDED.glob("*.json"))))
        summary.stage(name, run([python, "tests/browser/check_site.py", "--site", site.parent,
                                 "--min-measurement-pages", "1", "--min-gpus", gpus]) == 0)
    return summary.print()


if __name__ == "__main__":
    sys.exit(main())
