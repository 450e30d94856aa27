"""Warn early: could any configured queue ever run a job?

A job is unrunnable when the static phase of the match framework
(core/match/framework.py: pools, scheduling rules, Requirements, and
whether the global and queue levels could ever offer its requests) denies
it on every queue of its VO. That phase is what the Matcher caches as
NEVER and what the SiteDirector asks first before it sends pilots (its
queue phase adds only what time changes: advance reservations), so `wms
submit` warns (or, with ``--strict``, refuses) on exactly the jobs no
pilot would ever be sent for. Nothing here depends on usage, quotas or
time: a job that waits for a free slot, a quota or a reservation is not
unrunnable. `wms match-queues` asks the queue phase, as the SiteDirector
does (:func:`queue_judgement`).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any, Sequence

from wms.core import scheduling
from wms.core.match.context import PILOT_AD_NAMES
from wms.core.offers import PILOT_LOAD_VALUES
from wms.core.vocabulary import Vocabulary, unknown_names
from wms.core.match import framework, levels
from wms.core.match.framework import LAYERS
from wms.core.match.pools import PoolRules, listed_reason
from wms.core.optimizers import Job
from wms.services import reservations as reservations_service
from wms.services.matcher import queue_context
from wms.services.runtime import Runtime

WARNING = "{source}: no configured queue could ever run this job ({reasons})"
# Reasons shown in one warning; the rest are counted (a reason naming its queue differs for each).
SHOWN_REASONS = 3


def static_judgement(runtime: Runtime, job: Job) -> dict[str, str | None]:
    """The static phase's answer on every queue of the job's VO, by full name:
    None where it allows the job, else why not (what no pilot would change)."""
    return _judgement(runtime, job, None)


def queue_judgement(runtime: Runtime, job: Job, now: datetime) -> dict[str, str | None]:
    """The queue phase's answer at ``now`` on every queue of the job's VO, as
    :func:`static_judgement` gives the static phase's: what the SiteDirector
    asks before it sends pilots (an advance reservation that is not running,
    or holds nothing in the queue, keeps them away too)."""
    return _judgement(runtime, job, now)


def _judgement(runtime: Runtime, job: Job, now: datetime | None) -> dict[str, str | None]:
    """The static phase (``now`` None) or the queue phase at ``now``, on every
    queue of the job's VO. A queue left out of the job's SubmitPool is
    denied by the pools layer, with the pool's own cause (which requirement
    the queue lacks) as its reason, as `wms match-queues -v` gives it."""
    if job.task_queue is None:
        return {}
    tq = levels.task_queue_view(job.task_queue, runtime.read_stored_complexes())
    rules = (PoolRules({job.pool.pool_id: job.pool.requirements}, runtime.config.parameter_types)
             if job.pool is not None else None)
    reservations = reservations_service.snapshot(runtime, now) if now is not None else None
    out: dict[str, str | None] = {}
    for ref in runtime.resources_for(job.vo).queues():
        # The pools a pilot of this queue would serve, as far as this job's pool is concerned.
        pools = None if job.pool is None else (
            (job.pool.pool_id,) if ref in job.pool.queues else ())
        ctx = queue_context(runtime, ref, pools, pool_rules=rules, reservations=reservations)
        verdict = framework.evaluate(LAYERS, ctx, tq, static_only=now is None, queue_only=now is not None).verdict
        out[ref.name] = None if verdict.allowed else listed_reason(verdict)
    return out


def never_runnable(runtime: Runtime, job: Job) -> Counter[str] | None:
    """None if some queue of the job's VO could run it; else why not: each reason with its number of queues."""
    if job.task_queue is None:
        return None
    judged = static_judgement(runtime, job)
    if any(reason is None for reason in judged.values()):
        return None
    if not judged:
        return Counter({"no queue is configured for its VO": 0})
    return Counter(reason for reason in judged.values() if reason is not None)


def summary(reasons: Counter[str], shown: int) -> str:
    """``reason (queues), ...`` for the first ``shown`` reasons, the others counted."""
    ordered = sorted(reasons.items())
    text = ", ".join(f"{reason} ({count})" if count else reason for reason, count in ordered[:shown])
    more = len(ordered) - shown
    return text + (f", and {more} other reason{'s' if more > 1 else ''}" if more > 0 else "")


def flag_unrunnable(runtime: Runtime, jobs: Sequence[Job]) -> list[str]:
    """Mark the jobs no configured queue could ever run (their MinorStatus says why, as the
    JobScheduling optimizer's does) and return one warning per source and task queue."""
    judged: dict[Any, Counter[str] | None] = {}
    warnings: dict[tuple[str, Any], str] = {}
    for job in jobs:
        key = job.task_queue.key if job.task_queue else None
        if key not in judged:
            judged[key] = never_runnable(runtime, job)
        reasons = judged[key]
        if reasons is None:
            continue
        if not job.minor_status.startswith(scheduling.NO_QUEUE):     # JobScheduling's own count stands
            job.minor_status = f"{scheduling.NO_QUEUE}: {summary(reasons, 1)}"
        warnings.setdefault((job.source, key), WARNING.format(source=job.source,
                                                              reasons=summary(reasons, SHOWN_REASONS)))
    return list(warnings.values())


NAME_WARNING = "{source}: Requirements: {message}"


def vocabulary(runtime: Runtime, vo: str) -> Vocabulary:
    """The names a resource's ad may define for ``vo`` (core/vocabulary.py)."""
    resources = runtime.resources_for(vo)
    parameters = {name for _, params in resources.queue_items()
                  for name, value in params.items() if not isinstance(value, dict)}
    description = runtime.config.operations.JobDescription
    return Vocabulary.of(parameters, description.Parameters, (cx.name for cx in runtime.read_stored_complexes()),
                         PILOT_LOAD_VALUES, PILOT_AD_NAMES, description.PilotAttributes.get(vo, ()))


def flag_unknown_names(runtime: Runtime, jobs: Sequence[Job]) -> list[str]:
    """One warning per source and name a job's Requirements expression reads
    from the resource that no resource describes: such a job would wait for
    ever (core/vocabulary.py)."""
    known: dict[str, Vocabulary] = {}
    warnings: dict[tuple[str, str], str] = {}
    for job in jobs:
        expression = job.description.requirements_expr
        if expression is None:
            continue
        if job.vo not in known:
            known[job.vo] = vocabulary(runtime, job.vo)
        for message in unknown_names(expression, job.description.attributes, known[job.vo]):
            warnings.setdefault((job.source, message), NAME_WARNING.format(source=job.source, message=message))
    return list(warnings.values())
