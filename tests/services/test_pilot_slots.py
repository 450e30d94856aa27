"""A pilot token holds at most its declared slots, however many Matchers
serve it at once (core/match/pilot_slots.py), on SQLite, PostgreSQL and
MariaDB."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from tests.helpers import ADMIN, default_config, run_concurrently
from tests.services.test_matcher import HELLO, pilot, submit
from wms.core.identity import Identity
from wms.db import schema
from wms.services import matcher
from wms.services import leases
from wms.services import tokens as tokens_service
from wms.services.runtime import Runtime

pytestmark = pytest.mark.databases

# A queue of 100 slots: only the pilot's declaration can stop it.
LONG = dict(site="LCG.CERN.ch", ce="ce01.cern.ch", queue="long")
DECLARED = 3


def stolen_token_request(runtime, now, pilot_id: str, declared: int):
    """The request of a pilot whose token declared ``declared`` slots (the token made as the SiteDirector makes it)."""
    identity = Identity(user="site-director", group="lhcb_pilot", vo="lhcb", role="pilot", pilot_id=pilot_id,
                        slots=declared)
    tokens_service.create_token(runtime.engine, identity, now, lifetime=timedelta(hours=1))
    return dataclasses.replace(pilot(pilot_id, **LONG), vo="lhcb",
                               declared_slots=tokens_service.declared_slots(identity))


def holding(runtime, pilot_id: str) -> tuple[int, float]:
    """(slots of the pilot's Matched and Running jobs, its usage row)."""
    jobs, usage = schema.jobs, schema.resource_usage
    with runtime.engine.connect() as conn:
        held = conn.execute(select(func.coalesce(func.sum(jobs.c.slots), 0)).where(
            jobs.c.pilot_id == pilot_id, jobs.c.status.in_(("Matched", "Running")))).scalar()
        used = conn.execute(select(usage.c.used).where(usage.c.scope == f"pilot:{pilot_id}")).scalar()
    return int(held), used


def test_many_matchers_serving_one_stolen_token_hand_out_no_more_than_declared(runtime, engine, now):
    submit(runtime, now, *[HELLO] * 40)
    request = stolen_token_request(runtime, now, "p-stolen", DECLARED)
    # Four Matcher "processes" (each its own caches, as several wms server), four threads each.
    matchers = [runtime] + [Runtime.create(default_config(), engine) for _ in range(3)]

    def thief(i: int) -> list[int]:
        got = []
        for _ in range(4):
            result = matcher.request_job(matchers[i % len(matchers)], request, now)
            if result.job is not None:
                got.append(result.job["JobID"])
            else:
                assert result.reason.startswith(f"pilot p-stolen holds 3 of its {DECLARED} declared slots"), \
                    result.reason
        return got

    results, errors = run_concurrently(thief, 16)
    assert errors == []
    handed = [job for got in results for job in got]
    assert len(handed) == len(set(handed)) == DECLARED
    assert holding(runtime, "p-stolen") == (DECLARED, DECLARED)
    # Another pilot is not held back by it.
    other = stolen_token_request(runtime, now, "p-other", 2)
    assert matcher.request_job(runtime, other, now).job is not None


def test_a_batch_stops_at_the_declared_slots_and_a_job_that_ends_gives_its_slot_back(runtime, now):
    submit(runtime, now, *[HELLO] * 6)
    request = dataclasses.replace(stolen_token_request(runtime, now, "p-batch", 2), slots=5)
    batch = matcher.request_jobs(runtime, request, 5, now)
    assert len(batch.jobs) == 2
    assert batch.reason.startswith("pilot p-batch holds 2 of its 2 declared slots")
    first = batch.jobs[0]["JobID"]
    leases.pilot_status(runtime, ADMIN, first, "p-batch", "Failed", "", 1, now)
    assert holding(runtime, "p-batch") == (1, 1.0)
    # A lease that runs out gives the slot back too.
    later = now + timedelta(seconds=runtime.config.settings.match_lease + 1)
    assert leases.expire_leases(runtime, later) == 1
    assert holding(runtime, "p-batch") == (0, 0.0)
    assert len(matcher.request_jobs(runtime, request, 5, later).jobs) == 2


def test_a_job_wider_than_what_is_left_says_so(runtime, now):
    request = stolen_token_request(runtime, now, "p-narrow", 1)
    submit(runtime, now, HELLO)
    assert matcher.request_job(runtime, request, now).job is not None
    result = matcher.request_job(runtime, request, now)
    assert result.job is None
    assert result.reason in (matcher.NO_WAITING, )     # nothing else waits: the cap is not even tried
    submit(runtime, now, HELLO)
    result = matcher.request_job(runtime, request, now)
    assert result.reason == "pilot p-narrow holds 1 of its 1 declared slots (1 task queue)"
