#!/usr/bin/env python3
"""Doxygen's input filter (conf/Doxyfile's INPUT_FILTER): a snippet as Doxygen 1.9 can parse it.

Doxygen 1.9 does not parse a function that returns a reference to an array,
``std::atomic<T> (&pools())[count]``: it reports the function's brief as
documenting an undeclared symbol, and the docs build fails. This filter
prints the file with each such declaration in its equivalent trailing-return
form, ``auto pools() -> std::atomic<T> (&)[count]``, which it parses and
shows as the same signature. One line in, one line out, so Doxygen's line
numbers stay those of the file; the snippet itself, what readers copy and the
docs include, is not touched.

Usage: doxygen_filter.py FILE (prints the filtered file; stdlib only).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

#: ``[specifiers] type (&name(params))[extent]`` at the start of a declaration.
ARRAY_REFERENCE_RETURN = re.compile(
    r"^(?P<indent>\s*)(?P<specifiers>(?:(?:inline|static|constexpr)\s+)*)"
    r"(?P<type>[A-Za-z_][\w:<>, ]*?)\s*\(&\s*(?P<name>\w+)\((?P<params>[^()]*)\)\)\[(?P<extent>[^\]]+)\]",
    re.MULTILINE)


def filtered(text: str) -> str:
    """``text`` with every function returning a reference to an array in trailing-return form."""
    return ARRAY_REFERENCE_RETURN.sub(
        lambda m: (f"{m['indent']}{m['specifiers']}auto {m['name']}({m['params']}) -> "
                   f"{m['type']} (&)[{m['extent']}]"), text)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: doxygen_filter.py FILE", file=sys.stderr)
        return 2
    sys.stdout.write(filtered(Path(argv[0]).read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
