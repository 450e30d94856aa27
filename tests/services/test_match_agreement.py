"""`wms why` and the Matcher agree: both ask the one match framework.

Random jobs (the scheduling keywords, RFC #7 Requirements, ClassAd
expressions, some reading the job's own attributes, Grid Engine
requests, reservations) are submitted to the
example configuration; for every job and every queue, what `wms why`
says of the queue is compared with what the Matcher decides for a pilot
of that queue. A layer `wms why` names is the layer the Matcher names,
with the same code; where `wms why` finds the queue eligible, the Matcher
either hands the job out or is stopped, not for ever, by what only a pilot
tells (its host, its own values): never NEVER. `wms match-queues -v`
lists as eligible exactly the queues `wms why` finds eligible.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.helpers import ADMIN, ROLAND
from wms.config import load_config
from wms.core.match.context import PilotRequest
from wms.core.match.verdict import Code
from wms.services import diagnosis, matcher
from wms.services import pools as pools_service
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, submit_jobs

pytestmark = pytest.mark.databases

CONFIG = Path(__file__).resolve().parents[2] / "config"

FRAGMENTS = [
    'Site = "LCG.CERN.ch";',
    'BannedSite = { "LCG.CERN.ch" };',
    'Platform = "aarch64-el9";',
    'CPUTime = 100000;',
    'CPUTime = 3000;',
    'Tags = { "GPU" };',
    'NumberOfProcessors = 8;',
    'Requirements = other.CPUTime >= 100000 && other.Memory >= 8000;',
    'Requirements = other.MaxRAM >= 4000;',
    # The job's own ad (spec 004): my.X and an unscoped X read the job first.
    'Requirements = other.Memory >= MinMem && other.Memory < 3000;',
    'Requirements = other.Memory >= my.MinMem || other.CPUTime >= my.CPUTime * 40;',
    'Requirements = other.Memory >= Limit;',
    'MinMem = 2000;',
    'MinMem = 9000;',
    'Limit = MinMem + 2000;',
    'Requirements = [ CPUModel = "Intel Xeon"; ];',
    'Requirements = [ SoftwareTag = { "AppVersion1", "AppVersion2" }; Memory = 4000; ];',
    'ResourceRequests = [ h_rt = "1:00:00"; ];',
    'ResourceRequests = [ h_rt = "1:00:00"; compiler_lic = 1; ];',
    'ResourceRequests = [ compiler_lic = 5; ];',
    'ResourceRequests = [ arch = "lx-amd64"; ];',
    'SoftResourceRequests = [ arch = "lx-amd64"; ];',
]


def random_jdl(rng: random.Random) -> str:
    chosen: dict[str, str] = {}
    for fragment in rng.sample(FRAGMENTS, rng.randint(0, 3)):
        chosen[fragment.split("=", 1)[0].strip()] = fragment     # one of each keyword
    return "[ Executable = \"/bin/true\"; " + " ".join(chosen.values()) + " ]"


@pytest.mark.parametrize("seed", [1, 2])
def test_why_and_the_matcher_name_the_same_layer(engine, now, seed):
    runtime = Runtime.create(load_config(CONFIG), engine)
    rng = random.Random(seed)
    texts = [random_jdl(rng) for _ in range(25)]
    job_ids = submit_jobs(runtime, ROLAND, [(f"j{i}.jdl", t) for i, t in enumerate(texts)], SubmitOptions(), now)
    compared = eligible = decided_alike = 0
    for job_id, text in zip(job_ids, texts):
        report = diagnosis.why(runtime, ADMIN, job_id, now)
        listed = pools_service.match_queues_for_job(runtime, ADMIN, job_id, now)["eligible"]
        assert listed == sorted(e["Queue"] for e in report["Queues"] if e["Code"] == Code.OK.value), text
        tq_id = _task_queue(runtime, job_id)
        for entry in report["Queues"]:
            site, ce, queue = entry["Queue"].split("/")
            request = PilotRequest(site=site, ce=ce, queue=queue, host="wn-agree", pilot_id="agree", slots=8)
            verdict = matcher.explain(runtime, request, tq_id, now).verdict
            compared += 1
            if entry["Code"] == Code.OK.value:
                eligible += 1
                assert verdict.allowed or verdict.code is Code.NOT_NOW, (text, entry, verdict)
            else:
                decided_alike += 1
                assert (verdict.layer, verdict.code.value) == (entry["Layer"], entry["Code"]), (text, entry, verdict)
    # The jobs are varied enough that both outcomes are compared many times.
    assert compared >= 100 and eligible >= 10 and decided_alike >= 10, (compared, eligible, decided_alike)


def test_an_expression_that_reads_the_jobs_own_attribute_runs_only_where_it_holds(engine, now):
    """`MinMem = 2000; Requirements = other.Memory >= MinMem && other.Memory < 3000;` runs on a 2000 MB queue
    and on no 8000 MB one: match-queues, why and the Matcher give one answer."""
    runtime = Runtime.create(load_config(CONFIG), engine)
    for requirements in ("other.Memory >= MinMem && other.Memory < 3000", "other.Memory >= my.MinMem && Memory < 3000"):
        text = f'[ Executable = "/bin/true"; CPUTime = 3000; MinMem = 2000; Requirements = {requirements}; ]'
        [job_id] = submit_jobs(runtime, ROLAND, [("mine.jdl", text)], SubmitOptions(), now)
        listed = pools_service.match_queues_for_job(runtime, ROLAND, job_id, now)
        assert "LCG.CERN.ch/ce01.cern.ch/short" in listed["eligible"]
        assert listed["rejected"]["LCG.CERN.ch/ce02.cern.ch/arm"] == "Requirements expression is false for this queue"
        why = {e["Queue"]: e for e in diagnosis.why(runtime, ADMIN, job_id, now)["Queues"]}
        assert why["LCG.CERN.ch/ce02.cern.ch/arm"]["Code"] == "NEVER"
        arm = PilotRequest(site="LCG.CERN.ch", ce="ce02.cern.ch", queue="arm", host="wn-arm", pilot_id="arm")
        assert matcher.request_job(runtime, arm, now).job is None
        short = PilotRequest(site="LCG.CERN.ch", ce="ce01.cern.ch", queue="short", host="wn-short", pilot_id="short")
        handed = matcher.request_job(runtime, short, now)
        assert handed.job is not None and handed.job["JobID"] == job_id, handed.reason


def test_a_queue_outside_the_pool_says_which_rule_left_it_out(engine, now):
    """`wms why` gives the reason `wms match-queues -v` gives, not only "not in the pool"."""
    runtime = Runtime.create(load_config(CONFIG), engine)
    text = '[ Executable = "/bin/true"; Requirements = [ Memory = 999999; ]; ]'
    [job_id] = submit_jobs(runtime, ROLAND, [("big.jdl", text)], SubmitOptions(), now)
    queues = {e["Queue"]: e for e in diagnosis.why(runtime, ADMIN, job_id, now)["Queues"]}
    entry = queues["LCG.CERN.ch/ce01.cern.ch/short"]
    assert (entry["Layer"], entry["Code"]) == ("pools", "NEVER")
    assert entry["Reason"].startswith("not in the job's SubmitPool ")
    assert entry["Reason"].endswith(": Memory: queue offers 2000, job needs 999999"), entry


def _task_queue(runtime: Runtime, job_id: int) -> int:
    from wms.services import jobs as jobs_service
    [row] = jobs_service.visible_jobs(runtime, ADMIN, [job_id])
    return row["task_queue_id"]


def test_a_pilot_whose_host_offers_what_the_first_one_lacked_gets_the_job(engine, now):
    """The static cache holds for every pilot of a queue: it is not filled from the first pilot's host."""
    runtime = Runtime.create(load_config(CONFIG), engine)
    text = '[ Executable = "/bin/true"; ResourceRequests = [ arch = "lx-amd64"; ]; ]'
    [job_id] = submit_jobs(runtime, ROLAND, [("arch.jdl", text)], SubmitOptions(), now)
    queue = dict(site="LCG.CERN.ch", ce="ce01.cern.ch", queue="long")
    bare = matcher.request_job(runtime, PilotRequest(host="wn1", pilot_id="p1", **queue), now)
    assert bare.job is None and "arch=lx-amd64 requested, not offered on any level" in bare.reason
    able = matcher.request_job(runtime, PilotRequest(host="wn2", pilot_id="p2", load={"arch": "lx-amd64"}, **queue), now)
    assert able.job is not None and able.job["JobID"] == job_id, able.reason
