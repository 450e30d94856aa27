"""Leases the pilot honours, across real network cuts (tests/faults/netcuts.py).

The server (`wms server` on SQLite or PostgreSQL) is on one side; each
pilot runs in a network namespace of its own behind a veth pair, and the
links are cut with ``ip link set DEV down``. Every copy of a payload writes
its own start, beat (every 50 ms) and end times, with the pilot's job
directory, so that overlap is measured, not guessed. The leases are short
(``match_lease`` 8 s, the start window; ``heartbeat_timeout`` 12 s, the
running lease) and the lease reaper runs every half second.

Asserted in every case: no two copies of a job overlap, each job is Done
once with the output of the copy that ran last, no job is left unfinished,
and nothing is left debited.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.faults.netcuts import Weather, require_netns
from tests.faults.pilot_world import World, world_running
from tests.helpers import patience, wait_until
from tests.servers import edited_config

START_WINDOW = 8          # match_lease: the pilot stops an unconfirmed start after half of it
RUN_LEASE = 12            # heartbeat_timeout: the pilot stops a cut-off copy after half of it
SETTINGS = {"match_lease: 300": f"match_lease: {START_WINDOW}",
            "heartbeat_timeout: 1800": f"heartbeat_timeout: {RUN_LEASE}"}


@pytest.fixture(params=["sqlite", "postgresql"])
def world(request, tmp_path, database_factory) -> Iterator[World]:
    require_netns()
    url = None if request.param == "sqlite" else database_factory(request.param)
    with world_running(tmp_path, url, edited_config(tmp_path / "config-source", SETTINGS), reaper_period=0.5) as world:
        yield world


def minors(world: World, job_id: int) -> list[tuple[str, str]]:
    return [(h["Status"], h["MinorStatus"]) for h in world.history(job_id)]


def test_cut_off_pilots_stop_their_copies_before_the_jobs_run_elsewhere(world):
    """A cut longer than the lease during a job, healed after the job ran
    elsewhere; a short blip; a Running report whose answer is lost with a
    short cut, and one whose pilot never comes back."""
    cut_long, blip, answer_cut, answer_gone, spare = (world.link() for _ in range(5))

    [long_job] = world.submit(45)     # long enough to be cut in the middle, whatever the set-up took
    world.pilot("long", cut_long, "--slots", "1")
    world.wait_running(long_job, "long")

    [blip_job] = world.submit(30)     # its pilot busy until the others hold their jobs, however quick they are
    world.pilot("blip", blip, "--slots", "1")
    world.wait_running(blip_job, "blip")

    blip.cut()
    time.sleep(2)                        # the blip: 2 s, a third of what the pilot tolerates
    blip.heal()

    # The answer to a recorded Running report lost, the link down 2 s: the pilot asks again and starts it.
    world.forwarder.lose_running_answer[answer_cut.pilot_address] = (answer_cut, 2.0)
    [answered_job] = world.submit(12)  # its pilot busy until the next job went to the pilot meant for it
    world.pilot("answer-cut", answer_cut, "--slots", "1")
    # ... and lost for good: the job goes back after its start window, not the heartbeat timeout.
    world.forwarder.lose_running_answer[answer_gone.pilot_address] = (answer_gone, None)
    wait_until(lambda: world.forwarder.answers_lost, timeout=patience(30), what="the first answer lost",
               details=world.details)
    [lost_job] = world.submit(2)
    world.pilot("answer-gone", answer_gone, "--slots", "1")
    wait_until(lambda: len(world.forwarder.answers_lost) == 2, timeout=patience(30), what="the second answer lost",
               details=world.details)

    # Cut only now: the long job back in the queue any earlier would be the next job
    # of whichever of the pilots above asked first (one task queue, the oldest job first).
    cut_long.cut()
    world.pilot("spare", spare, "--slots", "2")

    # The long cut outlasts the running lease: the job runs again on the spare pilot; then the link heals.
    wait_until(lambda: any("/pilots/long/" not in c.job_dir for c in world.copies(long_job)), timeout=patience(60),
               what="the cut-off job run by another pilot", details=world.details)
    cut_long.heal()

    copies = world.check()
    # The cut-off copy was stopped, unreported, by its own pilot; the second ran to its end.
    first, second = copies[long_job]
    assert "/pilots/long/" in first.job_dir and not first.ended
    assert "/pilots/long/" not in second.job_dir and second.ended
    assert ("Stalled", "No heartbeat from the pilot") in minors(world, long_job)
    assert "Lease expired" in world.log("long")
    # The blip killed nothing and rescheduled nothing.
    [blip_copy] = copies[blip_job]
    assert blip_copy.ended and "Stalled" not in [s for s, _ in minors(world, blip_job)]
    # The lost answer cost seconds: asked again, the job started on the same pilot, once.
    [answered] = copies[answered_job]
    assert "/pilots/answer-cut/" in answered.job_dir
    assert "Stalled" not in [s for s, _ in minors(world, answered_job)]
    # The pilot that never heard back started nothing; the job went back after its start window.
    [elsewhere] = copies[lost_job]
    assert "/pilots/answer-gone/" not in elsewhere.job_dir
    assert ("Stalled", "No heartbeat since the pilot reported it Running") in minors(world, lost_job)


def test_delay_jitter_and_loss_between_several_pilots_and_the_server(world):
    """150 +/- 50 ms each way, 5% of chunks lost (sent again late, or the
    connection reset): every job Done once, no copy overlapping another."""
    world.forwarder.weather = Weather(delay=0.15, jitter=0.05, loss=0.05)
    jobs = world.submit(1, count=16)
    for i in range(4):
        world.pilot(f"p{i}", world.link(), "--slots", "2")
    copies = world.check()
    assert set(copies) == set(jobs)
    assert world.forwarder.delayed + world.forwarder.resets > 0
