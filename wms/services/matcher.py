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
import itertools
import logging
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Connection, Engine

from wms.core.complexes import fits
from wms.core.errors import InvalidInput
from wms.core.jdl import parse_one
from wms.core.limits import MATCH_BATCH_MAX, STORED
from wms.core.match import framework, levels, pilot_slots
from wms.core.match import quotas as quota_layer
from wms.core.match.choice import WeightedDraw
from wms.core.match.context import MatchContext, PilotRequest, TaskQueueView, with_free_slots
from wms.core.match.framework import LAYERS, StaticVerdicts
from wms.core.match.layer import Debit
from wms.core.match.pools import admits
from wms.core.match.verdict import Code, Verdict
from wms.core.resources import QueueRef
from wms.core.sandboxes import STDERR_NAME, STDOUT_NAME
from wms.db.engine import reading
from wms.db import matching as match_db
from wms.db import pools as pools_db
from wms.services.retry import run_in_transaction
from wms.services import quotas as quotas_service
from wms.services import reservations as reservations_service
from wms.services import telemetry
from wms.services.caches import Candidates, CandidatesKey, TaskQueueList, WaitingGeneration
from wms.services import holds as holds_service
from wms.services import job_tokens
from wms.services.runtime import Runtime

log = logging.getLogger(__name__)

# The draw among task queues: one generator for the process (seeding a new
# one per request read the system's entropy each time, 1% of a request).
_RNG = random.Random()

SOURCE_MATCHER = "Matcher"

NO_WAITING = "no waiting job for the pools this queue serves"


@dataclass(frozen=True)
class Pending:
    """The draw of a batch's next job, made while the batch was planned: the
    order it drew over ``draw``'s task queues, from the one it came to first.
    The next job starts there, so that every job of a batch is drawn as one
    asking alone would be (``_same_draws``)."""

    draw: WeightedDraw[int]
    order: Iterator[int]


@dataclass(frozen=True)
class MatchResult:
    # The jobs claimed: one for request_job, up to ``up_to`` of one task queue in a batch.
    jobs: tuple[dict[str, Any], ...] = ()
    reason: str = ""
    # For a no-match, what decided it: the layer that denied the most task
    # queues (pools, reservation, quota, global, host, queue, requirements),
    # or one of telemetry's NO_CANDIDATE, TAKEN, RULES_CHANGING.
    layer: str = ""
    # Where the batch's next job starts, when its draw was made here.
    pending: Pending | None = None

    @property
    def job(self) -> dict[str, Any] | None:
        return self.jobs[0] if self.jobs else None


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
    table = runtime.read_stored_complexes()     # first: adopting a newer table empties the cache
    cache = runtime.caches.task_queue_views
    missing = [i for i in tq_ids if i not in cache]
    for row in match_db.get_task_queues(conn, missing):
        cache[row["tq_id"]] = levels.stored_task_queue_view(row, table)
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
               request: PilotRequest) -> Candidates:
    """The task queues with waiting jobs (of ``generation``) the pilot's pools may serve, ready to
    draw from, cached with ``generation``; and the owners or VOs whose jobs wait in the pilot's
    pools but are not its to take (what an idle pilot is told: a token of the wrong VO is the
    usual reason a pilot finds nothing)."""
    cache = generation.candidates
    key: CandidatesKey = (request.ref.name, request.pools, request.vo, request.owner)
    if key not in cache:
        # The pools layer's rule, applied to the whole list at once: the
        # candidates are cached per pools, so it is decided here only once.
        pools = frozenset(request.pools) if request.pools is not None else None
        chosen = [(tq_id, priority) for tq_id, priority, pool in generation.task_queues or []
                  if admits(pools, pool)]
        views = task_queue_views(runtime, reader(), [tq_id for tq_id, _ in chosen])
        others: tuple[str, ...] = ()
        if request.vo is not None or request.owner is not None:
            theirs = [view for view in views.values() if not runs_jobs_of(request, view)]
            others = tuple(sorted({f"VO {view.vo}" if request.vo is not None and view.vo != request.vo
                                   else f"user {view.owner}" for view in theirs}))
            chosen = [(t, p) for t, p in chosen if t in views and runs_jobs_of(request, views[t])]
            views = {t: views[t] for t, _ in chosen}
        cache[key] = Candidates(WeightedDraw([t for t, _ in chosen], [p for _, p in chosen]), views, others)
    return cache[key]


def nothing_waiting(request: PilotRequest, others: tuple[str, ...]) -> str:
    """Why a pilot's pools offer it no job: none waits, or only jobs it may not take."""
    if not others:
        if request.owner is not None:
            return (f"{NO_WAITING} of user {request.owner} (a pilot that cannot isolate its "
                    "payloads takes its own user's jobs only)")
        return NO_WAITING
    mine = f"user {request.owner}" if request.owner is not None else f"VO {request.vo}"
    why = ("a pilot that cannot isolate its payloads takes its own user's jobs only" if request.owner is not None
           else "a pilot takes the jobs of its token's VO only")
    shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    return f"{NO_WAITING} of {mine}; jobs of {shown} wait there ({why})"


def runs_jobs_of(request: PilotRequest, tq: TaskQueueView) -> bool:
    """Whether the asking pilot may take ``tq``'s jobs: a VO's pilot runs that
    VO's jobs only (its token is the VO's), and a pilot whose payloads would
    run unisolated its own user's only."""
    return (request.vo is None or tq.vo == request.vo) and (request.owner is None or tq.owner == request.owner)


def forget_waiting_task_queues(runtime: Runtime) -> None:
    """Jobs became waiting in this process: read the list afresh next time."""
    runtime.caches.waiting.forget()


def static_verdicts(runtime: Runtime) -> StaticVerdicts:
    """The static phase's verdicts of this configuration (specs/000 "Result caching")."""
    return runtime.caches.static_verdicts


# ---------------------------------------------------------------- the request
def match_context(runtime: Runtime, request: PilotRequest, now: datetime) -> MatchContext:
    """The pilot's levels, the quota sets and the reservations, read once for the whole request."""
    table = runtime.read_stored_complexes()
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
        evaluation_limit=runtime.config.settings.limits.evaluation_ms / 1000,
    )


def queue_context(runtime: Runtime, ref: QueueRef, pools: tuple[str, ...] | None, *, slots: int = 1,
                  **extra: Any) -> MatchContext:
    """A queue judged with no pilot asking (``wms why``, the SiteDirector): the
    host is unknown, so the host level and the pilot's own values wait for one.
    ``extra`` are the usage, quotas, reservations and holders to judge with."""
    request = PilotRequest(site=ref.site, ce=ref.ce, queue=ref.queue, host="", pilot_id="", pools=pools, slots=slots)
    params = runtime.resources_for(None).queue_parameter_map(ref)
    table = runtime.read_stored_complexes()
    return MatchContext(
        request=request,
        levels=levels.build_levels(table, runtime.config.cluster, params.get("complex_values") or {}, request),
        usage=extra.pop("usage", {}), complexes=table, pilot_ad={}, resources_for=runtime.resources_for,
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


def request_job(runtime: Runtime, request: PilotRequest, now: datetime, rng: random.Random | None = None, *,
                up_to: int = 1, pending: Pending | None = None) -> MatchResult:
    """One job for the pilot, or why there is none. With ``up_to`` > 1 (a
    batch, ``request_jobs``), up to that many of the task queue drawn, as
    many as the draws of the batch's next jobs came to that task queue too;
    ``pending`` is where the previous part of the batch left the next draw."""
    validate_request(runtime, request)
    rng = rng or _RNG
    result = MatchResult((), RULES_CHANGING, telemetry.RULES_CHANGING)
    to_hold: dict[int, Verdict] = {}
    try:
        for _ in range(RULES_CHANGED_ATTEMPTS):
            try:
                result = _request_job(runtime, request, now, rng, to_hold, up_to, pending)
                break
            except match_db.QuotaSetsChanged:
                # Another process stored new sets (and recounted the running
                # jobs under them): adopt them now and decide afresh, with a
                # draw of its own (the batch's was walked in part already).
                telemetry.claim_retried(telemetry.RULES_CHANGED)
                quotas_service.adopt_now(runtime)
                pending = None
    finally:
        if to_hold:
            hold_task_queues(runtime, to_hold, now)
    for _ in result.jobs:
        telemetry.match_answered(None)
    if not result.jobs:
        telemetry.match_answered(result.layer)
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
    """Up to ``count`` jobs for a pilot with ``request.slots`` free slots, each
    drawn as a ``request_job`` of its own would draw it and offered only the
    slots the jobs before it left free (a job needing more is not handed
    out); the first no-match ends the batch. Jobs whose draws came one after
    the other to the same task queue are claimed in one call where the
    database can (``match_db.claim_several``), the others one by one; each
    call commits on its own.

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
    pending: Pending | None = None
    while len(jobs) < count and free > 0:
        try:
            result = request_job(runtime, dataclasses.replace(request, slots=free), now, rng,
                                 up_to=count - len(jobs), pending=pending)
        except Exception:
            if not jobs:
                raise
            log.exception("pilot %s: a match failed after %d job(s) were handed out; answering those",
                          request.pilot_id, len(jobs))
            return BatchResult(jobs, BATCH_STOPPED)
        if not result.jobs:
            return BatchResult(jobs, result.reason)
        jobs.extend(result.jobs)
        free -= sum(job["Slots"] for job in result.jobs)
        pending = result.pending
    return BatchResult(jobs)


def log_decision(request: PilotRequest, result: MatchResult) -> None:
    """The one log line of a match decision (docs/deployment.md, "Logs")."""
    fields = {"pilot_id": request.pilot_id, "queue": request.ref.name, "host": request.host}
    for job in result.jobs:
        log.info("job %s matched to pilot %s on %s (%s)", job["JobID"], request.pilot_id,
                 request.ref.name, request.host, extra={"fields": {**fields, "job_id": job["JobID"]}})
    if not result.jobs:
        log.info("no job for pilot %s on %s (%s): %s", request.pilot_id, request.ref.name, request.host,
                 result.reason, extra={"fields": {**fields, "reason": result.reason}})


def hold_task_queues(runtime: Runtime, verdicts: dict[int, Verdict], now: datetime) -> None:
    """Hold the waiting jobs of each task queue a HOLD verdict names, after the
    request's claim (services/holds.py), and draw the waiting list afresh."""
    for tq_id, verdict in verdicts.items():
        try:
            holds_service.hold_task_queue(runtime, tq_id, verdict.reason, SOURCE_MATCHER, now)
        except Exception:   # noqa: BLE001 - the pilot's answer stands; the next draw holds them
            log.exception("task queue %s: holding its jobs failed", tq_id)
    forget_waiting_task_queues(runtime)


def _request_job(runtime: Runtime, request: PilotRequest, now: datetime, rng: random.Random,
                 to_hold: dict[int, Verdict], up_to: int = 1, pending: Pending | None = None) -> MatchResult:
    with LazyReader(runtime.engine) as reader:
        # One generation for the request: the pools and the candidates of the same list.
        generation = waiting(runtime, reader)
        if request.pools is None:
            request = dataclasses.replace(request, pools=pools_for_queue(generation, reader, request))
        found = candidates(runtime, generation, reader, request)
        draw, views, others = found.draw, found.views, found.others
    if not views:
        return MatchResult((), nothing_waiting(request, others), telemetry.NO_CANDIDATE)
    # After the reader is given back: the quota sets and reservations read
    # connections of their own, and a request holding two at once could
    # exhaust the pool under a burst (each request thread may hold one).
    ctx = match_context(runtime, request, now)
    # Draw the order lazily and evaluate as we go: the first eligible task
    # queue in a weighted random order is a proportional draw among the
    # eligible ones (choice.py), so most requests evaluate a handful of task
    # queues, not all of them. A task queue with a score (the framework's
    # score phase: soft requests it misses here) waits until no eligible one
    # without is left, then the lowest go first.
    denials = Denials()
    full: FullMemo = {}
    scored: list[tuple[int, TaskQueueView]] = []
    static = static_verdicts(runtime)
    # The batch's draw for this job, if it was made while the part before was
    # planned over these same candidates; else a draw of its own.
    order = pending.order if pending is not None and pending.draw is draw else draw.order(rng)
    for tq_id in order:
        view = views.get(tq_id)
        if view is None:
            continue
        decided = framework.evaluate(LAYERS, ctx, view, cache=static)
        verdict = decided.verdict
        if not verdict.allowed:
            if verdict.code is Code.ERROR:
                log.error("task queue %s on %s: %s", tq_id, request.ref.name, verdict.reason)
            elif verdict.code is Code.HOLD:
                to_hold[tq_id] = verdict
            denials.add(verdict)
            continue
        if decided.score:
            scored.append((decided.score, view))
            continue
        count, after = _same_draws(ctx, draw, views, view, up_to, rng, static) if up_to > 1 else (1, None)
        jobs = _try_claim(runtime, ctx, view, now, denials, full, count)
        if jobs:
            # The next job's draw stands only if this one's all came: a shorter
            # list means the task queue ran out or filled, which the draws
            # after it did not know.
            return MatchResult(tuple(jobs), pending=after if len(jobs) == count else None)
    for _, view in sorted(scored, key=lambda pair: pair[0]):   # stable: keeps the drawn order
        jobs = _try_claim(runtime, ctx, view, now, denials, full)
        if jobs:
            return MatchResult(tuple(jobs))
    if not denials:
        return MatchResult((), NO_WAITING, telemetry.TAKEN)
    return MatchResult((), summarise(denials.reasons()), denials.deciding_layer())


def _same_draws(ctx: MatchContext, draw: WeightedDraw[int], views: dict[int, TaskQueueView], chosen: TaskQueueView,
                up_to: int, rng: random.Random, static: StaticVerdicts) -> tuple[int, Pending | None]:
    """How many of a batch's jobs, from this one on, draw ``chosen``: the
    draws of the next jobs, each made as that job's own request would make
    it (a fresh weighted order, the first eligible task queue without a
    score, judged with the slots the jobs before it leave free), made now,
    until one comes to another task queue. That draw is returned, to be
    where the next job starts: dropping it would favour ``chosen``."""
    count = 1
    while count < up_to and (count + 1) * chosen.slots <= ctx.request.slots:
        after = with_free_slots(ctx, ctx.request.slots - count * chosen.slots)
        order = draw.order(rng)
        for tq_id in order:
            decided = framework.evaluate(LAYERS, after, views[tq_id], cache=static)
            if decided.verdict.allowed and not decided.score:
                break
        else:
            # No task queue without a score is eligible for that job: its
            # request walks them all anyway, in whatever order it draws.
            return count, None
        if tq_id != chosen.tq_id:
            return count, Pending(draw, itertools.chain([tq_id], order))
        count += 1
    return count, None


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
    return framework.Diagnosis(decided.verdict, every.layers, decided.score)


def _try_claim(runtime: Runtime, ctx: MatchContext, view: TaskQueueView, now: datetime,
               denials: Denials, full: FullMemo, count: int = 1) -> list[dict[str, Any]]:
    debits = pilot_slots.with_debit(match_debits(ctx, view), ctx.request, view)
    for debit in debits:
        # A consumable found full earlier in this request rules out only the
        # debits that do not fit beside what was in use then: another task
        # queue may need less of it (complex(5): per job category).
        known = full.get((debit.scope, debit.resource))
        if known is not None and not fits(debit.amount, debit.capacity, known[0]):
            denials.add(_full_verdict(ctx, debit, *known))
            return []
    create_usage_rows(runtime, debits)
    try:
        return _claim(runtime, ctx, view, debits, now, full, count)
    except _DoesNotFit as exc:
        telemetry.claim_retried(telemetry.DOES_NOT_FIT)
        denials.add(exc.verdict)
        return []


def summarise(denials: dict[str, int]) -> str:
    """The most frequent reasons, e.g. ``queue slots full (3 task queues); ...``."""
    top = sorted(denials.items(), key=lambda item: (-item[1], item[0]))[:3]
    return "; ".join(f"{reason} ({count} task queue{'s' if count > 1 else ''})" for reason, count in top)


def _claim(runtime: Runtime, ctx: MatchContext, tq: TaskQueueView, debits: list[Debit], now: datetime,
           full: FullMemo, count: int = 1) -> list[dict[str, Any]]:
    """Claim up to ``count`` of the best waiting jobs of ``tq``, debiting what
    each takes: in one call where the database can (match_db.claim_several),
    else one claim after the other, each its own transaction.

    A debit of the first job that does not fit rolls its attempt back, the
    claim included, and raises _DoesNotFit; the consumable's usage is
    remembered for the rest of this request, so task queues needing more of
    it than is free are skipped. A later job that does not fit, or finds no
    job left, ends the list.
    """
    placement = _placement(runtime, ctx, tq, now)
    engine = runtime.engine
    given = [(d.scope, d.resource, d.amount, d.capacity) for d in debits]
    several = count > 1 and match_db.claims_in_one_call(engine)

    def attempt(conn: Connection) -> list[dict[str, Any]]:
        if several:
            return match_db.claim_several(conn, tq.tq_id, placement, count, source=SOURCE_MATCHER, debits=given,
                                          rules_version=ctx.rules_version)
        job = match_db.claim(conn, tq.tq_id, placement, source=SOURCE_MATCHER, debits=given,
                             rules_version=ctx.rules_version)
        return [job] if job is not None else []

    def claimed() -> list[dict[str, Any]]:
        return run_in_transaction(engine, attempt, single_statement=match_db.claims_on_autocommit(engine),
                                  on_retry=lambda: telemetry.claim_retried(telemetry.CONFLICT))

    try:
        jobs = claimed()
    except match_db.DebitDoesNotFit as exc:
        with reading(engine) as conn:
            raise _DoesNotFit(_remember_full(conn, ctx, debits[exc.index], full)) from None
    while jobs and not several and len(jobs) < count:
        # The jobs claimed are committed and this pilot's: whatever stops the
        # next claim (a full consumable, new quota sets, a failure), they are answered.
        try:
            more = claimed()
        except (match_db.DebitDoesNotFit, match_db.QuotaSetsChanged):
            break
        except Exception:
            log.exception("task queue %s: a claim failed after %d job(s) of a batch", tq.tq_id, len(jobs))
            break
        if not more:
            break
        jobs += more
    settings = runtime.config.settings
    return [job_payload(job, tq, settings.match_lease, job_tokens.mint(runtime, job["job_id"], job["attempt"]),
                        run_lease=settings.heartbeat_timeout) for job in jobs]


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
    if isinstance(debit, pilot_slots.PilotSlotsDebit):
        return pilot_slots.full_verdict(debit, used)
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
    claim rolls back; a debit on a missing row fails as if it were full.
    A pilot's own row is made with its declaration, not here
    (core/match/pilot_slots.py): one per pilot would fill this cache."""
    known = runtime.caches.usage_rows
    missing = [(d.scope, d.resource) for d in debits
               if (d.scope, d.resource) not in known and not isinstance(d, pilot_slots.PilotSlotsDebit)]
    if missing:
        run_in_transaction(runtime.engine, lambda conn: match_db.ensure_usage_rows(conn, missing))
        known.update(missing)


def job_payload(job: dict[str, Any], tq: TaskQueueView, lease: int, job_token: str,
                run_lease: int | None = None) -> dict[str, Any]:
    """What the pilot needs to run a claimed job (job_id, jdl, cpu_time, attempt), and the
    job token its payload gets (WMS_JOB_TOKEN; services/job_tokens.py): minted here, stored nowhere.

    ``Lease`` (``match_lease``) is the job's lease until its first heartbeat:
    the time to confirm it, then the start window; ``RunLease``
    (``heartbeat_timeout``) its lease once it runs, renewed by each
    heartbeat. The pilot honours both (docs/architecture.md, "Leases")."""
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
        **({"RunLease": run_lease} if run_lease is not None else {}),
        "Limits": levels.limits(tq, job["cpu_time"]),
        "Environment": {**description.environment, "WMS_JOB_ID": str(job_id)},
        "JobToken": job_token,
        "StdOutput": description.std_output or STDOUT_NAME,
        "StdError": description.std_error or STDERR_NAME,
    }
