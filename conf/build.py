#!/usr/bin/env python3
"""Configure and build (``make configure``, ``make build``): CMake and Ninja into the build folder.

``--configure`` runs CMake's configure step only. Without it: configure where the build folder has no
``build.ninja`` yet or ``--cuda-arch`` is given (passed as ``-DCMAKE_CUDA_ARCHITECTURES``), then
``cmake --build``, which compiles everything and writes the step registry (``registry.json``, with every
kernel's compiled resources: bench/CMakeLists.txt); checks that the timing program and the registry are
there, and ends with ``Registry: BUILD/registry.json`` and the build's time. Commands are echoed with a
leading ``+``; run from the repository root.

Usage::

    build.py --build-dir build [--cuda-arch ARCH] [--configure]

Exit status: 0 when built (or configured), 1 when CMake failed or a product is missing.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from check import header, run  # conf/check.py, beside this file: how the stages run

PROG = "make build"


def configure_command(build_dir: Path, cuda_arch: str) -> list:
    return (["cmake", "-S", ".", "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"]
            + ([f"-DCMAKE_CUDA_ARCHITECTURES={cuda_arch}"] if cuda_arch else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="build.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--cuda-arch", default="", help="CMAKE_CUDA_ARCHITECTURES (default: CMake picks)")
    parser.add_argument("--configure", action="store_true", help="(re)run CMake's configure step only")
    args = parser.parse_args(argv)
    prog = "make configure" if args.configure else PROG
    if not Path("CMakeLists.txt").is_file():
        print(f"{prog}: there is no CMakeLists.txt at the repository root", file=sys.stderr)
        return 1
    if args.configure or args.cuda_arch or not (args.build_dir / "build.ninja").is_file():
        if run(configure_command(args.build_dir, args.cuda_arch)) != 0:
            return 1
        if args.configure:
            return 0
    header(PROG)
    start = time.monotonic()
    if run(["cmake", "--build", args.build_dir]) != 0:
        return 1
    bench, registry = args.build_dir / "bench" / "stepwise_bench", args.build_dir / "registry.json"
    for product, ok in ((bench, os.access(bench, os.X_OK)), (registry, registry.is_file())):
        if not ok:
            print(f"{PROG}: the build did not produce {product}", file=sys.stderr)
            return 1
    print(f"Registry: {registry}")
    print(f"{PROG}: {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
