#!/usr/bin/env python3
"""The last built site (``make serve``, ``make check-site``): the folder ``BUILD/site-dir.txt`` names.

``serve`` serves it at ``http://127.0.0.1:PORT/`` with Python's http.server (Ctrl-C stops); ``check`` runs
the headless-browser check (``tests/browser/check_site.py``) on it. Every site build (``make docs``,
``make test``) records its folder there (conf/check.py's ``build_site``). Run from the repository root.

Usage::

    built_site.py serve --build-dir build [--port 8000] [--python PY]
    built_site.py check --build-dir build [--python .venv/bin/python]

Exit status: 1 when no built site is recorded; else that of the server or the check.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from check import run  # conf/check.py, beside this file: how commands are echoed and run


def built_site(build_dir: Path) -> Path | None:
    """The folder of the last built site, where it still holds an ``index.html``."""
    try:
        site = Path((build_dir / "site-dir.txt").read_text().strip())
    except OSError:
        return None
    return site if str(site) not in ("", ".") and (site / "index.html").is_file() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="built_site.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("serve", "check"))
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--python", default=sys.executable, help="the python to serve with, or to check with")
    args = parser.parse_args(argv)
    prog = "make serve" if args.action == "serve" else "make check-site"
    site = built_site(args.build_dir)
    if site is None:
        print(f"{prog}: no built site recorded in {args.build_dir / 'site-dir.txt'} (run make docs first)",
              file=sys.stderr)
        return 1
    if args.action == "check":
        return run([args.python, "tests/browser/check_site.py", "--site", site])
    print(f"Serving {site} at http://127.0.0.1:{args.port}/ (Ctrl-C stops)", flush=True)
    command = [args.python, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(site), str(args.port)]
    os.execvp(command[0], command)
    return 1  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main())
