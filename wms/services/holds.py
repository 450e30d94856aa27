"""Holds: jobs taken out of matching until every hold on them is released.

The system holds the waiting jobs of a task queue whose Requirements
expression failed or ran over its evaluation budget at a match
(wms.core.match.requirements): evaluated again at every pilot request that
draws it, it would cost every pilot that time, forever. The hold is its own
short transaction after the match's claim, conditional on the jobs still
waiting, so several Matcher processes holding the same task queue at once
hold each job once and fail nothing (the later ones find nothing left to
hold).

Users and operators hold and release jobs themselves (``wms hold``,
``wms release``, qhold, qrls), with Grid Engine's hold types and who may
use which (wms.core.holds). A hold or release locks the jobs it changes,
then changes each in one transaction with its hold rows and history; the
Matcher's claim skips locked rows and takes only a Waiting job. A Matched
job is held too: it is taken back from its pilot (its placement cleared,
its debits returned) in the same transaction, and the pilot's Running
report, conditional on the job being Matched to it, is refused, so the
pilot starts nothing. A hold racing a pilot's confirmation thus ends with
the job either held and never started, or Running and the hold refused
with the state it found.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from wms.core import holds as rules
from wms.core.errors import Forbidden
from wms.core.holds import Hold
from wms.core.identity import Identity
from wms.core.states import HoldType, JobStatus
from wms.db import holds as holds_db
from wms.db import jobs as jobs_db
from wms.db import matching as match_db
from wms.services import jobs as jobs_service
from wms.services.jobs import Selection
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime

log = logging.getLogger(__name__)

#: The holder of the system's holds.
SYSTEM = "system"


def hold_task_queue(runtime: Runtime, tq_id: int, reason: str, source: str, now: datetime) -> list[int]:
    """Hold every waiting job of task queue ``tq_id`` for the system, with
    ``reason``; the ids held now (none when another process held them first)."""
    hold = Hold(HoldType.SYSTEM, SYSTEM, rules.clip(reason), now)
    minor = rules.minor_status([hold])

    def work(conn) -> list[int]:
        waiting = jobs_db.waiting_jobs_of_task_queue(conn, tq_id)
        held = jobs_db.set_status(conn, waiting, JobStatus.HELD.value, minor, source, now,
                                  expect={JobStatus.WAITING.value}, values={"hold_types": HoldType.SYSTEM.value})
        holds_db.add_holds(conn, [(job_id, hold) for job_id in held])
        return held

    held = run_in_transaction(runtime.engine, work)
    if held:
        log.warning("task queue %s: %d waiting job(s) held by the system: %s", tq_id, len(held), reason,
                    extra={"fields": {"task_queue": tq_id, "held": len(held)}})
    return held


def _not_holdable(row: dict[str, Any] | None) -> str:
    """Why a job could not be held, from its state now."""
    if row is None:
        return "it is gone"
    where = f" on {row['queue']}" if row["queue"] else ""
    why = f"it is {row['status']}{where}: only a job that has not started (Waiting, Matched) can be held"
    if row["status"] == JobStatus.RUNNING.value:
        why += "; a kill or a reschedule --running stops it"
    return why


def hold_jobs(runtime: Runtime, identity: Identity, selection: Selection, types: frozenset[HoldType],
              reason: str | None, now: datetime) -> dict[str, Any]:
    """qhold: put holds of ``types`` on the selected jobs, each recorded with the
    caller and ``reason``; what was held, what not and why, where a filter goes on."""
    refused = rules.refused_types(identity.role, types)
    if refused:
        raise Forbidden(refused)
    why = rules.clean_reason(reason)
    rows, _, next_after = jobs_service.selected_jobs(runtime, identity, selection, "hold",
                                                        rules.HOLDABLE)
    ids = [r["job_id"] for r in rows]
    source = jobs_service.source(identity)

    def work(conn) -> tuple[list[int], dict[str, str]]:
        locked = holds_db.lock_jobs(conn, ids, rules.HOLDABLE)
        existing = holds_db.holds_of(conn, [r["job_id"] for r in locked if r["status"] == JobStatus.HELD])
        changes, added, history, not_held = [], [], [], {}
        for row in locked:
            present = rules.read_types(row["hold_types"])
            new = [t for t in rules.ORDER if t in types and t not in present]
            if not new:
                not_held[str(row["job_id"])] = f"already {rules.minor_status(existing.get(row['job_id'], []))}"
                continue
            fresh = [Hold(t, identity.user, why, now) for t in new]
            minor = rules.minor_status(existing.get(row["job_id"], []) + fresh)
            changes.append({"job_id": row["job_id"], "status": JobStatus.HELD.value,
                            "hold_types": rules.write_types(present | set(new)), "minor_status": minor})
            added.extend((row["job_id"], h) for h in fresh)
            note = minor
            if row["status"] == JobStatus.MATCHED:
                note = rules.clip(f"{minor} (taken back from pilot {row['pilot_id']} before it started)")
            history.append({"job_id": row["job_id"], "status": JobStatus.HELD.value, "minor_status": note,
                            "source": source, "time": now})
        holds_db.add_holds(conn, added)
        holds_db.set_holds(conn, changes, now)
        # Matched jobs are taken back from their pilots: that pilot's Running report is refused.
        taken_back = [r["job_id"] for r in locked if r["status"] == JobStatus.MATCHED]
        match_db.clear_placement(conn, taken_back)
        match_db.release_debits(conn, taken_back)
        jobs_db.add_history(conn, history)
        seen = {r["job_id"] for r in locked}
        current = {r["job_id"]: r for r in jobs_db.get_jobs(conn, [i for i in ids if i not in seen])}
        not_held.update({str(i): _not_holdable(current.get(i)) for i in ids if i not in seen})
        return [c["job_id"] for c in changes], not_held

    held, not_held = run_in_transaction(runtime.engine, work) if ids else ([], {})
    return {"held": held, "not_held": not_held, "next_after": next_after}


def release_jobs(runtime: Runtime, identity: Identity, selection: Selection, types: frozenset[HoldType] | None,
                 reason: str | None, now: datetime) -> dict[str, Any]:
    """qrls: release the holds of ``types`` (None: every kind the caller may release)
    on the selected jobs; a job whose last hold goes waits again.

    Named jobs held only by holds the caller may not release (a user's job
    held by an operator) are refused whole (403); a filter reports them."""
    if types is not None:
        refused = rules.refused_types(identity.role, types)
        if refused:
            raise Forbidden(refused)
    wanted = types if types is not None else rules.may_use(identity.role)
    why = rules.clean_reason(reason)
    rows, named, next_after = jobs_service.selected_jobs(runtime, identity, selection, "release",
                                                                {JobStatus.HELD.value})
    ids = [r["job_id"] for r in rows]
    source = jobs_service.source(identity)

    def work(conn) -> tuple[list[int], dict[str, str], dict[str, str]]:
        locked = holds_db.lock_jobs(conn, ids, {JobStatus.HELD.value})
        existing = holds_db.holds_of(conn, [r["job_id"] for r in locked])
        changes, dropped, history = [], [], []
        still_held: dict[str, str] = {}
        not_released: dict[str, str] = {}
        forbidden = []
        for row in locked:
            job_id = row["job_id"]
            holds = existing.get(job_id, [])
            present = rules.read_types(row["hold_types"])
            gone = [t for t in rules.ORDER if t in present and t in wanted]
            if not gone:
                held_by = rules.minor_status(holds)
                if types is None and not present & rules.may_use(identity.role):
                    # held only by what the caller may not release: an operator's hold on a user's job
                    refusal = f"{held_by}; {rules.refused_types(identity.role, present)}"
                    forbidden.append(f"job {job_id}: {refusal}")
                    not_released[str(job_id)] = refusal
                else:
                    not_released[str(job_id)] = f"no {'/'.join(sorted(t.value for t in wanted))} hold on it: {held_by}"
                continue
            kept = [h for h in holds if h.hold_type not in gone]
            released = f"{rules.kinds(gone).capitalize()} released by {identity.user}" + (f": {why}" if why else "")
            if present - set(gone):
                minor = rules.minor_status(kept)
                status, note = JobStatus.HELD.value, rules.clip(f"{released}; still {minor[:1].lower()}{minor[1:]}")
                still_held[str(job_id)] = minor
            else:
                status, minor = JobStatus.WAITING.value, rules.clip(released)
                note = minor
            changes.append({"job_id": job_id, "status": status, "hold_types": rules.write_types(present - set(gone)),
                            "minor_status": minor})
            dropped.extend((job_id, t) for t in gone)
            history.append({"job_id": job_id, "status": status, "minor_status": note, "source": source, "time": now})
        if named and forbidden:
            raise Forbidden(" / ".join(forbidden))
        holds_db.drop_holds(conn, dropped)
        holds_db.set_holds(conn, changes, now)
        jobs_db.add_history(conn, history)
        seen = {r["job_id"] for r in locked}
        current = {r["job_id"]: r for r in jobs_db.get_jobs(conn, [i for i in ids if i not in seen])}
        for i in ids:
            if i not in seen:
                not_released[str(i)] = f"it is {current[i]['status']}, not Held" if i in current else "it is gone"
        return [c["job_id"] for c in changes if c["status"] == JobStatus.WAITING.value], still_held, not_released

    released, still_held, not_released = run_in_transaction(runtime.engine, work) if ids else ([], {}, {})
    if released:
        # The Matcher draws from its cached list of task queues with waiting jobs.
        runtime.caches.waiting.forget()
    return {"released": released, "still_held": still_held, "not_released": not_released, "next_after": next_after}
