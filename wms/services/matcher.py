"""The Matcher: a pilot asks for a job, gets one or a reason.

``request_job`` reads what it needs (candidate task queues, the usage of
the pilot's three levels) in short read transactions, evaluates the
layers in memory, then claims in ONE transaction per attempt: pick the
best waiting job of the chosen task queue (SKIP LOCKED), debit every
consumable conditionally, mark the job Matched with a lease, record the
debits and the history. A debit that does not fit rolls the attempt back
and the next task queue is tried. Nothing is handed out twice and nothing
is overbooked, whatever the number of Matchers (DESIGN.md).
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Connection, Engine

from wms.core.complexes import fits
from wms.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from wms.core.identity import Identity
from wms.core.jdl import parse_one
from wms.core.limits import MATCH_BATCH_MAX, STORED
from wms.core.match import framework, levels
from wms.core.match import quotas as quota_layer
from wms.core.match.choice import WeightedDraw
from wms.core.match.context import MatchContext, PilotRequest, TaskQueueView
from wms.core.match.framework import LAYERS, StaticVerdicts
from wms.core.match.layer import Debit
from wms.core.match.pools import admits
from wms.core.match.verdict import Code, Verdict
from wms.core.resources import QueueRef
from wms.core.states import JobStatus
from wms.db.engine import reading
from wms.db import jobs as jobs_db
from wms.db import matching as match_db
from wms.db import pools as pools_db
from wms.services.retry import run_in_transaction
from wms.services import quotas as quotas_service
from wms.services import reservations as reservations_service
from wms.services import telemetry
from wms.services.caches import TaskQueueList, WaitingGeneration
from wms.services import tokens as tokens_service
from wms.services.runtime import Runtime

log = logging.getLogger(__name__)

# The draw among task queues: one generator for the process (seeding a new
# one per request read the system's entropy each time, 1% of a request).
_RNG = random.Random()

SOURCE_MATCHER = "Matcher"
SOURCE_PILOT = "Pilot"
SOURCE_LEASES = "LeaseReaper"
SOURCE_STALLED = "StalledJobs"

NO_WAITING = "no waiting job for the pools this queue serves"


@dataclass(frozen=True)
class MatchResult:
    job: dict[str, Any] | None
    reason: str = ""
    # For a no-match, what decided it: the layer that denied the most task
    # queues (pools, reservation, quota, global, host, queue, requirements),
    # or one of telemetry's NO_CANDIDATE, TAKEN, RULES_CHANGING.
    layer: str = ""


class Denials:
    """The denials of one request. Their sentences are written only when the
    request ends without a job: most requests find one after a few denials,
    and nobody reads those."""

    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []

    def add(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)

    def __bool__(self) -> bool:
        return bool(self.verdicts)

    def reasons(self) -> dict[str, int]:
        """How many task queues each reason kept away."""
        return dict(Counter(v.reason for v in self.verdicts))

    def deciding_layer(self) -> str:
        """The layer that kept the most task queues away (the first in layer order on a tie)."""
        layers = Counter(v.layer for v in self.verdicts)
        order = {layer.name: i for i, layer in enumerate(LAYERS)}
        return min(layers, key=lambda name: (-layers[name], order.get(name, len(order)), name))


# Within one request: (scope, resource) found full -> (its usage then, the
# jobs in the way when it is an exclusive complex).
FullMemo = dict[tuple[str, str], tuple[float, list[int]]]


class _DoesNotFit(Exception):
    """A debit found its consumable full: roll this attempt back."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict


# ---------------------------------------------------------------- task queue views
def task_queue_views(runtime: Runtime, conn: Connection, tq_ids: list[int]) -> dict[int, TaskQueueView]:
    """Parsed task queues by id: built once per task queue (definitions never change)."""
    cache = runtime.caches.task_queue_views
    missing = [i for i in tq_ids if i not in cache]
    for row in match_db.get_task_queues(conn, missing):
        cache[row["tq_id"]] = levels.task_queue_view(row, runtime.complexes)
    return {i: cache[i] for i in tq_ids if i in cache}


class LazyReader:
    """A read-only connection opened only if a cache misses: most requests need none."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._conn: Connection | None = None

    def __enter__(self) -> "LazyReader":
        return self

    def __call__(self) -> Connection:
        if self._conn is None:
            self._conn = reading(self.engine)
        return self._conn

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            self._conn.close()


def waiting(runtime: Runtime, reader: LazyReader) -> WaitingGeneration:
    """The task queues with waiting jobs, and what is cached along with them (caches.Waiting)."""
    return runtime.caches.waiting.current(lambda: match_db.waiting_task_queues(reader()),
                                          lambda: _read_waiting(runtime.engine))


def _read_waiting(engine: Engine) -> TaskQueueList:
    with reading(engine) as conn:
        return match_db.waiting_task_queues(conn)


def pools_for_queue(generation: WaitingGeneration, reader: LazyReader, request: PilotRequest) -> tuple[str, ...]:
    """getSubmitPoolsForQueue for a pilot that did not say (the TaskQueueDirector case), cached
    with ``generation``."""
    cache = generation.pools
    key = request.ref.name
    if key not in cache:
        cache[key] = tuple(pools_db.get_pools_for_queue(reader(), request.site, request.ce, request.queue))
    return cache[key]


def candidates(runtime: Runtime, generation: WaitingGeneration, reader: LazyReader,
               request: PilotRequest) -> tuple[WeightedDraw, dict[int, TaskQueueView]]:
    """The task queues with waiting jobs (of ``generation``) the pilot's pools may serve, ready to
    draw from, cached with ``generation``."""
    cache = generation.candidates
    key = (request.ref.name, request.pools, request.vo)
    if key not in cache:
        # The pools layer's rule, applied to the whole list at once: the
        # candidates are cached per pools, so it is decided here only once.
        pools = frozenset(request.pools) if request.pools is not None else None
        chosen = [(tq_id, priority) for tq_id, priority, pool in generation.task_queues or []
                  if admits(pools, pool)]
        views = task_queue_views(runtime, reader(), [tq_id for tq_id, _ in chosen])
        if request.vo is not None:
            # A VO's pilot runs that VO's jobs only (its token is the VO's).
            chosen = [(t, p) for t, p in chosen if t in views and views[t].vo == request.vo]
            views = {t: views[t] for t, _ in chosen}
        cache[key] = (WeightedDraw([t for t, _ in chosen], [p for _, p in chosen]), views)
    return cache[key]


def forget_waiting_task_queues(runtime: Runtime) -> None:
    """Jobs became waiting in this process: read the list afresh next time."""
    runtime.caches.waiting.forget()


def static_verdicts(runtime: Runtime) -> StaticVerdicts:
    """The static phase's verdicts of this configuration (specs/000 "Result caching")."""
    return runtime.caches.static_verdicts


# ---------------------------------------------------------------- the request
def match_context(runtime: Runtime, request: PilotRequest, now: datetime) -> MatchContext:
    """The pilot's levels, the quota sets and the reservations, read once for the whole request."""
    table = runtime.complexes
    static = runtime.caches.levels
    key = request.ref.name
    if key not in static:
        queue_params = runtime.resources_for(None).queue_parameter_map(request.ref)
        static[key] = (levels.global_level(table, runtime.config.cluster),
                       levels.queue_level(table, request.ref, queue_params.get("complex_values") or {}))
    global_values, queue_values = static[key]
    level_values = (global_values, levels.host_level(table, runtime.config.cluster, request), queue_values)
    # No usage is read here: the claim's conditional debits decide whether a
    # consumable is full, which saves a round trip on every request and is
    # exact where a snapshot would be stale.
    rules_version, quotas = quotas_service.for_claim(runtime)
    return MatchContext(
        request=request,
        levels=level_values,
        usage={},
        complexes=table,
        pilot_ad=request.ad(),
        resources_for=runtime.resources_for,
        quotas=quotas,
        rules_version=rules_version,
        reservations=reservations_service.snapshot(runtime, now),
    )


def queue_context(runtime: Runtime, ref: QueueRef, pools: tuple[str, ...] | None, *, slots: int = 1,
                  **extra: Any) -> MatchContext:
    """A queue judged with no pilot asking (``wms why``, the SiteDirector): the
    host is unknown, so the host level and the pilot's own values wait for one.
    ``extra`` are the usage, quotas, reservations and holders to judge with."""
    request = PilotRequest(site=ref.site, ce=ref.ce, queue=ref.queue, host="", pilot_id="", pools=pools, slots=slots)
    params = runtime.resources_for(None).queue_parameter_map(ref)
    return MatchContext(
        request=request,
        levels=levels.build_levels(runtime.complexes, runtime.config.cluster, params.get("complex_values") or {},
                                   request),
        usage=extra.pop("usage", {}), complexes=runtime.complexes, pilot_ad={}, resources_for=runtime.resources_for,
        **extra,
    )


def match_debits(ctx: MatchContext, tq: TaskQueueView) -> list[Debit]:
    """Every debit of a claim (the levels' consumables, the applying quota
    rule instances, reservations applied), in key order."""
    return framework.debits(LAYERS, ctx, tq)


def validate_request(runtime: Runtime, request: PilotRequest) -> None:
    if not runtime.resources_for(None).has_queue(request.ref):
        raise InvalidInput(f"unknown queue {request.ref.name!r}")
    if request.slots < 1:
        raise InvalidInput(f"slots must be at least 1, got {request.slots}")
    if not request.pilot_id:
        raise InvalidInput("pilot_id must be given")


# Times a request starts again when the resource quota sets changed under it.
RULES_CHANGED_ATTEMPTS = 3
RULES_CHANGING = "resource quota sets are being changed: ask again"


def request_job(runtime: Runtime, request: PilotRequest, now: datetime, rng: random.Random | None = None) -> MatchResult:
    validate_request(runtime, request)
    rng = rng or _RNG
    result = MatchResult(None, RULES_CHANGING, telemetry.RULES_CHANGING)
    for _ in range(RULES_CHANGED_ATTEMPTS):
        try:
            result = _request_job(runtime, request, now, rng)
            break
        except match_db.QuotaSetsChanged:
            # Another process stored new sets (and recounted the running
            # jobs under them): adopt them now and decide afresh.
            telemetry.claim_retried(telemetry.RULES_CHANGED)
            quotas_service.adopt_now(runtime)
    telemetry.match_answered(result.layer if result.job is None else None)
    log_decision(request, result)
    return result


#: The reason of a batch that stopped because a later match failed.
BATCH_STOPPED = "matching stopped by an error after the jobs handed out; ask again"


@dataclass(frozen=True)
class BatchResult:
    """A batched request's answer: the jobs claimed, and why there were not more
    (the no-match reason; None when ``count`` jobs came or the slots ran out)."""

    jobs: list[dict[str, Any]]
    reason: str | None = None


def request_jobs(runtime: Runtime, request: PilotRequest, count: int, now: datetime,
                 rng: random.Random | None = None) -> BatchResult:
    """Up to ``count`` jobs for a pilot with ``request.slots`` free slots: one
    ``request_job`` after the other, each claimed and committed on its own,
    each offered only the slots the jobs before it left free (a job needing
    more is not handed out); the first no-match ends the batch.

    A later match that raises does not take back the jobs already claimed:
    they are committed and this pilot's, so they are answered, with
    ``BATCH_STOPPED`` as the reason; an error before any claim is raised as
    ``request_job`` raises it."""
    validate_request(runtime, request)
    if not 1 <= count <= min(MATCH_BATCH_MAX, request.slots):
        raise InvalidInput(f"count must be from 1 to {min(MATCH_BATCH_MAX, request.slots)} "
                           f"(at most {MATCH_BATCH_MAX} and at most slots, {request.slots}), got {count}")
    rng = rng or _RNG
    jobs: list[dict[str, Any]] = []
    free = request.slots
    while len(jobs) < count and free > 0:
        try:
            result = request_job(runtime, dataclasses.replace(request, slots=free), now, rng)
        except Exception:
            if not jobs:
                raise
            log.exception("pilot %s: a match failed after %d job(s) were handed out; answering those",
                          request.pilot_id, len(jobs))
            return BatchResult(jobs, BATCH_STOPPED)
        if result.job is None:
            return BatchResult(jobs, result.reason)
        jobs.append(result.job)
        free -= result.job["Slots"]
    return BatchResult(jobs)


def log_decision(request: PilotRequest, result: MatchResult) -> None:
    """The one log line of a match decision (docs/deployment.md, "Logs")."""
    fields = {"pilot_id": request.pilot_id, "queue": request.ref.name, "host": request.host}
    if result.job is not None:
        log.info("job %s matched to pilot %s on %s (%s)", result.job["JobID"], request.pilot_id,
                 request.ref.name, request.host, extra={"fields": {**fields, "job_id": result.job["JobID"]}})
    else:
        log.info("no job for pilot %s on %s (%s): %s", request.pilot_id, request.ref.name, request.host,
                 result.reason, extra={"fields": {**fields, "reason": result.reason}})


def _request_job(runtime: Runtime, request: PilotRequest, now: datetime, rng: random.Random) -> MatchResult:
    with LazyReader(runtime.engine) as reader:
        # One generation for the request: the pools and the candidates of the same list.
        generation = waiting(runtime, reader)
        if request.pools is None:
            request = dataclasses.replace(request, pools=pools_for_queue(generation, reader, request))
        draw, views = candidates(runtime, generation, reader, request)
    if not views:
        return MatchResult(None, NO_WAITING, telemetry.NO_CANDIDATE)
    # After the reader is given back: the quota sets and reservations read
    # connections of their own, and a request holding two at once could
    # exhaust the pool under a burst (each request thread may hold one).
    ctx = match_context(runtime, request, now)
    # Draw the order lazily and evaluate as we go: the first eligible task
    # queue in a weighted random order is a proportional draw among the
    # eligible ones (choice.py), so most requests evaluate a handful of task
    # queues, not all of them. Soft requests: a task queue with violations
    # waits until no eligible one without violations is left, then the
    # fewest go first.
    denials = Denials()
    full: FullMemo = {}
    with_violations: list[tuple[int, TaskQueueView]] = []
    static = static_verdicts(runtime)
    for tq_id in draw.order(rng):
        view = views[tq_id]
        verdict = framework.evaluate(LAYERS, ctx, view, cache=static).verdict
        if not verdict.allowed:
            if verdict.code is Code.ERROR:
                log.error("task queue %s on %s: %s", tq_id, request.ref.name, verdict.reason)
            denials.add(verdict)
            continue
        violations = levels.soft_violations(ctx, view) if view.soft else 0
        if violations:
            with_violations.append((violations, view))
            continue
        job = _try_claim(runtime, ctx, view, now, denials, full)
        if job is not None:
            return MatchResult(job)
    for _, view in sorted(with_violations, key=lambda pair: pair[0]):   # stable: keeps the drawn order
        job = _try_claim(runtime, ctx, view, now, denials, full)
        if job is not None:
            return MatchResult(job)
    if not denials:
        return MatchResult(None, NO_WAITING, telemetry.TAKEN)
    return MatchResult(None, summarise(denials.reasons()), denials.deciding_layer())


def explain(runtime: Runtime, request: PilotRequest, tq_id: int, now: datetime) -> framework.Diagnosis:
    """What the Matcher decides for one task queue on this pilot's request,
    every layer asked, without claiming anything: the same context, layers
    and static cache as ``request_job``."""
    validate_request(runtime, request)
    with LazyReader(runtime.engine) as reader:
        if request.pools is None:
            request = dataclasses.replace(request, pools=pools_for_queue(waiting(runtime, reader), reader, request))
        view = task_queue_views(runtime, reader(), [tq_id])[tq_id]
    ctx = match_context(runtime, request, now)
    decided = framework.evaluate(LAYERS, ctx, view, cache=static_verdicts(runtime))
    every = framework.evaluate(LAYERS, ctx, view, stop_at_first=False)
    return framework.Diagnosis(decided.verdict, every.layers)


def _try_claim(runtime: Runtime, ctx: MatchContext, view: TaskQueueView, now: datetime,
               denials: Denials, full: FullMemo) -> dict[str, Any] | None:
    debits = match_debits(ctx, view)
    for debit in debits:
        # A consumable found full earlier in this request rules out only the
        # debits that do not fit beside what was in use then: another task
        # queue may need less of it (complex(5): per job category).
        known = full.get((debit.scope, debit.resource))
        if known is not None and not fits(debit.amount, debit.capacity, known[0]):
            denials.add(_full_verdict(ctx, debit, *known))
            return None
    create_usage_rows(runtime, debits)
    try:
        return _claim(runtime, ctx, view, debits, now, full)
    except _DoesNotFit as exc:
        telemetry.claim_retried(telemetry.DOES_NOT_FIT)
        denials.add(exc.verdict)
        return None


def summarise(denials: dict[str, int]) -> str:
    """The most frequent reasons, e.g. ``queue slots full (3 task queues); ...``."""
    top = sorted(denials.items(), key=lambda item: (-item[1], item[0]))[:3]
    return "; ".join(f"{reason} ({count} task queue{'s' if count > 1 else ''})" for reason, count in top)


def _claim(runtime: Runtime, ctx: MatchContext, tq: TaskQueueView, debits: list[Debit], now: datetime,
           full: FullMemo) -> dict | None:
    """One attempt, one transaction (match_db.claim): claim the best waiting job, debit what it takes.

    A debit that does not fit rolls the whole attempt back, the claim
    included, and raises _DoesNotFit; the consumable's usage is remembered
    for the rest of this request, so task queues needing more of it than
    is free are skipped.
    """
    placement = _placement(runtime, ctx, tq, now)
    engine = runtime.engine
    try:
        job = run_in_transaction(engine, lambda conn: match_db.claim(
            conn, tq.tq_id, placement, source=SOURCE_MATCHER,
            debits=[(d.scope, d.resource, d.amount, d.capacity) for d in debits], rules_version=ctx.rules_version,
        ), single_statement=match_db.claims_on_autocommit(engine),
            on_retry=lambda: telemetry.claim_retried(telemetry.CONFLICT))
    except match_db.DebitDoesNotFit as exc:
        with reading(engine) as conn:
            raise _DoesNotFit(_remember_full(conn, ctx, debits[exc.index], full)) from None
    if job is None:
        return None
    return job_payload(job, tq, runtime.config.settings.match_lease)


def _placement(runtime: Runtime, ctx: MatchContext, tq: TaskQueueView, now: datetime) -> match_db.Placement:
    request = ctx.request
    return match_db.Placement(
        pilot_id=request.pilot_id, site=request.site, queue=request.ref.name, host=request.host, slots=tq.slots,
        lease_expires=now + timedelta(seconds=runtime.config.settings.match_lease),
        minor_status=f"Assigned to pilot {request.pilot_id}", now=now,
    )


def _remember_full(conn: Connection, ctx: MatchContext, debit: Debit,
                   full: FullMemo) -> Verdict:
    """The denial of a full consumable or quota instance, read once; its usage
    (and for an exclusive complex the jobs in the way) kept for the rest of the request."""
    used = match_db.used(conn, debit.scope, debit.resource)
    holders = match_db.holders(conn, debit.scope, debit.resource) if isinstance(debit, levels.ExclusiveDebit) else []
    full[(debit.scope, debit.resource)] = (used, holders)
    return _full_verdict(ctx, debit, used, holders)


def _full_verdict(ctx: MatchContext, debit: Debit, used: float, holders: list[int]) -> Verdict:
    if isinstance(debit, quota_layer.QuotaDebit):
        return quota_layer.full_verdict(ctx, debit, used)
    if isinstance(debit, levels.ExclusiveDebit):
        return levels.exclusive_verdict(ctx, debit, used, holders)
    return levels.full_verdict(ctx, debit, used)


def create_usage_rows(runtime: Runtime, debits: list[Debit]) -> None:
    """The usage rows a claim debits (a new queue, host, quota instance, ...),
    created and committed before the claim, once per process (rows are never
    deleted). Created inside the claim, they would be marked known to this
    process's other threads before they are committed, or even when the
    claim rolls back; a debit on a missing row fails as if it were full."""
    known = runtime.caches.usage_rows
    missing = [(d.scope, d.resource) for d in debits if (d.scope, d.resource) not in known]
    if missing:
        run_in_transaction(runtime.engine, lambda conn: match_db.ensure_usage_rows(conn, missing))
        known.update(missing)


def job_payload(job: dict[str, Any], tq: TaskQueueView, lease: int) -> dict[str, Any]:
    """What the pilot needs to run a claimed job (job_id, jdl, cpu_time, attempt)."""
    job_id, jdl_text = job["job_id"], job["jdl"]
    description = parse_one(jdl_text, f"job {job_id}", limits=STORED)
    return {
        "JobID": job_id,
        "Attempt": job["attempt"],
        "JDL": jdl_text,
        "Executable": description.executable,
        "Arguments": description.arguments or "",
        "Slots": tq.slots,
        "Lease": lease,
        "Limits": levels.limits(tq, job["cpu_time"]),
        "Environment": {"WMS_JOB_ID": str(job_id)},
    }


# ---------------------------------------------------------------- the pilot's reports
PILOT_TRANSITIONS = {
    JobStatus.RUNNING: (JobStatus.MATCHED,),
    JobStatus.DONE: (JobStatus.RUNNING, JobStatus.MATCHED),
    JobStatus.FAILED: (JobStatus.RUNNING, JobStatus.MATCHED),
}


def pilot_status(
    runtime: Runtime, identity: Identity, job_id: int, pilot_id: str, status: str, minor_status: str,
    exit_code: int | None, now: datetime, attempt: int | None = None,
) -> dict[str, Any]:
    """The pilot confirms (Running) or finishes (Done/Failed) a job it holds.

    Refused with Conflict when the job is no longer this pilot's (killed,
    lease expired and given to another), or no longer in ``attempt`` (the
    hand-out the pilot quotes) because it was handed out again: the pilot
    must stop it.
    """
    try:
        new = JobStatus(status)
    except ValueError:
        raise InvalidInput(f"status must be Running, Done or Failed, got {status!r}") from None
    if new not in PILOT_TRANSITIONS:
        raise InvalidInput(f"status must be Running, Done or Failed, got {status!r}")
    minor = minor_status or {JobStatus.RUNNING: "Job started", JobStatus.DONE: "Execution complete"}.get(new, "")
    values: dict[str, Any] = {"status": new.value, "minor_status": minor, "last_update_time": now}
    if new is JobStatus.RUNNING:
        values.update(start_time=now, heartbeat_time=now, lease_expires=None)
    else:
        values.update(end_time=now, exit_code=exit_code, lease_expires=None)

    def change(conn: Connection) -> bool:
        expect = [s.value for s in PILOT_TRANSITIONS[new]]
        if not match_db.set_pilot_status(conn, job_id, pilot_id, expect, values, attempt):
            return False
        jobs_db.add_history(conn, [{"job_id": job_id, "status": new.value, "minor_status": minor,
                                    "source": f"{SOURCE_PILOT} {pilot_id}", "time": now}])
        if new is not JobStatus.RUNNING:
            match_db.release_debits(conn, [job_id])
        return True

    _check_pilot(identity, pilot_id)
    if not run_in_transaction(runtime.engine, change):
        with reading(runtime.engine) as conn:
            placement = match_db.job_placement(conn, job_id)
        if placement is None:
            raise NotFound(f"no such job: {job_id}")
        if attempt is not None and placement["attempt"] != attempt:
            raise Conflict(_superseded(job_id, attempt, placement))
        _check_holder(job_id, placement, pilot_id, attempt)
        raise Conflict(f"job {job_id} is not held by pilot {pilot_id} in a state that allows {new.value} "
                       f"(it is {placement['status']})")
    return {"JobID": job_id, "Status": new.value}


def _superseded(job_id: int, attempt: int, placement: dict[str, Any]) -> str:
    return (f"job {job_id} was handed out again: attempt {attempt} is over, "
            f"attempt {placement['attempt']} is {placement['status']}")


def _holds(placement: dict[str, Any], pilot_id: str, attempt: int | None) -> bool:
    """Whether the pilot (in the attempt it quotes, when it does) still holds the job."""
    return placement["pilot_id"] == pilot_id and (attempt is None or placement["attempt"] == attempt)


def _check_holder(job_id: int, placement: dict[str, Any], pilot_id: str, attempt: int | None) -> None:
    """NotFound when the attempt the pilot quotes (the current one) was given to another pilot:
    the job was never this pilot's in that attempt, and it answers as a
    missing job does, so that a pilot cannot probe ids. A job that went back to
    Waiting (its lease expired) holds no pilot: for the pilot that lost it
    that stays a Conflict, which tells it to stop the job; so does an
    attempt not quoted (the pilot may have lost the job since)."""
    holder = placement["pilot_id"]
    if attempt is not None and placement["attempt"] == attempt and holder is not None and holder != pilot_id:
        raise NotFound(f"no such job: {job_id}")


def heartbeat(runtime: Runtime, identity: Identity, job_id: int, pilot_id: str, now: datetime,
              attempt: int | None = None) -> dict[str, Any]:
    """A running job is alive; tells the pilot to kill it when it was killed or handed out again meanwhile."""
    _check_pilot(identity, pilot_id)

    def beat(conn: Connection) -> dict[str, Any] | None:
        placement = match_db.job_placement(conn, job_id)
        if placement is None:
            return None
        _check_holder(job_id, placement, pilot_id, attempt)
        if _holds(placement, pilot_id, attempt) and placement["status"] in (JobStatus.RUNNING, JobStatus.MATCHED):
            match_db.set_pilot_status(conn, job_id, pilot_id, [placement["status"]], {"heartbeat_time": now})
            return {"JobID": job_id, "Status": placement["status"], "Kill": False}
        return {"JobID": job_id, "Status": placement["status"], "Kill": True}

    result = run_in_transaction(runtime.engine, beat)
    if result is None:
        raise NotFound(f"no such job: {job_id}")
    return result


def store_output(runtime: Runtime, identity: Identity, job_id: int, pilot_id: str, stdout: str, stderr: str,
                 truncated: bool, now: datetime, attempt: int | None = None) -> None:
    """The output of the job's current attempt, from the pilot that holds it."""
    _check_pilot(identity, pilot_id)

    def store(conn: Connection) -> None:
        placement = match_db.job_placement(conn, job_id)
        if placement is None:
            raise NotFound(f"no such job: {job_id}")
        if attempt is not None and placement["attempt"] != attempt:
            raise Conflict(_superseded(job_id, attempt, placement))
        _check_holder(job_id, placement, pilot_id, attempt)
        if placement["pilot_id"] != pilot_id:
            raise Conflict(f"job {job_id} is not held by pilot {pilot_id}")
        match_db.store_output(conn, job_id, stdout, stderr, truncated, now)

    run_in_transaction(runtime.engine, store)


def _check_pilot(identity: Identity, pilot_id: str) -> None:
    """Only the pilot itself (its own token), an operator or a manager speaks for ``pilot_id``."""
    if identity.role not in ("pilot", "operator", "manager"):
        raise Forbidden("only pilots report job status")
    tokens_service.check_pilot(identity, pilot_id)


# ---------------------------------------------------------------- leases and stalled jobs
LEASE_EXPIRED = ("Lease expired: the pilot did not confirm the job",
                 "Lease expired too often: the job was rescheduled the most times allowed")
STALLED = ("Rescheduled: the pilot stopped sending heartbeats",
           "Stalled too often: the job was rescheduled the most times allowed")
NO_HEARTBEAT = "No heartbeat from the pilot"
ENDED_RUNNING = ("Rescheduled: the pilot ended while the job ran", STALLED[1])
ENDED_MATCHED = ("Rescheduled: the pilot ended before confirming the job", LEASE_EXPIRED[1])


def expire_leases(runtime: Runtime, now: datetime) -> int:
    """Matched jobs whose pilot never confirmed go back to Waiting, their debits returned.

    A job rescheduled ``max_reschedule`` times fails instead. Safe to run
    twice at once: the status change is conditional and the debits are
    returned in the same transaction as the change.
    """
    with reading(runtime.engine) as conn:
        expired = match_db.expired_leases(conn, now)

    def give_back(conn: Connection, job_id: int) -> int:
        return _reschedule(runtime, conn, job_id, JobStatus.MATCHED, match_db.jobs.c.lease_expires < now,
                           LEASE_EXPIRED, SOURCE_LEASES, now)

    return _each_in_own_transaction(runtime, expired, give_back)


def reap_stalled(runtime: Runtime, now: datetime) -> int:
    """Running jobs whose pilot fell silent or ended become Stalled, then are
    rescheduled (or fail); Matched jobs of an ended pilot go straight back.

    Silent means no heartbeat for ``heartbeat_timeout`` seconds. Ended means
    the pilot's batch system says it is over (Done, Failed or Aborted, as
    the SiteDirector last read it): its watchdog has killed the payloads
    with it (docs/architecture.md), so nothing of the job runs any more and
    there is nothing to wait for. The lost job is never lost: it goes back
    to Waiting with its consumables returned, at most ``max_reschedule``
    times (DESIGN.md; specs/004's lost jobs). A late report from the old
    pilot gets HTTP 409.
    """
    cut = now - timedelta(seconds=runtime.config.settings.heartbeat_timeout)
    with reading(runtime.engine) as conn:
        silent = match_db.silent_running_jobs(conn, cut)
        ended = match_db.jobs_of_ended_pilots(conn)
    stalling = set(silent)
    orphans = {o.job_id: o for o in ended if o.job_id not in stalling}

    def stall(conn: Connection, job_id: int) -> int:
        return _stall(runtime, conn, job_id, match_db.jobs.c.heartbeat_time < cut, NO_HEARTBEAT, STALLED, now)

    def give_back(conn: Connection, job_id: int) -> int:
        orphan = orphans[job_id]
        still_held = match_db.jobs.c.pilot_id == orphan.pilot_id     # not handed out again meanwhile
        if orphan.status == JobStatus.MATCHED.value:
            return _reschedule(runtime, conn, job_id, JobStatus.MATCHED, still_held, ENDED_MATCHED,
                               SOURCE_STALLED, now)
        return _stall(runtime, conn, job_id, still_held, f"The pilot ended ({orphan.pilot_state})",
                      ENDED_RUNNING, now)

    return (_each_in_own_transaction(runtime, silent, stall)
            + _each_in_own_transaction(runtime, list(orphans), give_back))


def _stall(runtime: Runtime, conn: Connection, job_id: int, stale: Any, why: str, minors: tuple[str, str],
           now: datetime) -> int:
    """Running -> Stalled (``why``) while ``stale`` holds, then rescheduled; 1 if it changed."""
    if not match_db.mark_stalled(conn, job_id, stale, why, now):
        return 0
    jobs_db.add_history(conn, [{"job_id": job_id, "status": JobStatus.STALLED.value, "minor_status": why,
                                "source": SOURCE_STALLED, "time": now}])
    return _reschedule(runtime, conn, job_id, JobStatus.STALLED, match_db.jobs.c.job_id == job_id,
                       minors, SOURCE_STALLED, now)


def _each_in_own_transaction(runtime: Runtime, job_ids: list[int], work) -> int:
    """``work(conn, job_id)`` per job, one transaction each; how many jobs changed.

    One transaction per job keeps locks short and lets one job's conflict
    retry without redoing the others.
    """
    changed = 0
    for job_id in job_ids:
        changed += run_in_transaction(runtime.engine, lambda conn, job_id=job_id: work(conn, job_id))
    if changed:
        forget_waiting_task_queues(runtime)
    return changed


def _reschedule(runtime: Runtime, conn: Connection, job_id: int, from_status: JobStatus, stale: Any,
                minors: tuple[str, str], source: str, now: datetime) -> int:
    """Back to Waiting (or Failed past max_reschedule), debits returned, history recorded; 1 if it changed."""
    minor_waiting, minor_failed = minors
    new = match_db.reschedule(conn, job_id, from_status.value, stale,
                              max_reschedule=runtime.config.settings.max_reschedule,
                              minor_waiting=minor_waiting, minor_failed=minor_failed, now=now)
    if new is None:
        return 0
    match_db.release_debits(conn, [job_id])
    minor = minor_waiting if new == JobStatus.WAITING else minor_failed
    jobs_db.add_history(conn, [{"job_id": job_id, "status": new, "minor_status": minor, "source": source, "time": now}])
    return 1


def job_output(runtime: Runtime, job_id: int) -> dict[str, Any]:
    with reading(runtime.engine) as conn:
        row = match_db.get_output(conn, job_id)
    if row is None:
        raise NotFound(f"job {job_id} has no output yet")
    return {"JobID": job_id, "stdout": row["stdout"], "stderr": row["stderr"], "truncated": bool(row["truncated"])}
