"""A pilot's status reports on the jobs it holds (Running, Done, Failed),
taken in one transaction: each report changes its job only while the
pilot holds it, in the attempt it quotes and in a state the report may
leave; a taken report gets its history entry and its output, and an
ended job gives back what it held of consumables and quotas.

Two forms, the same rules: on PostgreSQL one call of the function
``wms_pilot_reports`` (its current text in wms/db/sql/, installed by
migrations as frozen copies), one round trip for a pilot's whole call;
on MariaDB and SQLite the statements below, one by one.
tests/db/test_pilot_reports.py runs the same cases through ``take`` on
the three databases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, BigInteger, Boolean, Connection, Integer, Text, bindparam, func, text, update

from wms.core.states import JobStatus
from wms.db.jobs import add_history
from wms.db.matching import release_debits, store_outputs
from wms.db.schema import jobs

RUNNING = JobStatus.RUNNING.value


@dataclass(frozen=True)
class Report:
    """One report as the database takes it.

    ``expect``: the states the job may leave for ``status``; ``end_time``
    and ``exit_code`` are set by an end (Done, Failed) only; ``output``:
    (stdout, stderr, truncated) to store in place of any the job had."""

    job_id: int
    pilot_id: str
    attempt: int | None
    status: str
    expect: tuple[str, ...]
    minor_status: str
    source: str
    end_time: datetime | None = None
    exit_code: int | None = None
    output: tuple[str, str, bool] | None = None


def takes_in_one_call(conn_or_engine: Any) -> bool:
    """True where the reports are one call: PostgreSQL (migration 0017)."""
    return conn_or_engine.dialect.name == "postgresql"


def take(conn: Connection, reports: Sequence[Report], now: datetime) -> set[int]:
    """The jobs whose reports were taken. Reports are taken in job order, so
    concurrent callers lock job rows in one order. On PostgreSQL ``conn``
    may be an autocommit connection: the call is then its own transaction."""
    ordered = sorted(reports, key=lambda r: r.job_id)
    if not ordered:
        return set()
    if takes_in_one_call(conn):
        return _take_in_one_call(conn, ordered, now)
    return _take_one_by_one(conn, ordered, now)


_TIMESTAMP = jobs.c.last_update_time.type
_FUNCTION = text(
    "SELECT wms_pilot_reports(:job_ids, :pilots, :attempts, :expect, :statuses, :minors, :sources, :end_times, "
    ":exit_codes, :has_output, :stdouts, :stderrs, :truncated, :now)"
).bindparams(
    bindparam("job_ids", type_=ARRAY(BigInteger)), bindparam("pilots", type_=ARRAY(Text)),
    bindparam("attempts", type_=ARRAY(Integer)), bindparam("expect", type_=ARRAY(Text)),
    bindparam("statuses", type_=ARRAY(Text)), bindparam("minors", type_=ARRAY(Text)),
    bindparam("sources", type_=ARRAY(Text)), bindparam("end_times", type_=ARRAY(_TIMESTAMP)),
    bindparam("exit_codes", type_=ARRAY(Integer)), bindparam("has_output", type_=ARRAY(Boolean)),
    bindparam("stdouts", type_=ARRAY(Text)), bindparam("stderrs", type_=ARRAY(Text)),
    bindparam("truncated", type_=ARRAY(Boolean)), bindparam("now", type_=_TIMESTAMP),
)


def _take_in_one_call(conn: Connection, reports: Sequence[Report], now: datetime) -> set[int]:
    outputs = [r.output or ("", "", False) for r in reports]
    taken = conn.execute(_FUNCTION, {
        "job_ids": [r.job_id for r in reports], "pilots": [r.pilot_id for r in reports],
        "attempts": [r.attempt for r in reports], "expect": [",".join(r.expect) for r in reports],
        "statuses": [r.status for r in reports], "minors": [r.minor_status for r in reports],
        "sources": [r.source for r in reports], "end_times": [r.end_time for r in reports],
        "exit_codes": [r.exit_code for r in reports], "has_output": [r.output is not None for r in reports],
        "stdouts": [o[0] for o in outputs], "stderrs": [o[1] for o in outputs], "truncated": [o[2] for o in outputs],
        "now": now,
    }).scalar_one()
    return set(taken)


# The statement form. Only while the pilot holds the job, in the attempt it
# quotes (none quoted: any), in a state the report may leave.
_HELD = (
    jobs.c.job_id == bindparam("r_job_id"),
    jobs.c.pilot_id == bindparam("r_pilot"),
    jobs.c.status.in_(bindparam("r_expect", expanding=True)),
    jobs.c.attempt == func.coalesce(bindparam("r_attempt", type_=Integer), jobs.c.attempt),
)
_COMMON = {"status": bindparam("r_status"), "minor_status": bindparam("r_minor"),
           "last_update_time": bindparam("r_now", type_=_TIMESTAMP), "lease_expires": None}
# Running: the start window runs from now (no heartbeat yet); an end: when and how it ended.
_START = update(jobs).where(*_HELD).values(**_COMMON, start_time=bindparam("r_now", type_=_TIMESTAMP),
                                           heartbeat_time=None)
_END = update(jobs).where(*_HELD).values(**_COMMON, end_time=bindparam("r_end", type_=_TIMESTAMP),
                                         exit_code=bindparam("r_exit", type_=Integer))


def _take_one_by_one(conn: Connection, reports: Sequence[Report], now: datetime) -> set[int]:
    taken = []
    for r in reports:
        params = {"r_job_id": r.job_id, "r_pilot": r.pilot_id, "r_expect": list(r.expect), "r_attempt": r.attempt,
                  "r_status": r.status, "r_minor": r.minor_status, "r_now": now}
        if r.status == RUNNING:
            changed = conn.execute(_START, params).rowcount
        else:
            changed = conn.execute(_END, {**params, "r_end": r.end_time, "r_exit": r.exit_code}).rowcount
        if changed == 1:
            taken.append(r)
    add_history(conn, [{"job_id": r.job_id, "status": r.status, "minor_status": r.minor_status, "source": r.source,
                        "time": now} for r in taken])
    store_outputs(conn, {r.job_id: r.output for r in taken if r.output is not None}, now)
    release_debits(conn, [r.job_id for r in taken if r.status != RUNNING])
    return {r.job_id for r in taken}
