"""Printing results: aligned tables for people, JSON for programs."""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Iterable, Sequence, TextIO


# ISO times from the API, shown to the second in tables (JSON keeps them whole).
ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str) and ISO_TIME.match(value):
        return value[:19].replace("T", " ")
    if isinstance(value, (list, tuple)):
        return ",".join(cell(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={cell(v)}" for k, v in value.items())
    return str(value)


def table(rows: Iterable[dict[str, Any]], columns: Sequence[str], out: TextIO | None = None) -> None:
    """Print ``rows`` as a table with one column per name, aligned; numbers right-aligned."""
    out = out or sys.stdout
    rows = list(rows)
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row.get(c), (int, float)) and not isinstance(row.get(c), bool) for row in rows) and rows
               for c in columns]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
        return "  ".join(parts).rstrip()

    print(line(list(columns)), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for r in cells:
        print(line(r), file=out)


def as_json(document: Any, out: TextIO | None = None) -> None:
    print(json.dumps(document, indent=2, sort_keys=False), file=out or sys.stdout)
