"""Advance reservations (specs/003): qrsub, qrstat, qrdel, qralter and the
lifecycle the reservation_manager agent drives.

A grant is one transaction: take the lock rows of every scope the request
could book (sorted, so concurrent grants never deadlock), read the booking
calendar (running jobs until their h_rt ends, every other reservation),
decide with ``core.reservations.grant`` and store the reservation and its
bookings. Two grants for the same slots therefore run one after the other,
whatever the number of server processes, and the second sees the first's
bookings.

While a reservation runs (states r and E) what it booked is held in the
usage rows, so the Matcher's conditional debits keep other jobs out; its
own jobs are debited against the reservation's scopes
(``ar:<id>|<scope>``) instead (core/match/reservations.py).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator
from sqlalchemy.engine import Connection

from wms.core import complexes as cx_rules
from wms.core.complexes import ComplexTable
from wms.core.errors import Conflict, Forbidden, InvalidInput, NotFound, WmsError
from wms.core.task_queues import TaskQueueDefinition
from wms.core.identity import Identity
from wms.core.limits import parse_id
from wms.core.match import levels
from wms.core.offers import LevelValues
from wms.core.scopes import host_scope
from wms.core.match.reservations import ReservationView, Snapshot
from wms.core.paging import Page, Slice
from wms.core.patterns import match_pattern
from wms.core.quantities import time_limit
from wms.core.reservations import access, admission
from wms.core.reservations.calendar import Calendar, Use, job_end
from wms.core.reservations.ids import next_id
from wms.core.reservations.grant import NO_QUEUES, Candidate, Decision, booked_scopes, decide
from wms.core.reservations.states import ACTIVE, FINAL, STARTED, ARState, due_state, effects_of
from wms.core.reservations.switches import (
    DEFAULT_ACCOUNT, ReservationSpec, build_request, check_name, parse_mail_list, parse_mail_options,
)
from wms.core.reservations.timespec import Window, changed_end, format_time_span, parse_time_span
from wms.core.resources import QueueRef
from wms.core.states import JobStatus, KILLABLE
from wms.db import jobs as jobs_db
from wms.db import matching as match_db
from wms.db import reservations as ar_db
from wms.db.engine import reading
from wms.services import access as services_access
from wms.services import mail
from wms.services.caches import ReservationCandidates
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime

SOURCE = "ReservationManager"
MAX_LOCK = "max_advance_reservations"
ID_LOCK = "ar_id"   # taken alone, after the scope locks: always the last lock a grant takes


class ReservationDenied(WmsError):
    """The request is valid but cannot be granted now (qrsub exits 1)."""

    status = 409


class TooManyReservations(WmsError):
    """max_advance_reservations reached (qrsub exits 25)."""

    status = 429


# ---------------------------------------------------------------- candidates and the calendar
def configured_hosts(runtime: Runtime) -> list[str]:
    """Hosts cluster.yaml names: entries of ``hosts`` and members of host groups."""
    cluster = runtime.config.cluster
    names = {h for h in cluster.hosts if not h.startswith("@")}
    for members in cluster.hostgroups.values():
        names |= {m for m in members if not m.startswith("@")}
    return sorted(names)


def candidates(runtime: Runtime) -> ReservationCandidates:
    """Every queue, alone and bound to each configured host, with the complex
    table their levels were read with (cached per configuration and table)."""
    table = runtime.read_stored_complexes()     # first: adopting a newer table drops the candidates read with the old
    if runtime.caches.reservation_candidates is not None:
        return runtime.caches.reservation_candidates
    cluster = runtime.config.cluster
    global_values = levels.global_level(table, cluster)
    host_levels = {}
    for host in configured_hosts(runtime):
        configured = levels.host_configuration(cluster, host)
        fixed = levels.parse_values(table, configured, f"hosts.{host}")
        fixed["hostname"] = host
        host_levels[host] = LevelValues("host", fixed, scope=host_scope(host) if configured else None)
    out = []
    for ref, params in runtime.resources_for(None).queue_items():
        queue_values = levels.queue_level(table, ref, params.get("complex_values") or {})
        out.append(Candidate(ref.name, None, params, (global_values, queue_values)))
        for host, host_values in host_levels.items():
            out.append(Candidate(ref.name, host, params, (global_values, host_values, queue_values)))
    found = runtime.caches.reservation_candidates = ReservationCandidates(table, tuple(out))
    return found


def _h_rt(stored: str) -> float | None:
    """A running job's h_rt, from its task queue's stored definition (None: none, or not readable)."""
    try:
        return time_limit(TaskQueueDefinition.from_stored(stored).hard_requests.get("h_rt"))
    except InvalidInput:
        return None


def read_calendar(runtime: Runtime, conn: Connection, now: datetime, exclude: int | None = None
                  ) -> tuple[Calendar, frozenset[str], frozenset[str]]:
    """The booking calendar, and the queues and hosts where jobs without a runtime limit run."""
    calendar = Calendar()
    offset = runtime.config.settings.duration_offset
    for b in ar_db.active_bookings(conn, [s.value for s in ACTIVE], exclude=exclude):
        calendar.add((b["scope"], b["resource"]), Use(b["start_time"], b["end_time"], float(b["amount"])))
    # Deleted without -f: still held until the pilots have stopped the jobs.
    holding_deleted = {r["ar_id"]: release_time(r) for r in ar_db.deleted_holding(conn, RELEASE_AT)}
    for ar_id, bookings in ar_db.bookings_of(conn, [i for i, t in holding_deleted.items() if t]).items():
        for b in bookings:
            calendar.add((b["scope"], b["resource"]), Use(now, holding_deleted[ar_id], float(b["amount"])))
    holding = ar_db.holding_jobs(conn)
    ends: dict[int, datetime | None] = {}
    unlimited_queues: set[str] = set()
    unlimited_hosts: set[str] = set()
    for job in holding:
        if job["reservation_id"] is not None:
            continue   # inside its reservation's booking
        h_rt = _h_rt(job["definition"])
        ends[job["job_id"]] = job_end(job["start_time"] or job["matched_time"] or now, h_rt, offset)
        if h_rt is None:
            unlimited_queues.add(job["queue"])
            if job["host"]:
                unlimited_hosts.add(job["host"])
    for debit in ar_db.debits_of(conn, list(ends)):
        calendar.add((debit["scope"], debit["resource"]), Use(now, ends[debit["job_id"]], float(debit["amount"])))
    return calendar, frozenset(unlimited_queues), frozenset(unlimited_hosts)


def _booking_rows(decision: Decision) -> list[dict[str, Any]]:
    return [{"scope": b.scope, "resource": b.resource, "amount": b.amount, "queue": b.queue, "host": b.host or ""}
            for b in decision.bookings]


def _granted(decision: Decision) -> list[dict[str, Any]]:
    return [{"queue": a.queue, "host": a.host, "slots": a.slots} for a in decision.allocations]


def _denial(decision: Decision) -> str:
    head = "error: no queue instances to reserve" if decision.message == NO_QUEUES \
        else f"denied: {decision.message}"
    if decision.reasons:
        head += " (" + "; ".join(f"{where}: {why}" for where, why in sorted(decision.reasons.items())) + ")"
    return head


# ---------------------------------------------------------------- qrsub
def may_submit(runtime: Runtime, identity: Identity) -> bool:
    """Whether the caller may submit advance reservations (a manager, an operator, or in arusers)."""
    return access.may_create(identity.role, identity.user, runtime.config.cluster.usersets)


def submit(runtime: Runtime, identity: Identity, spec: ReservationSpec, now: datetime) -> dict[str, Any]:
    """Grant (or, with ``verify``, only check) an advance reservation."""
    usersets = runtime.config.cluster.usersets
    if not may_submit(runtime, identity):
        raise Forbidden(f"denied: {identity.user} is neither manager nor operator nor member of the "
                        f"{access.ARUSERS} user set: may not submit advance reservations")
    found = candidates(runtime)
    table, cands = found.table, found.candidates
    request, stored = build_request(table, runtime.config.cluster, identity.user, spec, now)
    mail_options = parse_mail_options(spec.mail_options)
    mail_list = parse_mail_list(spec.mail_list)
    limit = runtime.config.settings.max_advance_reservations

    def grant(conn: Connection) -> tuple[Decision, int | None]:
        scopes = booked_scopes(table, request, cands, usersets)
        if limit and not spec.verify:
            scopes.add(MAX_LOCK)
        ar_db.lock_scopes(conn, scopes)
        if limit and not spec.verify and ar_db.count_in_states(conn, [s.value for s in ACTIVE]) >= limit:
            raise TooManyReservations(f"denied: the maximum number of advance reservations ({limit}) "
                                      "is reached (max_advance_reservations)")
        calendar, unlimited_queues, unlimited_hosts = read_calendar(runtime, conn, now)
        decision = decide(table, request, cands, calendar, usersets, unlimited_queues, unlimited_hosts)
        if not decision.granted or spec.verify:
            return decision, None
        # The id: taken last, after every scope lock, so grants never deadlock on it.
        ar_db.lock_scopes(conn, [ID_LOCK])
        ar_id = next_id(ar_db.last_ar_id(conn), ar_db.ids_in_use(conn, [s.value for s in ACTIVE], RELEASE_AT))
        ar_db.drop_finished(conn, ar_id, [s.value for s in FINAL])
        ar_db.store_last_ar_id(conn, ar_id, now, identity.user)
        ar_db.insert_reservation(conn, {
            "ar_id": ar_id,
            "name": spec.name or "", "owner": identity.user, "owner_group": identity.group, "vo": identity.vo,
            "account": spec.account or DEFAULT_ACCOUNT, "state": ARState.WAITING.value,
            "submission_time": now, "start_time": request.window.start, "end_time": request.window.end,
            "acl": json.dumps(list(request.acl)), "request": json.dumps(stored, sort_keys=True),
            "granted": json.dumps(_granted(decision)), "mail_options": mail_options,
            "mail_list": ",".join(mail_list), "hard_error": spec.hard_error, "message": "", "updated": now,
        })
        ar_db.insert_bookings(conn, ar_id, _booking_rows(decision))
        return decision, ar_id

    decision, ar_id = run_in_transaction(runtime.engine, grant)
    if spec.verify:
        return {"verified": decision.granted, "message": "verification: found possible assignment"
                if decision.granted else f"verification: {_denial(decision)}",
                "granted": _granted(decision), "reasons": decision.reasons}
    if not decision.granted:
        raise ReservationDenied(_denial(decision))
    forget(runtime)
    decision = confirm(runtime, request, found, ar_id, decision, now)
    if not decision.granted:
        raise ReservationDenied(_denial(decision))
    if request.window.start <= now:
        # Starting now: running at once rather than at the agent's next round.
        with reading(runtime.engine) as conn:
            row = ar_db.get(conn, ar_id)
        if row is not None and _move(runtime, row, ARState.RUNNING, "", now):
            forget(runtime)
            if "b" in row["mail_options"]:
                notify(runtime, row, "started")
    return {"ar_id": ar_id, "message": f"Your advance reservation {ar_id} has been granted",
            "granted": _granted(decision)}


# How often a grant whose queues changed meanwhile is re-checked before it is withdrawn.
CONFIRM_ROUNDS = 3


def _booked(decision: Decision) -> list[tuple]:
    return sorted((b.scope, b.resource, b.amount, b.queue, b.host or "") for b in decision.bookings)


def confirm(runtime: Runtime, request: Any, found: ReservationCandidates, ar_id: int, decision: Decision,
            now: datetime) -> Decision:
    """The second phase of a grant: wait until every Matcher sees the new
    reservation, then check it again against what was matched meanwhile.

    A Matcher process reuses its list of reservations for up to caches.RESERVATIONS_TTL
    seconds, so for that long after the grant it may still hand a queue's
    slots to a job that will run into the window (or one without h_rt). The
    reservation is stored, as waiting, before it is confirmed; after
    ``reservation_settle`` seconds (wms.yaml, twice caches.RESERVATIONS_TTL by default)
    no Matcher can still ignore it, and the calendar read again holds every
    job matched in between. If the booking still fits it is confirmed; if
    another assignment fits it is re-booked and checked again; otherwise
    the reservation is withdrawn (state d) and the request denied.
    """
    usersets = runtime.config.cluster.usersets
    table, cands = found.table, found.candidates
    for round_ in range(1, CONFIRM_ROUNDS + 1):
        time.sleep(runtime.config.settings.reservation_settle)

        def check(conn: Connection) -> tuple[Decision, bool]:
            ar_db.lock_scopes(conn, booked_scopes(table, request, cands, usersets))
            row = ar_db.get(conn, ar_id, lock=True)
            if row is None or row["state"] != ARState.WAITING.value:
                return decision, True      # started, deleted or altered meanwhile: no longer a new grant
            calendar, unlimited_queues, unlimited_hosts = read_calendar(runtime, conn, now, exclude=ar_id)
            again = decide(table, request, cands, calendar, usersets, unlimited_queues, unlimited_hosts)
            if again.granted and _booked(again) == _booked(decision):
                return again, True
            if not again.granted or round_ == CONFIRM_ROUNDS:
                denied = again if not again.granted else Decision(False, "the queues kept changing while "
                                                                         "the reservation was being granted")
                ar_db.set_state(conn, ar_id, [ARState.WAITING.value], ARState.DELETED.value, now,
                                f"withdrawn: {_denial(denied)}")
                return denied, True
            ar_db.replace_bookings(conn, ar_id, _booking_rows(again))
            ar_db.update_fields(conn, ar_id, {"granted": json.dumps(_granted(again)), "updated": now})
            return again, False

        decision, settled = run_in_transaction(runtime.engine, check)
        forget(runtime)
        if settled:
            return decision
    return decision


# ---------------------------------------------------------------- qrstat
def _view(row: dict[str, Any], bookings: list[dict[str, Any]], table: ComplexTable) -> dict[str, Any]:
    granted = json.loads(row["granted"])
    request = json.loads(row["request"])
    duration = (row["end_time"] - row["start_time"]).total_seconds()
    slots = ",".join(f"{g['host'] or g['queue']}={g['slots']}" for g in granted)
    values = []
    for b in bookings:
        if b["resource"] == "slots":
            continue
        where = b["host"] or b["queue"]
        cx = table.get(b["resource"])
        amount = cx_rules.format_value(cx, b["amount"]) if cx is not None else str(b["amount"])
        values.append(f"{where}={b['resource']}={amount}")
    return {
        "ar_id": row["ar_id"], "name": row["name"], "owner": row["owner"], "group": row["owner_group"],
        "state": row["state"],
        "start": row["start_time"].isoformat(), "end": row["end_time"].isoformat(),
        "duration": format_time_span(duration), "submission_time": row["submission_time"].isoformat(),
        "account": row["account"], "acl": json.loads(row["acl"]), "resources": request.get("resources", {}),
        "queues": request.get("queues", []), "masterq": request.get("masterq", []), "pe": request.get("pe"), "pe_range": request.get("pe_range"),
        "ckpt": request.get("ckpt"), "granted": granted, "slots": slots, "complex_values": ",".join(values),
        "mail_options": row["mail_options"], "mail_list": row["mail_list"],
        "hard_error": bool(row["hard_error"]), "message": row["message"],
    }


def show(runtime: Runtime, identity: Identity, selectors: list[str] | None = None,
         users: list[str] | None = None) -> list[dict[str, Any]]:
    """qrstat: active reservations, or those ``selectors`` name (ids, names, name patterns) in any state.

    Only those the caller may see (visibility.reservations; by default all,
    as qrstat(1)): another's hidden reservation is as unknown as a missing one."""
    if not selectors:
        return show_page(runtime, identity, users).rows
    policy, usersets = services_access.policy(runtime), runtime.config.cluster.usersets
    with reading(runtime.engine) as conn:
        rows = [r for r in ar_db.list_reservations(conn)
                if services_access.may_see_reservation(identity, r, policy, usersets)]
        chosen = []
        for selector in selectors:
            found = [r for r in rows if _selected(selector, r)]
            if not found:
                raise NotFound(f"advance reservation {selector} does not exist")
            chosen.extend(r for r in found if r not in chosen)
        return _views(conn, runtime, identity, chosen, users)


def show_page(runtime: Runtime, identity: Identity, users: list[str] | None = None,
              page: Page | None = None) -> Slice:
    """qrstat without selectors: the active reservations the caller may see (of ``users``), by
    id; with ``page``, those among the page's ``size`` active reservations after its key (an
    access list is read row by row: a :class:`Slice`)."""
    policy, usersets = services_access.policy(runtime), runtime.config.cluster.usersets
    with reading(runtime.engine) as conn:
        read = ar_db.list_reservations(conn, [s.value for s in ACTIVE], after=page.after if page else None,
                                       limit=page.size if page else None)
        rows = [r for r in read if services_access.may_see_reservation(identity, r, policy, usersets)]
        views = _views(conn, runtime, identity, rows, users)
    return Slice(views, read[-1]["ar_id"] if page is not None and len(read) == page.size else None)


def _views(conn: Connection, runtime: Runtime, identity: Identity, rows: list[dict[str, Any]],
           users: list[str] | None) -> list[dict[str, Any]]:
    """The qrstat view of each of ``rows`` owned by one of ``users`` (patterns; ``$user``: the caller),
    with ``may_change``: whether the caller may change or delete it."""
    if users:
        wanted = [identity.user if u == "$user" else u for u in users]
        rows = [r for r in rows if any(match_pattern(u, r["owner"]) for u in wanted)]
    bookings = ar_db.bookings_of(conn, [r["ar_id"] for r in rows])
    table = runtime.read_stored_complexes()
    return [{**_view(r, bookings[r["ar_id"]], table),
             "may_change": access.may_administer(identity.role, identity.user, r["owner"])} for r in rows]


def _selected(selector: str, row: dict[str, Any]) -> bool:
    if selector.isdigit():
        return parse_id(selector) == row["ar_id"]
    return bool(row["name"]) and match_pattern(selector, row["name"])


# ---------------------------------------------------------------- qrdel
def _resolve(conn: Connection, selector: str, owners: list[str]) -> list[int]:
    """An id names any reservation; a name (wildcards allowed) only those of ``owners`` (qrdel(1))."""
    if str(selector).isdigit():
        ar_id = parse_id(str(selector))
        if ar_id is None:
            raise NotFound(f"advance reservation {selector} does not exist")
        return [ar_id]
    rows = ar_db.list_reservations(conn, [s.value for s in ACTIVE])
    found = [r["ar_id"] for r in rows if r["name"] and match_pattern(selector, r["name"])
             and any(match_pattern(o, r["owner"]) for o in owners)]
    if not found:
        raise NotFound(f"advance reservation {selector} does not exist"
                       + (f" (among those of {','.join(owners)})" if owners else ""))
    return found


def _owned_by(conn: Connection, owners: list[str]) -> list[int]:
    rows = ar_db.list_reservations(conn, [s.value for s in ACTIVE])
    return [r["ar_id"] for r in rows if any(match_pattern(o, r["owner"]) for o in owners)]


def delete(runtime: Runtime, identity: Identity, selectors: list[str], force: bool, now: datetime,
           users: list[str] | None = None) -> list[str]:
    """qrdel: in the given order, remove each reservation's jobs, then the reservation.

    Only its owner, operators and managers may. Every job of the reservation
    is killed at once and the reservation is in state d. Without ``force``
    (qrdel(1): the reservation goes only when its jobs are gone) a started
    reservation whose jobs were on pilots keeps its slots and consumables
    held until those pilots have stopped them: a live pilot learns of the
    kill at its next heartbeat, so ``heartbeat_timeout`` seconds after the
    deletion the reservation_manager releases them. With ``force`` the pilots
    are not waited for: everything is released at once.

    qrdel(1): a name selects only the caller's reservations, or with
    ``users`` (-u, ``$user`` and wildcards) those of these users; ``users``
    alone selects all their active reservations.
    """
    owners = [identity.user if u == "$user" else u for u in users] if users else [identity.user]
    if not selectors and not users:
        raise InvalidInput("qrdel: give advance reservation ids or names, or -u users")
    policy, usersets = services_access.policy(runtime), runtime.config.cluster.usersets
    with reading(runtime.engine) as conn:
        if selectors:
            groups = [(selector, _resolve(conn, selector, owners)) for selector in selectors]
        else:
            groups = [(",".join(owners), _owned_by(conn, owners))]
    if not selectors and not groups[0][1]:
        raise NotFound(f"no advance reservation of {groups[0][0]} exists")
    messages = []
    for _, ids in groups:
        for ar_id in ids:
            with reading(runtime.engine) as conn:
                row = ar_db.get(conn, ar_id)
            if row is None or not services_access.may_see_reservation(identity, row, policy, usersets):
                raise NotFound(f"advance reservation {ar_id} does not exist")
            if not access.may_administer(identity.role, identity.user, row["owner"]):
                raise Forbidden(f"{identity.user} is not allowed to delete advance reservation {ar_id} "
                                f"(owner {row['owner']}; only the owner, operators and managers may)")
            if row["state"] in FINAL:
                raise NotFound(f"advance reservation {ar_id} does not exist (it is {_STATE_WORDS[row['state']]})")
            wait = None if force else timedelta(seconds=runtime.config.settings.heartbeat_timeout)
            finish(runtime, ar_id, ARState.DELETED, f"Killed: advance reservation {ar_id} deleted by "
                                                    f"{identity.user}", now, wait_for_pilots=wait)
            messages.append(f"{identity.user} deleted advance reservation {ar_id}")
            with reading(runtime.engine) as conn:
                release = release_time(ar_db.get(conn, ar_id))
            if release is not None:
                messages.append(f"advance reservation {ar_id} keeps its resources until its jobs' pilots have "
                                f"stopped them, at the latest {release.isoformat()} (qrdel -f releases them now)")
    return messages


_STATE_WORDS = {"x": "exited", "d": "deleted"}
# Jobs a pilot holds: killed in the database at once, stopped by the pilot at its next heartbeat.
ON_PILOT = frozenset({JobStatus.MATCHED.value, JobStatus.RUNNING.value, JobStatus.STALLED.value})
RELEASE_AT = "release_at"


def release_time(row: dict[str, Any] | None) -> datetime | None:
    """When a deleted reservation still holding its resources gives them back (qrdel without -f)."""
    if row is None or row["state"] != ARState.DELETED:
        return None
    value = json.loads(row["request"]).get(RELEASE_AT)
    return datetime.fromisoformat(value) if value else None


def finish(runtime: Runtime, ar_id: int, final: ARState, minor: str, now: datetime,
           wait_for_pilots: timedelta | None = None) -> bool:
    """Kill every job of the reservation, give back what it holds, then mark it ``final`` (x or d).

    With ``wait_for_pilots`` a started reservation whose jobs were on pilots
    keeps holding its bookings that long (see ``delete``)."""

    def work(conn: Connection) -> bool:
        row = ar_db.get(conn, ar_id, lock=True)
        if row is None or row["state"] in FINAL:
            return False
        jobs = ar_db.jobs_of_reservation(conn, ar_id, [s.value for s in KILLABLE])
        doomed = [j["job_id"] for j in jobs]
        killed = jobs_db.set_status(conn, doomed, JobStatus.KILLED.value, minor, SOURCE, now,
                                    expect={s.value for s in KILLABLE})
        match_db.release_debits(conn, killed)
        on_pilots = any(j["status"] in ON_PILOT and j["job_id"] in killed for j in jobs)
        if not ar_db.set_state(conn, ar_id, [row["state"]], final.value, now):
            return False
        if row["state"] in {s.value for s in STARTED}:
            if wait_for_pilots is not None and on_pilots:
                request = json.loads(row["request"])
                request[RELEASE_AT] = (now + wait_for_pilots).isoformat()
                ar_db.update_fields(conn, ar_id, {"request": json.dumps(request, sort_keys=True)})
            else:
                _hold(conn, ar_id, -1)
        return True

    changed = run_in_transaction(runtime.engine, work)
    if changed:
        forget(runtime)
    return changed


def release_deleted(runtime: Runtime, now: datetime) -> list[int]:
    """Give back what deleted reservations held for their pilots once the time is up."""
    with reading(runtime.engine) as conn:
        rows = ar_db.deleted_holding(conn, RELEASE_AT)
    released = []
    for row in rows:
        release = release_time(row)
        if release is None or release > now:
            continue

        def work(conn: Connection, ar_id: int = row["ar_id"]) -> bool:
            current = ar_db.get(conn, ar_id, lock=True)
            if current is None or release_time(current) is None:
                return False    # another agent released it meanwhile
            request = json.loads(current["request"])
            request.pop(RELEASE_AT, None)
            ar_db.update_fields(conn, ar_id, {"request": json.dumps(request, sort_keys=True), "updated": now})
            _hold(conn, ar_id, -1)
            return True

        if run_in_transaction(runtime.engine, work):
            released.append(row["ar_id"])
    if released:
        forget(runtime)
    return released


def _hold(conn: Connection, ar_id: int, sign: int) -> None:
    """Take (+1) or give back (-1) the reservation's bookings in the usage rows."""
    totals: dict[tuple[str, str], float] = {}
    for b in ar_db.bookings_of(conn, [ar_id])[ar_id]:
        key = (b["scope"], b["resource"])
        totals[key] = totals.get(key, 0.0) + sign * float(b["amount"])
    ar_db.change_usage(conn, totals)


# ---------------------------------------------------------------- qralter
class ReservationChange(BaseModel):
    """What qralter changes (the body of PATCH /reservations/{id}): each field given, the others left."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    users: list[str] | None = None
    mail_options: str | None = None
    mail_list: list[str] | None = None
    end: datetime | None = None
    duration: str | None = None

    @field_validator("end")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("a time must carry its zone")
        return value


def alter(runtime: Runtime, identity: Identity, ar_id: int, changes: ReservationChange, now: datetime) -> dict[str, Any]:
    """qralter: change the name, access list, mail, or end (-e) / duration (-d) while waiting or running.

    A longer window is checked against the calendar again (the other
    reservations and the running jobs), under the same locks as a grant; a
    new access list against the queues already granted.
    """
    values: dict[str, Any] = {}
    if changes.name is not None:
        values["name"] = check_name(changes.name)
    if changes.mail_options is not None:
        values["mail_options"] = parse_mail_options(changes.mail_options)
    if changes.mail_list is not None:
        values["mail_list"] = ",".join(parse_mail_list(changes.mail_list))
    usersets = runtime.config.cluster.usersets
    acl = access.parse_acl(changes.users, usersets) if changes.users is not None else None
    if acl is not None:
        values["acl"] = json.dumps(list(acl))
    duration = parse_time_span(changes.duration) if changes.duration else None
    cands = {(c.queue, c.host): c for c in candidates(runtime).candidates}
    policy = services_access.policy(runtime)

    def work(conn: Connection) -> dict[str, Any]:
        row = ar_db.get(conn, ar_id)
        if row is None or not services_access.may_see_reservation(identity, row, policy, usersets):
            raise NotFound(f"advance reservation {ar_id} does not exist")
        if not access.may_administer(identity.role, identity.user, row["owner"]):
            raise Forbidden(f"{identity.user} is not allowed to modify advance reservation {ar_id}")
        if row["state"] not in (ARState.WAITING, ARState.RUNNING):
            raise Conflict(f"advance reservation {ar_id} can only be changed while waiting or running "
                           f"(it is in state {row['state']})")
        granted = json.loads(row["granted"])
        if acl is not None:
            users = access.acl_users(acl, usersets)
            for g in granted:
                cand = cands.get((g["queue"], g["host"]))
                reason = access.queue_denies(cand.params if cand else {}, users, acl, usersets)
                if reason:
                    raise Conflict(f"refused: the new access list does not fit queue {g['queue']}: {reason}")
        if changes.end is not None or duration is not None:
            window = Window(row["start_time"], changed_end(row["start_time"], now, changes.end, duration))
            bookings = ar_db.bookings_of(conn, [ar_id])[ar_id]
            if window.end > row["end_time"]:
                ar_db.lock_scopes(conn, {b["scope"] for b in bookings})
                calendar, _, _ = read_calendar(runtime, conn, now, exclude=ar_id)
                for b in bookings:
                    capacity = _capacity(cands, b)
                    if capacity is None:
                        continue
                    free = calendar.free((b["scope"], b["resource"]), capacity, window.start, window.end)
                    if b["amount"] > free + 1e-9:
                        raise Conflict(f"refused: {b['resource']} at {b['scope']}: {b['amount']:g} reserved, only "
                                       f"{max(free, 0):g} free until the new end")
            values["end_time"] = window.end
        if values:
            ar_db.update_fields(conn, ar_id, {**values, "updated": now})
        return {"ar_id": ar_id, "message": f"{identity.user} modified advance reservation {ar_id}"}

    result = run_in_transaction(runtime.engine, work)
    forget(runtime)
    return result


def _capacity(cands: dict[tuple[str, str | None], Candidate], booking: dict[str, Any]) -> float | None:
    cand = cands.get((booking["queue"], booking["host"] or None))
    if cand is None:
        return None
    for level in cand.levels:
        if level.scope == booking["scope"] and booking["resource"] in level.fixed:
            return float(level.fixed[booking["resource"]])
    return None


# ---------------------------------------------------------------- the lifecycle agent
def lost_queues(runtime: Runtime, granted: list[dict[str, Any]]) -> list[str]:
    """Granted queues (or hosts) that are gone: removed from the configuration or disabled."""
    resources = runtime.resources_for(None)
    hosts = set(configured_hosts(runtime))
    out = []
    for g in granted:
        try:
            ref = QueueRef.parse(g["queue"])
        except InvalidInput:
            out.append(f"queue {g['queue']} is unknown")
            continue
        if not resources.has_queue(ref):
            out.append(f"queue {g['queue']} is no longer configured")
        elif _disabled(resources.queue_parameter_map(ref).get("Disabled")):
            out.append(f"queue {g['queue']} is disabled")
        elif g.get("host") and g["host"] not in hosts:
            out.append(f"host {g['host']} is no longer configured")
    return out


def _disabled(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "yes", "1") if value is not None else False


def manage(runtime: Runtime, now: datetime) -> dict[str, Any]:
    """One round of the reservation_manager agent: w -> r at the start (resources taken),
    r -> x at the end (jobs killed first, resources given back), E/W when a granted
    queue is lost and back when it returns; mail on -m b/e/a. Safe to run twice at once:
    every change is conditional on the state read."""
    report = {"started": [], "ended": [], "error": [], "recovered": [],
              "released": release_deleted(runtime, now)}
    with reading(runtime.engine) as conn:
        rows = ar_db.list_reservations(conn, [s.value for s in ACTIVE])
    for row in rows:
        lost = lost_queues(runtime, json.loads(row["granted"]))
        target = due_state(row["state"], row["start_time"], row["end_time"], now, bool(lost))
        if target == row["state"]:
            continue
        effects = effects_of(row["state"], target, row["mail_options"], "; ".join(lost))
        if target is ARState.EXITED:
            ended = f"Killed: advance reservation {row['ar_id']} ended"
            moved = finish(runtime, row["ar_id"], ARState.EXITED, ended, now)
        else:
            moved = _move(runtime, row, target, "; ".join(lost), now)
            if moved:
                forget(runtime)
        if moved:
            report[effects.report].append(row["ar_id"])
            for event in effects.mails:
                notify(runtime, row, event)
    return report


def _move(runtime: Runtime, row: dict[str, Any], target: ARState, message: str, now: datetime) -> bool:
    started_before = row["state"] in {s.value for s in STARTED}
    started_after = target in STARTED

    def work(conn: Connection) -> bool:
        if not ar_db.set_state(conn, row["ar_id"], [row["state"]], target.value, now, message):
            return False
        if started_after and not started_before:
            _hold(conn, row["ar_id"], +1)
        return True

    return run_in_transaction(runtime.engine, work)


def notify(runtime: Runtime, row: dict[str, Any], event: str) -> None:
    """Mail the owner and the -M addresses about the reservation."""
    recipients = [a for a in row["mail_list"].split(",") if a] or [row["owner"]]
    subject = f"Advance reservation {row['ar_id']} ({row['name'] or 'no name'}) {event}"
    body = (f"Advance reservation {row['ar_id']} of {row['owner']} {event}.\n"
            f"Start: {row['start_time'].isoformat()}\nEnd:   {row['end_time'].isoformat()}\n")
    mail.send(runtime.config.settings.smtp, recipients, subject, body)


# ---------------------------------------------------------------- for the Matcher and submission
def forget(runtime: Runtime) -> None:
    runtime.caches.reservations.forget()


def snapshot(runtime: Runtime, now: datetime) -> Snapshot | None:
    """The active reservations as the Matcher sees them, cached briefly
    (caches.RESERVATIONS_TTL); None when there are none."""

    def load() -> tuple[ReservationView, ...]:
        with reading(runtime.engine) as conn:
            rows = ar_db.list_reservations(conn, [s.value for s in ACTIVE])
            bookings = ar_db.bookings_of(conn, [r["ar_id"] for r in rows]) if rows else {}
        return tuple(_matcher_view(r, bookings[r["ar_id"]]) for r in rows)

    views = runtime.caches.reservations.get(load)
    if not views:
        return None
    return Snapshot(now=now, reservations=views, duration_offset=runtime.config.settings.duration_offset)


def _matcher_view(row: dict[str, Any], bookings: list[dict[str, Any]]) -> ReservationView:
    return ReservationView(
        ar_id=row["ar_id"], state=row["state"], start=row["start_time"], end=row["end_time"],
        hard_error=bool(row["hard_error"]), acl=tuple(json.loads(row["acl"])),
        bookings=tuple((b["scope"], b["resource"], float(b["amount"]), b["queue"], b["host"] or None)
                       for b in bookings),
    )


def check_job(runtime: Runtime, identity: Identity, ar_id: int, hard: dict[str, Any], slots: int,
              now: datetime) -> float:
    """A job asking for reservation ``ar_id`` (specs/003 5.3.2.1): it exists, the user is on its
    access list, its h_rt fits, and it requests only what the reservation holds.

    Returns the runtime limit every job of the reservation has (specs/003
    5.2.2.1.1): the reservation's duration minus duration_offset."""
    with reading(runtime.engine) as conn:
        row = ar_db.get(conn, ar_id)
        bookings = ar_db.bookings_of(conn, [ar_id])[ar_id] if row else []
    usersets = runtime.config.cluster.usersets
    hidden = row is not None and not services_access.may_see_reservation(
        identity, row, services_access.policy(runtime), usersets)
    if row is None or row["state"] in FINAL or hidden:
        raise InvalidInput(f"-ar: advance reservation {ar_id} does not exist")
    if not access.on_acl(identity.user, json.loads(row["acl"]), usersets):
        raise Forbidden(f"-ar: {identity.user} has no access to advance reservation {ar_id}")
    held = [(b["resource"], float(b["amount"])) for b in bookings]
    return admission.runtime_limit(ar_id, row["start_time"], row["end_time"], hard, slots, held, now,
                                   runtime.config.settings.duration_offset, runtime.read_stored_complexes())


def reserved_slots(runtime: Runtime) -> dict[str, float]:
    """Slots reserved now (by running reservations) per scope, for `wms queues`."""
    with reading(runtime.engine) as conn:
        rows = ar_db.active_bookings(conn, [s.value for s in STARTED])
        held = [r["ar_id"] for r in ar_db.deleted_holding(conn, RELEASE_AT) if release_time(r)]
        rows += [b for bookings in ar_db.bookings_of(conn, held).values() for b in bookings]
    out: dict[str, float] = {}
    for b in rows:
        if b["resource"] == "slots":
            out[b["scope"]] = out.get(b["scope"], 0.0) + float(b["amount"])
    return out
