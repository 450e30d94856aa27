"""One door into eligibility: `wms match-queues` (explain_job), the
SiteDirector's demand (waiting_jobs_per_queue) and `wms why` ask the one
match framework, so for a job nothing else keeps away (no usage, no quota)
they find the same queues eligible, and give the same reason for each of
the others: a layer's reason, the SubmitPool's own cause included, is read
from its verdict."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.helpers import ROLAND
from tests.reservations_config import ALLQ, OTHERQ, USER1, USER2, reservation_config
from wms.config import load_config
from wms.core.identity import Identity
from wms.services import diagnosis
from wms.services import feasibility
from wms.services import pilots as pilots_service
from wms.services import pools as pools_service
from wms.services import reservations as ar
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, parse_sources, run_chain, submit_jobs

pytestmark = pytest.mark.databases

CONFIG = Path(__file__).resolve().parents[2] / "config"
T0 = datetime(2030, 12, 14, 10, 0, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)


def three_views(runtime: Runtime, identity: Identity, job_id: int, now: datetime):
    """What `wms why`, `wms match-queues` and the SiteDirector say of the job, by queue."""
    why = {e["Queue"]: e for e in diagnosis.why(runtime, identity, job_id, now)["Queues"]}
    listed = pools_service.match_queues_for_job(runtime, identity, job_id, now)
    demand = pilots_service.waiting_jobs_per_queue(runtime, now=now)
    return why, listed, demand


def assert_one_answer(why, listed, demand) -> list[str]:
    """The three agree on the eligible queues; the eligible ones, sorted."""
    eligible = listed["eligible"]
    assert eligible == sorted(q for q, e in why.items() if e["Code"] == "OK")
    assert eligible == sorted(q for q, d in demand.items() if q in why and d["eligible"])
    assert sorted(listed["rejected"]) == sorted(q for q in why if q not in eligible)
    return eligible


def test_a_reservation_bound_job_before_and_after_its_start(engine, tmp_path):
    runtime = Runtime.create(reservation_config(tmp_path / "config"), engine)
    ar_id = ar.submit(runtime, USER1, ar.ReservationSpec(start=T0 + HOUR, duration="1:0:0", queues=["other.q"],
                                                         users=["user1"]), T0)["ar_id"]
    text = (f'[ Executable = "/bin/true"; CPUTime = 300; ResourceRequests = [ h_rt = "0:30:0" ]; '
            f'Reservation = {ar_id}; ]')
    [job_id] = submit_jobs(runtime, USER1, [("ar.jdl", text)], SubmitOptions(), T0)

    # Waiting for its start: no queue, and for the same reason everywhere.
    why, listed, demand = three_views(runtime, USER1, job_id, T0)
    assert assert_one_answer(why, listed, demand) == []
    waiting = f"advance reservation {ar_id} is not running (state w, starts 12/14/2030 11:00:00)"
    assert listed["rejected"] == {ALLQ: waiting, OTHERQ: waiting}
    assert {q: (e["Layer"], e["Code"], e["Reason"]) for q, e in why.items()} == {
        ALLQ: ("reservation", "NOT_NOW", waiting), OTHERQ: ("reservation", "NOT_NOW", waiting)}

    # Running: the one queue it holds, everywhere.
    assert ar.manage(runtime, T0 + HOUR)["started"] == [ar_id]
    why, listed, demand = three_views(runtime, USER1, job_id, T0 + HOUR)
    assert assert_one_answer(why, listed, demand) == [OTHERQ]
    elsewhere = f"advance reservation {ar_id} holds nothing in this queue"
    assert listed["rejected"] == {ALLQ: elsewhere} and why[ALLQ]["Reason"] == elsewhere


def test_a_job_without_a_runtime_limit_beside_a_reservation_holding_a_whole_queue(engine, tmp_path):
    """No pilot is sent to the reserved queue for a job that may not run there, and all three say why."""
    runtime = Runtime.create(reservation_config(tmp_path / "config"), engine)
    ar_id = ar.submit(runtime, USER1, ar.ReservationSpec(start=T0 + HOUR, duration="1:0:0", queues=["other.q"],
                                                         users=["user1"]), T0)["ar_id"]
    [job_id] = submit_jobs(runtime, USER2, [("free.jdl", '[ Executable = "/bin/true"; CPUTime = 300; ]')],
                           SubmitOptions(), T0)
    why, listed, demand = three_views(runtime, USER2, job_id, T0)
    assert assert_one_answer(why, listed, demand) == [ALLQ]
    beside = f"jobs without a runtime limit (h_rt) never run in a queue holding an advance reservation ({ar_id})"
    assert listed["rejected"] == {OTHERQ: beside} and why[OTHERQ]["Reason"] == beside
    assert demand[OTHERQ]["waiting"] == 0 and demand[ALLQ]["waiting"] == 1


def test_a_queue_outside_the_jobs_pool_gives_the_pools_cause_everywhere(engine, now):
    runtime = Runtime.create(load_config(CONFIG), engine)
    text = '[ Executable = "/bin/true"; Requirements = [ Memory = 4000; ]; ]'
    [job_id] = submit_jobs(runtime, ROLAND, [("mem.jdl", text)], SubmitOptions(), now)
    why, listed, demand = three_views(runtime, ROLAND, job_id, now)
    eligible = assert_one_answer(why, listed, demand)
    short, long = "LCG.CERN.ch/ce01.cern.ch/short", "LCG.CERN.ch/ce01.cern.ch/long"
    assert "LCG.CERN.ch/ce02.cern.ch/arm" in eligible and short not in eligible and long not in eligible
    assert listed["rejected"][short] == "Memory: queue offers 2000, job needs 4000"
    assert listed["rejected"][long] == "Memory: not described for this queue"
    pool = why[short]["Reason"].removeprefix("not in the job's SubmitPool ").split(":")[0]
    for queue, reason in listed["rejected"].items():
        entry = why[queue]
        assert (entry["Layer"], entry["Code"], entry["ReasonCode"]) == ("pools", "NEVER", "not-in-submit-pool")
        assert entry["Reason"] == f"not in the job's SubmitPool {pool}: {reason}"
    # The warning of `wms submit` reads the same verdicts (the static phase alone).
    [job] = _chain(runtime, text, now)
    assert feasibility.static_judgement(runtime, job) == {
        q: None if q in eligible else listed["rejected"][q] for q in why}


def _chain(runtime: Runtime, text: str, now: datetime):
    """The job as the optimizer chain leaves it, stored nowhere (what `wms submit` judges)."""
    parsed = parse_sources([("mem.jdl", text)], SubmitOptions(), 10)
    return run_chain(runtime, runtime.chain_env(now), ROLAND, parsed)
