"""Users' and operators' job controls racing real pilots, on SQLite,
PostgreSQL and MariaDB (tests/faults/pilot_world.py).

Pilots are real processes on the loopback, talking to a real `wms server`
through the tests' forwarder, whose gate can hold a pilot's Running report
back: the pilot has claimed its job (Matched) and starts nothing until the
report is answered. Each payload writes down every copy of itself, so
"never started" is read from the node, not from the server's word.

The promises: a job held or deleted before its pilot's confirmation never
starts, and its pilot is refused; an alter of a claimed job is refused and
changes nothing; a pilot frozen while its job is rescheduled (qmod -rj)
reports late and is refused, the job Done once by the attempt that
followed; deletes racing several pilots' claims leave every deleted job
Deleted, none started that no pilot had confirmed Running, a confirmed one
killed by the deletion (or ended before it), nothing debited, and every
other job Done once.
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator

import pytest

from tests.faults.pilot_world import World, world_running
from tests.helpers import patience, wait_until
from wms.db import matching as match_db

#: Idle pilots ask again within 0.1 s, at most 0.8 s (pilot/backoff.py): the tests wait on them.
QUICK = ("--poll", "0.1")


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def world(request, tmp_path, database_factory) -> Iterator[World]:
    url = None if request.param == "sqlite" else database_factory(request.param)
    with world_running(tmp_path, url) as world:
        yield world


def status(world: World, job_id: int) -> str:
    with world.server.api(world.server.issued["admin"]) as api:
        [row] = api.get("/jobs", params={"job_id": job_id}).raise_for_status().json()
    return row["Status"]


def steps(world: World, job_id: int) -> list[tuple[str, str, str]]:
    return [(h["Status"], h["MinorStatus"], h["Source"]) for h in world.history(job_id)]


def claimed_and_waiting_at_the_gate(world: World, job_id: int) -> None:
    """Until the pilot has claimed ``job_id`` and its Running report waits at the gate."""
    gate = world.forwarder
    wait_until(lambda: gate.reports_at_gate > gate.reports_through_gate, timeout=patience(30),
               what=f"the Running report of job {job_id} at the gate", details=world.details)
    assert status(world, job_id) == "Matched"


def let_through(world: World) -> None:
    """Open the gate until the reports held at it have gone through, then close it again."""
    gate = world.forwarder
    gate.open_gate()
    wait_until(lambda: gate.reports_through_gate == gate.reports_at_gate, timeout=patience(10),
               what="the held reports through the gate", details=world.details)
    gate.close_gate()


def refusals(world: World, pilot: str) -> int:
    return world.log(pilot).count("job is no longer ours")


def nothing_debited(world: World) -> bool:
    with world.runtime.engine.connect() as conn:
        return not any(match_db.all_usage(conn).values())


def test_a_job_held_or_deleted_before_its_pilot_confirms_never_starts_and_an_alter_is_refused(world):
    server, roland, oper = world.server, world.server.issued["roland"], world.server.issued["oper"]
    world.forwarder.close_gate()
    # Held while its pilot's Running report is on the way: taken back, the pilot refused.
    [held] = world.submit(1)
    # After the first job: a pilot asks for its pools as it starts. Its calls wait at the gate, not time out.
    world.pilot("p", None, "--slots", "1", "--http-timeout", "60", *QUICK)
    claimed_and_waiting_at_the_gate(world, held)
    assert server.ok("hold", str(held), "--reason", "wrong input", token=roland) == f"{held} held\n"
    let_through(world)
    wait_until(lambda: refusals(world, "p") == 1, timeout=patience(20), what="the pilot refused",
               details=world.details)

    # Deleted likewise: killed and deleted, the pilot refused.
    [deleted] = world.submit(1)
    claimed_and_waiting_at_the_gate(world, deleted)
    assert server.ok("delete", str(deleted), token=oper) == f"{deleted} deleted\n"
    let_through(world)
    wait_until(lambda: refusals(world, "p") == 2, timeout=patience(20), what="the pilot refused again",
               details=world.details)

    # An alter of a claimed job is refused whole, and the job runs as submitted.
    [altered] = world.submit(1)
    claimed_and_waiting_at_the_gate(world, altered)
    refused = server.wms("alter", "-N", "renamed", str(altered), token=roland)
    assert refused.returncode == 1 and f"job {altered}: it is Matched on " in refused.stderr, refused
    world.forwarder.open_gate()
    wait_until(lambda: status(world, altered) == "Done", timeout=patience(30), what="the claimed job Done",
               details=world.details)

    # Released, the held job runs as a new attempt.
    assert server.ok("release", str(held), token=roland) == f"{held} released\n"
    wait_until(lambda: status(world, held) == "Done", timeout=patience(30), what="the released job Done",
               details=world.details)

    assert status(world, deleted) == "Deleted" and world.copies(deleted) == []
    assert "Running" not in [s for s, _, _ in steps(world, deleted)]
    assert [s for s, _, _ in steps(world, deleted)][-2:] == ["Killed", "Deleted"]
    [copy] = world.copies(held)              # one copy, from the attempt after the release
    assert copy.ended
    held_steps = steps(world, held)
    assert [s for s, _, _ in held_steps][-6:] == ["Matched", "Held", "Waiting", "Matched", "Running", "Done"]
    assert held_steps[-5][1:] == ("Held by the user roland: wrong input (taken back from pilot p before it "
                                  "started)", "User roland")
    [ran] = world.copies(altered)
    assert ran.ended and world.server.json("status", str(altered), token=roland)[0]["JobName"] != "renamed"
    assert nothing_debited(world)


def test_a_frozen_pilots_late_report_after_a_reschedule_and_deletes_racing_claims(world):
    server, roland, oper = world.server, world.server.issued["roland"], world.server.issued["oper"]

    # A pilot frozen (SIGSTOP) while its job runs; an operator reschedules the job (qmod -rj).
    [late] = world.submit(3)
    world.pilot("frozen", None, "--slots", "1", *QUICK)
    world.wait_running(late, "frozen")
    frozen = world.pilots["frozen"][0]
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        assert server.ok("reschedule", "--running", "--reason", "node drained", str(late),
                         token=oper) == f"{late} rescheduled\n"
        world.pilot("second", None, "--slots", "1", *QUICK)
        wait_until(lambda: status(world, late) == "Done", timeout=patience(30), what="the second attempt Done",
                   details=world.details)
        # The frozen pilot's payload ran on; once it has ended, the pilot wakes up and reports it.
        wait_until(lambda: all(c.ended for c in world.copies(late)), timeout=patience(20),
                   what="the frozen pilot's copy ended", details=world.details)
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    wait_until(lambda: "ended:" in world.log("frozen"), timeout=patience(20), what="the frozen pilot's job over",
               details=world.details)
    first, second = world.copies(late)
    assert "/pilots/frozen/" in first.job_dir and "/pilots/second/" in second.job_dir
    late_steps = steps(world, late)
    assert [s for s, _, _ in late_steps].count("Done") == 1
    assert late_steps[-1][0] == "Done" and late_steps[-1][2] == "Pilot second"
    assert ("Waiting", "Rescheduled by oper: node drained", "Operator oper") in late_steps
    assert not [s for s in late_steps[late_steps.index(("Waiting", "Rescheduled by oper: node drained",
                                                          "Operator oper")):] if s[2] == "Pilot frozen"]
    assert world.output(late).strip() == f"copy {second.path}"

    # Deletes racing the claims of four pilots.
    batch = world.submit(1, count=12)
    for name in ("a", "b"):
        world.pilot(name, None, "--slots", "2", *QUICK)
    doomed = sorted(random.Random(len(batch)).sample(batch, 6))
    wait_until(lambda: any(status(world, j) != "Waiting" for j in batch), timeout=patience(30),
               what="the pilots claiming", details=world.details)
    deleted = server.ok("delete", *map(str, doomed), token=roland).split()
    assert sorted(int(j) for j in deleted[::2]) == doomed
    survivors = [j for j in batch if j not in doomed]
    wait_until(lambda: all(status(world, j) == "Done" for j in survivors), timeout=patience(60),
               what="the other jobs Done", details=world.details)
    for job_id in doomed:
        states = [s for s, _, _ in steps(world, job_id)]
        assert status(world, job_id) == "Deleted" and states[-1] == "Deleted", (job_id, states)
        if "Running" not in states:
            assert world.copies(job_id) == [], (job_id, states)   # never confirmed: never started
        else:                  # confirmed before the deletion: it ran to its end first, or the deletion killed it
            assert states[-2] in ("Killed", "Done"), (job_id, states)
    for job_id in survivors:
        assert [s for s, _, _ in steps(world, job_id)].count("Done") == 1
        [copy] = world.copies(job_id)
        assert copy.ended
    wait_until(lambda: nothing_debited(world), timeout=patience(20), what="every debit returned",
               details=world.details)
