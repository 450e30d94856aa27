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


# On a terminal a cell longer than this is cut, ending in "…", so that one
# long minor status does not push every row past the screen's edge; piped
# output and --json keep every character.
TERMINAL_CELL_MAX = 60


def cells_of(rows: list[dict[str, Any]], columns: Sequence[str], out: TextIO) -> list[list[str]]:
    """The table's cells, cut to TERMINAL_CELL_MAX when ``out`` is a terminal."""
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    if not out.isatty():
        return cells
    return [[v if len(v) <= TERMINAL_CELL_MAX else v[:TERMINAL_CELL_MAX - 1] + "…" for v in r] for r in cells]


def table(rows: Iterable[dict[str, Any]], columns: Sequence[str], out: TextIO | None = None) -> None:
    """Print ``rows`` as a table with one column per name, aligned; numbers right-aligned."""
    out = out or sys.stdout
    rows = list(rows)
    cells = cells_of(rows, columns, out)
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


def table_pages(pages: Iterable[list[dict[str, Any]]], columns: Sequence[str], out: TextIO | None = None) -> None:
    """Print a paged list as one table while its pages arrive, never holding more than one page:
    each page is aligned to the widest cell seen so far (a later, wider page shifts its columns
    only, not those already printed)."""
    out = out or sys.stdout
    widths = [len(c) for c in columns]
    numeric: list[bool] | None = None
    for rows in pages:
        if not rows:  # an empty page may come before others (docs/api.md, "Pages")
            continue
        cells = cells_of(rows, columns, out)
        widths = [max([w] + [len(r[i]) for r in cells]) for i, w in enumerate(widths)]
        if numeric is None:
            numeric = [bool(rows) and all(isinstance(row.get(c), (int, float)) and not isinstance(row.get(c), bool)
                                          for row in rows) for c in columns]
            print(_line(list(columns), widths, numeric), file=out)
            print("  ".join("-" * w for w in widths), file=out)
        for r in cells:
            print(_line(r, widths, numeric), file=out)
        out.flush()
    if numeric is None:  # no row at all: the header alone, as table() prints it
        table([], columns, out)


def _line(values: Sequence[str], widths: Sequence[int], numeric: Sequence[bool]) -> str:
    parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)]
    return "  ".join(parts).rstrip()


def json_pages(pages: Iterable[list[Any]], out: TextIO | None = None) -> None:
    """Print a paged list as the one JSON list :func:`as_json` prints, while its pages arrive."""
    out = out or sys.stdout
    first = True
    print("[", end="", file=out)
    for rows in pages:
        for row in rows:
            text = json.dumps(row, indent=2, sort_keys=False)
            print(("" if first else ",") + "\n" + "\n".join("  " + ln for ln in text.splitlines()), end="", file=out)
            first = False
        out.flush()
    print("]" if first else "\n]", file=out)


def as_json(document: Any, out: TextIO | None = None) -> None:
    print(json.dumps(document, indent=2, sort_keys=False), file=out or sys.stdout)
