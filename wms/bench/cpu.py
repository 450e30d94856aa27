"""This machine's processes as /proc shows them, and the CPU seconds of
those a benchmark does not own.

A database server's processes are not the bench's children: their CPU is
read from /proc/PID/stat (user + system time) while they live.
:class:`ProcessMeter` remembers, per process, its CPU when first seen and
when last seen; a process there at the start counts from its reading then,
one that appears later from zero. A process that ends between two samples
loses what it used since the last one, so the bench samples once a second
(PostgreSQL's backends live as long as the server's pooled connections).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

TICKS = os.sysconf("SC_CLK_TCK")

# PostgreSQL's processes that work for every database of the server (the
# WAL, checkpoints, dirty pages): the bench's writes go through them too.
POSTGRES_HELPERS = ("checkpointer", "background writer", "walwriter", "autovacuum launcher")
MARIADB_NAMES = ("mariadbd", "mysqld")


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    name: str          # the executable's name (/proc/PID/comm)
    command: str       # the command line, as the process shows it (PostgreSQL: its role and database)
    ticks: int         # user + system clock ticks so far
    children_ticks: int = 0   # those of its children it has waited for


def processes() -> list[Process]:
    """Every process this one may read."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        found.append(Process(int(stat.parent.name), int(fields[1]), name, command, int(fields[11]) + int(fields[12]),
                             int(fields[13]) + int(fields[14])))
    return found


class ProcessMeter:
    """The CPU seconds the processes ``chosen`` picks use from :meth:`start` on."""

    def __init__(self, chosen: Callable[[Process], bool]) -> None:
        self.chosen = chosen
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}

    def start(self) -> None:
        self.first = {p.pid: p.ticks for p in processes() if self.chosen(p)}
        self.last = dict(self.first)

    def sample(self) -> None:
        for p in processes():
            if self.chosen(p):
                self.first.setdefault(p.pid, 0)
                self.last[p.pid] = p.ticks

    def seconds(self) -> float:
        return sum(self.last[pid] - self.first[pid] for pid in self.last) / TICKS


def database_meter(url: str) -> ProcessMeter | None:
    """A meter of the database server behind ``url`` on this machine: on
    PostgreSQL the backends of that database and the server's helpers, on
    MariaDB the whole server (its connections are threads of one process);
    None for SQLite, which runs inside the wms server."""
    target = make_url(url)
    backend = target.get_backend_name()
    if backend == "postgresql":
        database = target.database or ""

        def postgres(p: Process) -> bool:
            words = p.command.split()
            return p.name == "postgres" and (database in words or any(h in p.command for h in POSTGRES_HELPERS))

        return ProcessMeter(postgres)
    if backend in ("mysql", "mariadb"):
        return ProcessMeter(lambda p: p.name in MARIADB_NAMES)
    return None
