"""Tables for people: aligned, and on a terminal no wider than their cells
allow; JSON and piped output whole."""

from __future__ import annotations

import io

from wms.cli import output

LONG = "Held by the system: Requirements take 480 ms to evaluate against one queue; the limit is 5 ms"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def rows():
    return [{"JobID": 7, "Status": "Held", "MinorStatus": LONG}, {"JobID": 12, "Status": "Waiting",
                                                                   "MinorStatus": "Pilot Agent Submission"}]


def test_on_a_terminal_a_long_cell_is_cut_and_says_so():
    screen = Terminal()
    output.table(rows(), ["JobID", "Status", "MinorStatus"], out=screen)
    lines = screen.getvalue().splitlines()
    assert lines[2].endswith(LONG[:output.TERMINAL_CELL_MAX - 1] + "…")
    assert max(len(line) for line in lines) == len("JobID  Waiting  ") + output.TERMINAL_CELL_MAX
    assert lines[3].split() == ["12", "Waiting", "Pilot", "Agent", "Submission"]


def test_piped_a_table_keeps_every_character():
    piped = io.StringIO()
    output.table(rows(), ["JobID", "Status", "MinorStatus"], out=piped)
    assert piped.getvalue().splitlines()[2].endswith(LONG)


def test_pages_on_a_terminal_are_cut_alike():
    screen = Terminal()
    output.table_pages([rows()[:1], rows()[1:]], ["JobID", "MinorStatus"], out=screen)
    assert screen.getvalue().splitlines()[2].endswith("…")
