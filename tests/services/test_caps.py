"""Caps on a user's and a VO's jobs (wms.yaml ``caps``, Grid Engine's
max_u_jobs, Slurm's MaxSubmitJobs), on SQLite, PostgreSQL and MariaDB: a
submission that reaches a cap exactly is accepted, one job more is refused
whole with the cap and the count, finished jobs free their place, and
submissions at once never pass the cap together."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import func, select, update

from tests.helpers import ALICE, ANDRE, ROLAND, default_config, run_concurrently
from wms.config.models import CapsSettings
from wms.core.caps import CapReached
from wms.db import schema
from wms.services import jobs as jobs_service
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, submit_jobs

pytestmark = pytest.mark.databases


def capped(engine, **caps) -> Runtime:
    """A runtime whose wms.yaml says ``caps: {...}`` (the caps not named: none)."""
    config = default_config()
    limits = CapsSettings(**{"user_jobs": 0, "user_waiting": 0, "vo_jobs": 0, "vo_waiting": 0, **caps})
    return Runtime.create(dataclasses.replace(config, settings=config.settings.model_copy(update={"caps": limits})),
                          engine)


def submit(runtime, now, count, identity=ROLAND) -> list[int]:
    text = f'[ Executable = "/bin/true"; Parameters = {count}; ]' if count > 1 else '[ Executable = "/bin/true"; ]'
    return submit_jobs(runtime, identity, [("capped.jdl", text)], SubmitOptions(), now)


def stored(engine, owner=None) -> int:
    with engine.connect() as conn:
        stmt = select(func.count()).select_from(schema.jobs)
        return conn.execute(stmt if owner is None else stmt.where(schema.jobs.c.owner == owner)).scalar_one()


def test_a_submission_reaching_the_cap_exactly_is_accepted_and_one_job_more_is_refused(engine, now):
    runtime = capped(engine, user_jobs=10)
    assert len(submit(runtime, now, 8)) == 8
    assert len(submit(runtime, now, 2)) == 2                       # 10 of 10
    with pytest.raises(CapReached) as refused:
        submit(runtime, now, 1)
    assert str(refused.value) == ("user roland has 10 jobs not yet final; the cap is 10 (caps.user_jobs); "
                                  "this submission adds 1")
    assert refused.value.status == 409
    assert stored(engine) == 10


def test_a_bulk_submission_that_would_pass_the_cap_is_refused_whole(engine, now):
    runtime = capped(engine, user_jobs=1_009)
    submit(runtime, now, 999)
    with pytest.raises(CapReached) as refused:
        submit(runtime, now, 20)                                    # 10 of them would fit
    assert str(refused.value) == ("user roland has 999 jobs not yet final; the cap is 1,009 (caps.user_jobs); "
                                  "this submission adds 20")
    assert stored(engine) == 999


def test_finished_jobs_free_their_place_under_the_cap(engine, now):
    runtime = capped(engine, user_jobs=3)
    ids = submit(runtime, now, 3)
    jobs_service.kill_jobs(runtime, ROLAND, ids[:2], now)
    assert len(submit(runtime, now, 2)) == 2


def test_the_waiting_cap_counts_only_jobs_not_yet_handed_to_a_pilot(engine, now):
    runtime = capped(engine, user_waiting=3, user_jobs=6)
    ids = submit(runtime, now, 3)
    with engine.begin() as conn:                                    # two of them running
        conn.execute(update(schema.jobs).where(schema.jobs.c.job_id.in_(ids[:2])).values(status="Running"))
    assert len(submit(runtime, now, 2)) == 2                        # 3 waiting, 5 not final
    with pytest.raises(CapReached, match=r"^user roland has 3 jobs waiting; the cap is 3 \(caps.user_waiting\)"):
        submit(runtime, now, 1)


def test_the_vo_cap_counts_every_user_of_the_vo(engine, now):
    runtime = capped(engine, vo_jobs=4)
    submit(runtime, now, 3, identity=ROLAND)
    assert len(submit(runtime, now, 4, identity=ANDRE)) == 4         # another VO
    with pytest.raises(CapReached) as refused:
        submit(runtime, now, 2, identity=ALICE)
    assert str(refused.value) == "vo lhcb has 3 jobs not yet final; the cap is 4 (caps.vo_jobs); this submission adds 2"
    assert len(submit(runtime, now, 1, identity=ALICE)) == 1


def test_zero_is_no_cap(engine, now):
    runtime = capped(engine)
    assert len(submit(runtime, now, 50)) == 50


def test_submissions_at_once_never_pass_the_cap_together(engine, now):
    cap, each, submitters = 20, 3, 12                              # 36 asked, 20 allowed
    runtime = capped(engine, user_jobs=cap)
    accepted, refused = run_concurrently(lambda _: submit(runtime, now, each), submitters)
    assert all(isinstance(error, CapReached) for error in refused), refused
    assert stored(engine) == sum(len(ids) for ids in accepted) == cap // each * each
    assert len(accepted) == cap // each
