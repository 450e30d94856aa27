"""Pilots and the SiteDirector's transactions (specs/002 "SiteDirectors").

The SiteDirector agent (agents/site_director.py) calls, per run:

1. :func:`refresh_pilots`: asks each backend for the state of the active
   pilots and stores it, with the number of jobs each has taken;
2. :func:`waiting_jobs_per_queue`: how many waiting jobs every configured
   queue could run (one grouped query, then the match framework's queue
   phase per task queue: its static phase, cached per task queue, queue
   and pools in the cache the Matcher uses, and the advance reservations);
3. :func:`reserve_pilots` per queue and VO with work: under the queue's
   lock row, counts its pilots (all of them, and the VO's), applies the
   queue's limits and the VO's (a VO block of the queue may cap that VO's
   pilots), records the new pilots as Submitted and issues each its own
   token (the VO's, bound to the pilot), in one transaction: two directors
   at once never both fill the same shortfall (docs/agents.md);
4. :func:`launch_pilots`: starts the reserved pilots through the queue's
   backend, each with its token, and stores their backend references (or
   Aborted).

A pilot's token lives ``pilot_token_lifetime``: the director renews it
while the pilot waits in its batch system (:func:`refresh_pilots`), the
pilot itself while it runs, and it is revoked when the pilot ends.

:func:`list_pilots` is what `wms pilots` and GET /api/v1/pilots show.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from sqlalchemy.engine import Connection

from wms.core import pilot_backoff
from wms.core.errors import InvalidInput
from wms.core.pilot_backoff import PilotOutcome
from wms.core.pilot_backends import NO_ISOLATION, PILOT_OPTIONS
from wms.core.identity import Identity
from wms.core.paging import Page, Slice
from wms.core.resources import VO_KEY, ParameterMap, QueueRef
from wms.core.match import framework
from wms.core.match.framework import LAYERS
from wms.core.scheduling import parameter
from wms.db.engine import reading
from wms.db import pilots as pilots_db
from wms.db import pools as pools_db
from wms.db import tokens as tokens_db
from wms.backends.arc import ArcBackend
from wms.backends.registry import BACKEND_TYPES
from wms.services import reservations as reservations_service
from wms.backends.base import PilotArgs, PilotLauncher
from wms.services.matcher import queue_context, static_verdicts, task_queue_views
from wms.services.retry import run_in_transaction
from wms.services.runtime import Runtime
from wms.services.tokens import default_lifetime, store_token

# A pilot recorded but never handed to its backend (the director died in
# between) stops counting after this long.
UNLAUNCHED_TIMEOUT = timedelta(minutes=10)
# Limits of a queue that does not state them.
DEFAULT_MAX_WAITING_PILOTS = 10
DEFAULT_MAX_TOTAL_PILOTS = 100
# Seconds added to an emulated queue's CPUTime in the pilot's --cpu-time-left.
CPU_TIME_MARGIN = 600
PILOT_USER = "site-director"

log = logging.getLogger(__name__)


def pilot_identity(vo: str, pilot_id: str, slots: int | None = None) -> Identity:
    """Who a SiteDirector pilot of ``vo`` is: the VO's pilot role, bound to the
    pilot, holding at most ``slots`` (the queue's slots per pilot, the
    pilot's ``--slots``): a payload that steals the token cannot declare more."""
    return Identity(user=PILOT_USER, group=f"{vo}_pilot", vo=vo, role="pilot", pilot_id=pilot_id, slots=slots)


# ---------------------------------------------------------------- the launcher
def server_url(runtime: Runtime) -> str:
    """The URL pilots talk to: WMS_URL, else wms.yaml ``bind`` (a wildcard address as loopback)."""
    url = os.environ.get("WMS_URL")
    if url:
        return url
    host, port = runtime.config.settings.bind_host, runtime.config.settings.bind_port
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def make_launcher(
    runtime: Runtime,
    *,
    url: str | None = None,
    log_dir: Path | str = "var/pilots",
    pilot_options: Sequence[str] = (),
    backends: Mapping[str, Any] | None = None,
) -> PilotLauncher:
    """A launcher; ``backends`` default to one of each type in
    BACKEND_TYPES, each writing pilot logs to ``log_dir``. (Pilots' tokens
    are issued per pilot by :func:`reserve_pilots`.)"""
    if backends is None:
        backends = {name: kind(log_dir=log_dir) for name, kind in BACKEND_TYPES.items()}
        # An ARC pilot's reference names its credential by a digest: the
        # backend finds the files' paths in the queues' parameters.
        backends["arc"] = ArcBackend(log_dir=log_dir, configured=lambda: configured_options(runtime, "arc"))
    return PilotLauncher(url=url or server_url(runtime), backends=dict(backends),
                         pilot_options=tuple(pilot_options))


def configured_options(runtime: Runtime, backend_name: str) -> list[dict[str, Any]]:
    """The parameters ``backend_name`` reads of every queue that names it,
    as every VO sees them (a VO block may give a VO credentials of its own)."""
    backend = BACKEND_TYPES[backend_name]
    found = []
    for vo in [None, *sorted(_vo_block_names(runtime.config.resources))]:
        resources = runtime.resources_for(vo)
        for ref in resources.queues():
            params = resources.queue_parameter_map(ref)
            if parameter(params, "Backend") == backend_name:
                found.append(backend_options(backend, params))
    return found


def _vo_block_names(node: Any) -> set[str]:
    """The VOs resources.yaml has a VO block for, at any level."""
    names: set[str] = set()
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == VO_KEY and isinstance(value, Mapping):
                names.update(str(name) for name in value)
            names |= _vo_block_names(value)
    return names


# ---------------------------------------------------------------- reading
def list_pilots(runtime: Runtime, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every pilot, as `wms pilots` shows them: SiteDirector pilots oldest first, then those
    started by hand. The jobs an active pilot has taken are counted now, not at the
    SiteDirector's last look; a pilot still recorded Submitted that has taken one runs. Pilots
    started by hand have no record: those that declared themselves are listed from their
    tokens while the token lives (:func:`hand_pilot_view`)."""
    now = now or datetime.now(timezone.utc)
    with reading(runtime.engine) as conn:
        return _views(conn, pilots_db.list_pilots(conn), tokens_db.declared_hand_pilots(conn, now))


# The two parts of the pilots' pages, in their order: a cursor's key is "d:<pilot id>" or
# "h:<pilot id>" (the last pilot of the page before, and its part).
DIRECTOR, BY_HAND_PART = "d", "h"


def list_pilots_page(runtime: Runtime, now: datetime, page: Page) -> Slice:
    """One page of the pilots: the SiteDirector's by pilot id, then those started by hand by
    pilot id, each part read in the database's own order of its index (pilot ids are text, and
    databases order text each their own way: the two parts are never merged in Python)."""
    part, _, after = (page.after or f"{DIRECTOR}:").partition(":")
    if part not in (DIRECTOR, BY_HAND_PART):
        raise InvalidInput("cursor: not a cursor this server gave out (it is opaque: pass back the `next` cursor "
                           "of the page before, unchanged)")
    rows: list[dict[str, Any]] = []
    hand: list[dict[str, Any]] = []
    next_after = None
    with reading(runtime.engine) as conn:
        if part == DIRECTOR:
            rows = pilots_db.list_pilots(conn, after=after or None, limit=page.size + 1)
            if len(rows) > page.size:
                rows = rows[:page.size]
                next_after = f"{DIRECTOR}:{rows[-1]['pilot_id']}"
            after = ""
        left = page.size - len(rows)
        if next_after is None:
            hand = tokens_db.declared_hand_pilots(conn, now, after=after or None, limit=left + 1)
            if len(hand) > left:
                hand = hand[:left]
                next_after = f"{BY_HAND_PART}:{hand[-1]['pilot_id'] if hand else ''}"
        views = _views(conn, rows, hand)
    return Slice(views, next_after)


def _views(conn: Connection, rows: list[dict[str, Any]], hand: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The views of SiteDirector pilots (``rows``) and of pilots started by hand (their tokens)."""
    live = pilots_db.jobs_run(conn, [r["pilot_id"] for r in rows if r["state"] in pilots_db.ACTIVE_STATES]
                              + [r["pilot_id"] for r in hand])
    views = []
    for row in rows:
        if row["pilot_id"] in live:
            jobs_run = live[row["pilot_id"]]
            state = pilots_db.RUNNING if row["state"] == pilots_db.SUBMITTED and jobs_run else row["state"]
            row = {**row, "jobs_run": jobs_run, "state": state}
        views.append(pilot_view(row))
    views.extend(hand_pilot_view(row, live.get(row["pilot_id"], 0)) for row in hand)
    return views


# The Backend of a pilot started by hand (`wms-pilot` with a token of `wms admin token create`).
BY_HAND = "by hand"


def pilot_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """A SiteDirector pilot's record as `wms pilots` shows it."""
    return {
        "PilotID": row["pilot_id"],
        "Queue": f"{row['site']}/{row['ce']}/{row['queue']}",
        "VO": row["vo"] or "",
        "Backend": row["backend"],
        "BackendRef": row["backend_ref"],
        "State": row["state"],
        "JobsRun": row["jobs_run"],
        "Submitted": row["submitted"].isoformat(),
        "LastUpdate": row["last_update"].isoformat(),
        **isolation_view(row, row["state"]),
    }


def hand_pilot_view(token: Mapping[str, Any], jobs_run: int) -> dict[str, Any]:
    """A pilot started by hand, from its token: no queue (it may ask for any),
    Running while its token lives, since the token was made."""
    created = token["created"].isoformat()
    return {"PilotID": token["pilot_id"], "Queue": "", "VO": token["vo"], "Backend": BY_HAND, "BackendRef": "",
            "State": pilots_db.RUNNING, "JobsRun": jobs_run, "Submitted": created, "LastUpdate": created,
            **isolation_view(token, pilots_db.RUNNING)}


# The warning of an active pilot that runs payloads without isolation.
UNISOLATED = "runs payloads without isolation"


def isolation_view(row: Mapping[str, Any], state: str) -> dict[str, Any]:
    """Isolation (bubblewrap, apptainer, none; "" when the pilot has not said), its
    note, and the operators' Warning: set for a pilot in ``state`` Submitted or
    Running that runs payloads without isolation (an ended one runs nothing)."""
    isolation, note = row["isolation"] or "", row["isolation_note"] or ""
    warning = ""
    if isolation == NO_ISOLATION and state in pilots_db.ACTIVE_STATES:
        warning = f"{UNISOLATED}: {note}" if note else UNISOLATED
    return {"Isolation": isolation, "IsolationNote": note, "Warning": warning}


# ---------------------------------------------------------------- 1. refresh
def refresh_pilots(runtime: Runtime, launcher: PilotLauncher, now: datetime) -> dict[str, int]:
    """Ask the backends about every active pilot; store states and jobs run.

    Returns how many pilots changed state, by new state.
    """
    with reading(runtime.engine) as conn:
        active = pilots_db.active_pilots(conn)
    if not active:
        return {}
    states: dict[str, str] = {}
    by_backend: dict[str, list[dict[str, Any]]] = {}
    for pilot in active:
        if pilot["backend_ref"]:
            by_backend.setdefault(pilot["backend"], []).append(pilot)
        elif now - pilot["submitted"] > UNLAUNCHED_TIMEOUT:
            states[pilot["pilot_id"]] = pilots_db.ABORTED
    for name, group in by_backend.items():
        backend = launcher.backends.get(name)
        if backend is None:
            continue
        answer = backend.status([p["backend_ref"] for p in group])
        for pilot in group:
            state = answer.get(pilot["backend_ref"])
            if state is not None and state != pilot["state"]:
                states[pilot["pilot_id"]] = state
    ids = [p["pilot_id"] for p in active]
    lifetime = default_lifetime(runtime.config.settings, "pilot")

    def store(conn) -> dict[str, int]:
        counts = pilots_db.jobs_run(conn, ids)
        changed: dict[str, int] = {}
        ended: list[str] = []
        waiting: list[str] = []
        for pilot in active:
            pid = pilot["pilot_id"]
            state = states.get(pid, pilot["state"])
            jobs_run = counts.get(pid, 0)
            if state == pilots_db.SUBMITTED:
                waiting.append(pid)
            if state == pilot["state"] and jobs_run == pilot["jobs_run"]:
                continue
            if pilots_db.set_state(conn, pid, state, now, jobs_run=jobs_run) and state != pilot["state"]:
                changed[state] = changed.get(state, 0) + 1
                if state in pilots_db.FINAL_STATES:
                    ended.append(pid)
        # A pilot waiting in its batch system cannot renew its own token yet:
        # the director does, so that it starts with a live one. An ended
        # pilot's token is of no more use to anyone.
        tokens_db.extend_pilot_tokens(conn, waiting, now + lifetime)
        tokens_db.revoke_pilot_tokens(conn, ended, now)
        return changed

    return run_in_transaction(runtime.engine, store)


# ---------------------------------------------------------------- 2. work per queue
def waiting_jobs_per_queue(runtime: Runtime, queues: Sequence[QueueRef] | None = None,
                           now: datetime | None = None) -> dict[str, dict[str, Any]]:
    """For each queue (default: every configured one) by full name: its
    ``pools`` (getSubmitPoolsForQueue) and the ``waiting`` jobs it could run.

    A task queue counts for a queue if the queue phase of the match
    framework allows it there at ``now`` (default: the current time): its
    static phase (its SubmitPool is one of the queue's pools, or it has
    none; the scheduling rules, Site, BannedSite, Platform, CPUTime, Tags,
    NumberOfProcessors, and a Requirements expression allow the queue; the
    global and queue levels could ever offer what it requests), and what
    the queue alone decides now. Pilots are not sent for jobs the queue can
    never run, nor for jobs of an advance reservation that is not running
    or holds nothing in the queue, nor for jobs without a runtime limit
    (h_rt) to a queue an advance reservation holds as a whole.

    ``eligible`` counts every job the queue could run; ``waiting`` shares
    each job among the queues that could run it (a job eligible on four
    queues counts a quarter on each, rounded up per queue). DIRAC counts
    every job on every eligible queue, so a job runnable in ten places
    draws ten pilots; sharing keeps the pilots in proportion to the work.
    ``by_vo`` splits ``waiting`` by the jobs' VO (a pilot runs one VO's jobs).
    """
    resources = runtime.resources_for(None)
    refs = list(queues) if queues is not None else resources.queues()
    out: dict[str, dict[str, Any]] = {}
    with reading(runtime.engine) as conn:
        waiting = pilots_db.waiting_jobs_by_task_queue(conn)
        views = task_queue_views(runtime, conn, [tq_id for tq_id, _, _, _ in waiting])
        for ref in refs:
            out[ref.name] = {"pools": pools_db.get_pools_for_queue(conn, ref.site, ref.ce, ref.queue), "waiting": 0}
    static = static_verdicts(runtime)
    snapshot = reservations_service.snapshot(runtime, now or datetime.now(timezone.utc))
    eligible_on: dict[int, list[str]] = {}
    for ref in refs:
        entry = out[ref.name]
        entry["eligible"] = 0
        ctx = queue_context(runtime, ref, tuple(entry["pools"]), reservations=snapshot)
        for tq_id, _, _, count in waiting:
            # The static verdict is the Matcher's (cached); the queue phase adds what time decides.
            if tq_id in views and framework.evaluate(LAYERS, ctx, views[tq_id], queue_only=True,
                                                     cache=static).allowed:
                entry["eligible"] += count
                eligible_on.setdefault(tq_id, []).append(ref.name)
    shares: dict[str, float] = {}
    vo_shares: dict[str, dict[str, float]] = {}
    for tq_id, _, vo, count in waiting:
        places = eligible_on.get(tq_id, [])
        for name in places:
            shares[name] = shares.get(name, 0.0) + count / len(places)
            per_vo = vo_shares.setdefault(name, {})
            per_vo[vo] = per_vo.get(vo, 0.0) + count / len(places)
    for name, entry in out.items():
        entry["waiting"] = math.ceil(shares.get(name, 0.0) - 1e-9)
        entry["by_vo"] = {vo: math.ceil(share - 1e-9) for vo, share in sorted(vo_shares.get(name, {}).items())}
    return out


#: The pilots read to count a queue's empty rounds: enough for the longest pause.
BACKOFF_HISTORY = 200


def paused_until(runtime: Runtime, ref: QueueRef, vo: str | None) -> datetime | None:
    """When the SiteDirector may send ``vo``'s pilots to ``ref`` again after
    rounds of pilots that ran nothing there (None: now; core/pilot_backoff.py)."""
    settings = runtime.config.settings
    with reading(runtime.engine) as conn:
        rows = pilots_db.recent_outcomes(conn, ref.site, ref.ce, ref.queue, vo, BACKOFF_HISTORY)
    outcomes = [PilotOutcome(row["submitted"], row["last_update"], int(row["jobs_run"]),
                             row["state"] in pilots_db.FINAL_STATES) for row in rows]
    base = settings.empty_pilot_backoff
    return pilot_backoff.paused_until(outcomes, base, max(base, settings.empty_pilot_backoff_max))


@dataclass(frozen=True)
class QueueLimits:
    max_waiting: int
    max_total: int
    slots: int | None          # the queue's complex_values slots; None = no limit
    slots_per_pilot: int

    @classmethod
    def of(cls, params: ParameterMap) -> "QueueLimits":
        max_waiting = parameter(params, "MaxWaitingPilots")
        max_total = parameter(params, "MaxTotalPilots")
        complex_values = parameter(params, "complex_values") or {}
        slots = next((v for k, v in dict(complex_values).items() if str(k).lower() == "slots"), None)
        per_pilot = parameter(params, "NumberOfProcessors")
        return cls(
            max_waiting=int(max_waiting) if max_waiting is not None else DEFAULT_MAX_WAITING_PILOTS,
            max_total=int(max_total) if max_total is not None else DEFAULT_MAX_TOTAL_PILOTS,
            slots=int(float(slots)) if slots is not None else None,
            slots_per_pilot=max(1, int(per_pilot)) if per_pilot is not None else 1,
        )

    def room(self, waiting_pilots: int, running_pilots: int) -> int:
        """How many more pilots MaxWaitingPilots, MaxTotalPilots and the queue's slots allow."""
        room = [self.max_waiting - waiting_pilots, self.max_total - waiting_pilots - running_pilots]
        if self.slots is not None:
            room.append(self.slots // self.slots_per_pilot - waiting_pilots - running_pilots)
        return max(0, min(room))

    def pilots_to_submit(self, waiting_jobs: int, waiting_pilots: int, running_pilots: int) -> int:
        """DIRAC's rule: enough pilots for the waiting jobs, less those already
        waiting, within MaxWaitingPilots, MaxTotalPilots and the queue's slots."""
        needed = math.ceil(waiting_jobs / self.slots_per_pilot) - waiting_pilots
        return max(0, min(needed, self.room(waiting_pilots, running_pilots)))


def pilots_for_vo(queue: QueueLimits, vo: QueueLimits, waiting_jobs: int, queue_counts: Mapping[str, int],
                  vo_counts: Mapping[str, int]) -> int:
    """New pilots for one VO's ``waiting_jobs`` on a queue: DIRAC's rule on
    the VO's own pilots within the VO's limits (the queue's VO block, else
    the queue's), and never beyond the room the queue's limits leave for
    all its pilots."""
    for_vo = vo.pilots_to_submit(waiting_jobs, vo_counts[pilots_db.SUBMITTED], vo_counts[pilots_db.RUNNING])
    return min(for_vo, queue.room(queue_counts[pilots_db.SUBMITTED], queue_counts[pilots_db.RUNNING]))


# ---------------------------------------------------------------- 3. reserve
def new_pilot_id(ref: QueueRef) -> str:
    return f"{ref.site}.{ref.queue}-{secrets.token_hex(6)}".replace("/", "_").replace(":", "_")


@dataclass(frozen=True)
class Reserved:
    """Pilots recorded for one queue and VO, each with its own token."""

    pilot_ids: list[str]
    tokens: dict[str, str]
    counts: dict[str, int]        # the queue's pilots by state, before these
    vo_counts: dict[str, int]     # the VO's pilots there by state, before these


def reserve_pilots(
    runtime: Runtime, ref: QueueRef, backend: str, vo: str, waiting_jobs: int, limits: QueueLimits,
    vo_limits: QueueLimits, now: datetime,
) -> Reserved:
    """Under the queue's lock: count its pilots and the VO's, record as many
    new Submitted pilots of ``vo`` as the limits allow (:func:`pilots_for_vo`)
    and issue each a token of ``vo`` bound to it, living pilot_token_lifetime
    and holding at most the queue's slots per pilot."""
    lifetime = default_lifetime(runtime.config.settings, "pilot")

    def work(conn) -> Reserved:
        pilots_db.lock_queue(conn, ref.site, ref.ce, ref.queue, now)
        counts = pilots_db.count_by_state(conn, ref.site, ref.ce, ref.queue)
        vo_counts = pilots_db.count_by_state(conn, ref.site, ref.ce, ref.queue, vo=vo)
        n = pilots_for_vo(limits, vo_limits, waiting_jobs, counts, vo_counts)
        ids = [new_pilot_id(ref) for _ in range(n)]
        pilots_db.add_pilots(conn, [
            {"pilot_id": pid, "site": ref.site, "ce": ref.ce, "queue": ref.queue, "backend": backend,
             "state": pilots_db.SUBMITTED, "submitted": now, "vo": vo}
            for pid in ids
        ])
        tokens = {pid: store_token(conn, pilot_identity(vo, pid, limits.slots_per_pilot), now, lifetime=lifetime,
                                   description=f"SiteDirector pilot {pid}") for pid in ids}
        return Reserved(ids, tokens, counts, vo_counts)

    return run_in_transaction(runtime.engine, work)


# ---------------------------------------------------------------- 4. launch
def pilot_argv(ref: QueueRef, pools: Sequence[str], params: ParameterMap, limits: QueueLimits,
               emulates_queue: bool, extra: Sequence[str] = ()) -> list[str]:
    """The ``wms-pilot`` options for a pilot of ``ref`` serving ``pools``.

    ``--pools`` is always given (an empty list serves only jobs without
    Requirements), so the pilot never has to ask getSubmitPoolsForQueue. A
    backend that only emulates the queue also passes the queue's Platform
    and CPUTime, which a real node would show by itself.
    """
    argv = ["--site", ref.site, "--ce", ref.ce, "--queue", ref.queue, "--pools", ",".join(pools),
            "--slots", str(limits.slots_per_pilot)]
    if emulates_queue:
        platform = parameter(params, "Platform")
        if platform is not None and not isinstance(platform, (list, tuple)):
            argv += ["--platform", str(platform)]
        cpu_time = parameter(params, "CPUTime", "MaxCPUTime")
        if cpu_time is not None:
            # A margin, so that a job asking for the queue's whole CPUTime
            # still fits once the pilot has spent a moment starting.
            argv += ["--cpu-time-left", str(int(float(cpu_time)) + CPU_TIME_MARGIN)]
    for name, option in PILOT_OPTIONS.items():
        value = parameter(params, name)
        if value is not None:
            argv += [option, ",".join(value) if isinstance(value, (list, tuple)) else str(value)]
    return [*argv, *extra]


def backend_options(backend: Any, params: ParameterMap) -> dict[str, Any]:
    """The queue's values of the parameters ``backend`` reads (those it states)."""
    wanted = getattr(backend, "parameters", ())
    return {name: value for name in wanted if (value := parameter(params, name)) is not None}


def launch_pilots(runtime: Runtime, launcher: PilotLauncher, ref: QueueRef, backend_name: str,
                  reserved: Reserved, argv: Sequence[str], now: datetime,
                  options: Mapping[str, Any] | None = None) -> list[str]:
    """Start the reserved pilots, each with its token; store their
    references. A backend that fails marks them Aborted and revokes their
    tokens (and the error propagates). ``options``: the queue's backend
    parameters (:func:`backend_options`)."""
    pilot_ids = reserved.pilot_ids
    if not pilot_ids:
        return []
    backend = launcher.backend(backend_name)
    args = PilotArgs(url=launcher.url, tokens=dict(reserved.tokens), pilot_ids=tuple(pilot_ids), argv=tuple(argv),
                     options=dict(options or {}))
    try:
        refs = backend.submit_pilots(ref, len(pilot_ids), args)
    except Exception:
        def abort(conn) -> None:
            for pid in pilot_ids:
                pilots_db.set_state(conn, pid, pilots_db.ABORTED, now)
            tokens_db.revoke_pilot_tokens(conn, pilot_ids, now)

        run_in_transaction(runtime.engine, abort)
        raise

    def store(conn) -> None:
        for pid, backend_ref in zip(pilot_ids, refs):
            pilots_db.set_backend_ref(conn, pid, backend_ref, now)

    run_in_transaction(runtime.engine, store)
    for pid, backend_ref in zip(pilot_ids, refs):
        # One line per pilot (never its token): where it went and how to find it there.
        log.info("pilot %s submitted to %s (%s backend, %s)", pid, ref.name, backend_name, backend_ref,
                 extra={"fields": {"pilot_id": pid, "queue": ref.name, "backend": backend_name,
                                   "backend_ref": backend_ref}})
    return list(refs)
