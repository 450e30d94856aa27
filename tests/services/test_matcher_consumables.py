"""Consumables and exclusive complexes in the Matcher, on SQLite, PostgreSQL
and MariaDB, at each level that can define them (global, host, queue):

* a consumable found full for one task queue still serves the task queues
  that need less of it (complex(5): the bookkeeping decides per job
  category), whatever order the task queues are tried in;
* an EXCL complex gives its level to one job: complex(5) "the result of the
  comparison is only true if a job requests to be exclusive and no other
  exclusive or non-exclusive jobs uses the complex. If the job does not
  request to be exclusive and no other exclusive job uses the complex the
  comparison is also true."
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.helpers import ADMIN, as_pilot, ROLAND, run_concurrently
from wms.config import load_config
from wms.core.match.context import PilotRequest
from wms.services import diagnosis
from wms.services import jobs as jobs_service
from wms.services import matcher
from wms.services import leases
from wms.services.runtime import Runtime
from wms.services.submission import SubmitOptions, submit_jobs

pytestmark = pytest.mark.databases

SITE, CE, QUEUE = "TEST.Local.ch", "ce", "q"
QNAME = f"{SITE}/{CE}/{QUEUE}"
HOST = "wn01"
LEVELS = ("global", "host", "queue")

COMPLEXES = """
complexes:
  - {name: scratch, shortcut: scr, type: MEMORY, relop: "<=", requestable: YES, consumable: YES, default: 2G, urgency: 0}
  - {name: excl2, shortcut: ex2, type: BOOL, relop: EXCL, requestable: YES, consumable: YES, default: 0, urgency: 1000}
users:
  roland: {group: lhcb_user, vo: lhcb}
"""


def flow(values: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in values.items()) + "}"


def make_runtime(engine, directory: Path, level: str, values: dict[str, str]) -> Runtime:
    """A one-queue system whose ``level`` holds ``values``; wn01 is always a
    configured host (its own usage rows), wn02 is not."""
    directory.mkdir(parents=True, exist_ok=True)
    at = {name: values if name == level else {} for name in LEVELS}
    (directory / "cluster.yaml").write_text(
        COMPLEXES + f"global: {{complex_values: {flow(at['global'])}}}\n"
        f"hosts:\n  {HOST}: {{complex_values: {flow({'num_proc': '8', **at['host']})}}}\n")
    (directory / "resources.yaml").write_text(f"""
Sites:
  {SITE}:
    CEs:
      {CE}:
        Platform: x86_64-el9
        Queues:
          {QUEUE}:
            CPUTime: 86400
            NumberOfProcessors: 4
            complex_values: {flow({'slots': '100', **at['queue']})}
""")
    (directory / "wms.yaml").write_text("")
    (directory / "operations.yaml").write_text("Shares: {lhcb_user: 1000}\n")
    return Runtime.create(load_config(directory), engine)


def pilot(pid: str, host: str = HOST, slots: int = 1) -> PilotRequest:
    return PilotRequest(site=SITE, ce=CE, queue=QUEUE, host=host, pilot_id=pid, slots=slots,
                        load={"arch": "lx-amd64", "num_proc": 8}, platform="x86_64-el9", cpu_time_left=200000)


def jdl(requests: str = "", processors: int = 1) -> str:
    extra = f" ResourceRequests = [ {requests} ];" if requests else ""
    return f'[ Executable = "/bin/true"; CPUTime = 300; NumberOfProcessors = {processors};{extra} ]'


def submit(runtime, now, *texts) -> list[int]:
    return submit_jobs(runtime, ROLAND, [(f"j{i}.jdl", t) for i, t in enumerate(texts)], SubmitOptions(), now)


def match(runtime, now, request, seed=None):
    return matcher.request_job(runtime, request, now, random.Random(seed))


def matched(runtime, now, request, seed=None) -> int:
    result = match(runtime, now, request, seed)
    assert result.job is not None, result.reason
    return result.job["JobID"]


def consumables(runtime, level: str) -> dict[str, str]:
    """What `wms queues` shows of the level's consumables."""
    name = {"global": "global", "host": HOST, "queue": QNAME}[level]
    [row] = [r for r in diagnosis.queues_overview(runtime) if r["Kind"] == level and r["Name"] == name]
    return row["Consumables"]


def finish(runtime, now, job_id, pid) -> None:
    leases.pilot_status(runtime, as_pilot(pid), job_id, pid, "Done", "", 0, now)


# ---------------------------------------------------------------- a full consumable per task queue
@pytest.mark.parametrize("level", LEVELS)
def test_a_pilot_gets_a_small_job_when_the_big_ones_do_not_fit(engine, tmp_path, now, level):
    """5G of scratch, 2G by default: two plain jobs leave 1G, which still
    holds eight jobs of 120M whatever order the task queues are tried in."""
    runtime = make_runtime(engine, tmp_path / "config", level, {"scratch": "5G"})
    submit(runtime, now, jdl(), jdl())
    first = [matched(runtime, now, pilot(f"plain{i}")) for i in range(2)]
    [plain] = submit(runtime, now, jdl())
    small = submit(runtime, now, *[jdl('scratch = "120M"')] * 8)
    got = [matched(runtime, now, pilot(f"small{seed}"), seed) for seed in range(8)]
    assert sorted(got) == small
    result = match(runtime, now, pilot("late"))
    assert result.job is None
    assert f"{level} scratch: 2G needed, 64M of 5G free" in result.reason
    finish(runtime, now, first[0], "plain0")
    assert matched(runtime, now, pilot("after")) == plain


@pytest.mark.parametrize("level", LEVELS)
def test_the_last_free_slot_goes_to_a_one_slot_job(engine, tmp_path, now, level):
    """3 slots, 2 taken: a 2-slot job does not fit, a 1-slot job does, in any order."""
    runtime = make_runtime(engine, tmp_path / "config", level, {"slots": "3"})
    submit(runtime, now, jdl(processors=2))
    matched(runtime, now, pilot("first", slots=2))
    [big] = submit(runtime, now, jdl(processors=2))
    for seed in range(6):
        [one] = submit(runtime, now, jdl())
        assert matched(runtime, now, pilot(f"p{seed}", slots=2), seed) == one
        result = match(runtime, now, pilot(f"none{seed}", slots=2), seed)
        assert result.job is None and f"{level} slots: 2 needed, 0 of 3 free" in result.reason
        finish(runtime, now, one, f"p{seed}")
    assert jobs_service.job_status(runtime, ADMIN, [big])[0]["Status"] == "Waiting"


# ---------------------------------------------------------------- EXCL
@pytest.mark.parametrize("level", LEVELS)
def test_an_exclusive_job_keeps_every_other_job_away(engine, tmp_path, now, level):
    runtime = make_runtime(engine, tmp_path / "config", level, {"excl2": "true"})
    [exclusive] = submit(runtime, now, jdl("excl2 = true"))
    assert matched(runtime, now, pilot("a", slots=2)) == exclusive
    assert consumables(runtime, level)["excl2"] == "exclusive"
    [plain] = submit(runtime, now, jdl())
    result = match(runtime, now, pilot("a", slots=1))            # the same pilot's other slot
    assert result.job is None and f"{level} excl2: job {exclusive} runs there exclusively" in result.reason
    [other] = submit(runtime, now, jdl("excl2 = true"))
    result = match(runtime, now, pilot("b"))
    assert result.job is None and f"job {exclusive} runs there" in result.reason
    if level == "host":             # another host is not that level
        assert matched(runtime, now, pilot("c", host="wn02")) == plain
    finish(runtime, now, exclusive, "a")
    assert matched(runtime, now, pilot("d")) in (plain, other)


@pytest.mark.parametrize("level", LEVELS)
def test_an_exclusive_job_waits_until_no_job_runs_there(engine, tmp_path, now, level):
    runtime = make_runtime(engine, tmp_path / "config", level, {"excl2": "true"})
    plain = submit(runtime, now, jdl(), jdl())
    assert sorted(matched(runtime, now, pilot(f"p{i}")) for i in range(2)) == plain
    [exclusive] = submit(runtime, now, jdl("excl2 = true"))
    result = match(runtime, now, pilot("x", slots=2))
    assert result.job is None
    assert (f"{level} excl2: an exclusive job needs it to itself, but jobs {plain[0]}, {plain[1]} run there"
            in result.reason)
    # Plain jobs still share the level with each other.
    [third] = submit(runtime, now, jdl())
    assert matched(runtime, now, pilot("p2")) == third
    assert consumables(runtime, level)["excl2"] == "3 jobs"
    for pid, job_id in zip(("p0", "p1", "p2"), (*plain, third)):
        finish(runtime, now, job_id, pid)
    assert matched(runtime, now, pilot("x", slots=2)) == exclusive


def test_exclusivity_nobody_offers_is_refused(engine, tmp_path, now):
    runtime = make_runtime(engine, tmp_path / "config", "host", {"excl2": "true"})
    submit(runtime, now, jdl("excl2 = true"))
    result = match(runtime, now, pilot("p", host="wn02"))
    assert result.job is None
    assert "excl2=TRUE requested, but no level of host wn02 or this queue offers it" in result.reason


@pytest.mark.parametrize("level", ("global", "queue"))
def test_why_names_the_exclusive_job_and_the_jobs_in_the_way(engine, tmp_path, now, level):
    runtime = make_runtime(engine, tmp_path / "config", level, {"excl2": "true"})
    [exclusive] = submit(runtime, now, jdl("excl2 = true"))
    matched(runtime, now, pilot("a"))
    [plain] = submit(runtime, now, jdl())
    [entry] = diagnosis.why(runtime, ADMIN, plain, now)["Queues"]
    assert entry["Reason"] == f"{level} excl2: job {exclusive} runs there exclusively"
    finish(runtime, now, exclusive, "a")
    matched(runtime, now, pilot("b"))
    [waiting] = submit(runtime, now, jdl("excl2 = true"))
    [entry] = diagnosis.why(runtime, ADMIN, waiting, now)["Queues"]
    assert entry["Reason"] == (f"{level} excl2: an exclusive job needs it to itself, but job {plain} runs there")


@pytest.mark.parametrize("level", LEVELS)
def test_many_pilots_at_once_never_share_an_exclusive_level(engine, tmp_path, now, level):
    runtime = make_runtime(engine, tmp_path / "config", level, {"excl2": "true"})
    exclusive = set(submit(runtime, now, *[jdl("excl2 = true")] * 4))
    submit(runtime, now, *[jdl()] * 6)
    got, errors = run_concurrently(lambda i: match(runtime, now, pilot(f"p{i}", slots=2), i).job, 8)
    assert errors == []
    ids = [job["JobID"] for job in got if job]
    assert len(ids) == len(set(ids)) >= 1
    if exclusive & set(ids):
        assert len(ids) == 1, f"an exclusive job shares {level} with {ids}"
