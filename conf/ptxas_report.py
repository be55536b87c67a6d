#!/usr/bin/env python3
"""Keep the compiler's resource report of one CUDA translation unit.

CMake runs this as the timing program's CUDA compiler launcher (see
bench/CMakeLists.txt): it runs the compile command it is given (which carries
``--resource-usage``), copies the ``ptxas info`` lines of that report (and the
stack-frame lines that belong to them) into ``OUT_DIR/<source file name>.txt``,
passes every other line of the compiler's stderr through, and exits with the
compiler's status. The timing program reads those files (``stepwise_bench
--list --json --ptxas-report FILE ...``) to give every step's kernels their
registers, shared and local memory and occupancy without a GPU.

Usage::

    ptxas_report.py --out-dir DIR -- COMPILER ARGS...

stdlib only: it runs at build time with any Python 3.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

USAGE = "usage: ptxas_report.py --out-dir DIR -- COMPILER ARGS..."


def split_report(stderr: str) -> tuple[str, str]:
    """(the report's lines, everything else): ``ptxas info`` lines and the indented lines that follow them."""
    report, rest = [], []
    in_report = False
    for line in stderr.splitlines(keepends=True):
        if line.startswith("ptxas info"):
            report.append(line)
            in_report = True
        elif in_report and line.startswith((" ", "\t")) and line.strip():
            report.append(line)
        else:
            in_report = False
            rest.append(line)
    return "".join(report), "".join(rest)


def source_of(command: list[str]) -> str | None:
    """The file compiled: the argument after ``-c``, else the last ``.cu`` argument."""
    for i, arg in enumerate(command[:-1]):
        if arg == "-c":
            return command[i + 1]
    sources = [a for a in command if a.endswith(".cu")]
    return sources[-1] if sources else None


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--out-dir" or argv[2] != "--":
        print(f"ptxas_report.py: {USAGE}", file=sys.stderr)
        return 2
    out_dir, command = Path(argv[1]), argv[3:]
    source = source_of(command)
    if source is None:
        print(f"ptxas_report.py: no source file in the command {' '.join(command)}", file=sys.stderr)
        return 2
    out = out_dir / (Path(source).name + ".txt")
    proc = subprocess.run(command, stdout=None, stderr=subprocess.PIPE, text=True)
    report, rest = split_report(proc.stderr)
    sys.stderr.write(rest)
    if proc.returncode != 0:
        out.unlink(missing_ok=True)  # no report of a failed compile may stay behind
        return proc.returncode
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + f".{os.getpid()}.partial")
    partial.write_text(report)
    partial.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
