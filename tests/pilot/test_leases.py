"""The job's lease on the pilot's side (pilot/leases.py) and the runner
honouring it: half the lease without an answered heartbeat stops the copy,
heartbeats never hold up the monitor, and a Running report whose answer was
lost is asked again until the server says whose the job is."""

from __future__ import annotations

import threading
import time
from shlex import quote

import pytest

from pilot.client import JobLost, NetworkError
from pilot.leases import FIRST_WAIT, KILL_SHARE, SHARE, Heartbeats, Lease, call_timeout
from pilot.runner import LEASE_MINOR, JobSpec, Limits
from tests.helpers import patience, wait_until
from tests.pilot.recorder import Recorder
from tests.pilot.test_runner import alive, run

SH = "/bin/sh"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def leased(job_id: int, script: str, start_window: float, run_lease: float, **kw) -> JobSpec:
    return JobSpec(job_id=job_id, executable=SH, arguments=f"-c {quote(script)}", lease=start_window,
                   run_lease=run_lease, **kw)


# -- the lease ----------------------------------------------------------------

def test_the_start_window_holds_until_the_first_answered_heartbeat_then_the_running_lease():
    clock = Clock()
    lease = Lease(start_window=6, run_lease=10, confirmed_at=clock(), clock=clock)
    assert lease.deadline() == 100 + SHARE * 6
    clock.now = 102.0
    lease.renew(sent_at=101.0)
    assert lease.deadline() == 101 + SHARE * 10
    clock.now = 101 + SHARE * 10 - 0.01
    assert not lease.expired()
    clock.now = 101 + SHARE * 10
    assert lease.expired()


def test_a_renewal_counts_from_when_it_was_sent_and_never_goes_back():
    clock = Clock()
    lease = Lease(start_window=6, run_lease=10, confirmed_at=clock(), clock=clock)
    lease.renew(sent_at=110.0)
    lease.renew(sent_at=105.0)          # an answer that came late, to an older heartbeat
    assert lease.deadline() == 110 + SHARE * 10


def test_a_server_that_promises_no_lease_is_never_honoured_by_a_kill():
    lease = Lease(start_window=300, run_lease=None, confirmed_at=0.0, clock=lambda: 1e9)
    assert lease.deadline() is None and not lease.expired()
    assert lease.kill_grace(10) == 10 and lease.renewal_interval(60) == 60


def test_the_kill_grace_and_heartbeats_fit_in_the_lease():
    lease = Lease(start_window=6, run_lease=10, confirmed_at=0.0)
    assert lease.kill_grace(10) == KILL_SHARE * 6
    assert lease.renewal_interval(60) == pytest.approx(SHARE * 6 / 4)
    assert lease.renewal_interval(0.5) == 0.5
    assert call_timeout(30, 6, 10) == pytest.approx(SHARE * 6 / 4)
    assert call_timeout(30, 300, None) == 30


def test_heartbeats_renew_the_lease_and_stop_at_a_kill():
    clock = Clock()
    lease = Lease(start_window=6, run_lease=10, confirmed_at=clock(), clock=clock)
    answers = iter([False, False, True])

    def send() -> bool:
        clock.now += 1
        return next(answers)

    beats = Heartbeats(send, lease, interval=0.01).start()
    wait_until(lambda: beats.verdict, timeout=10, what="the kill")
    assert beats.verdict == "Killed" and beats.sent == 3
    assert lease.span == 10 and lease.deadline() == 101 + SHARE * 10


def test_a_refused_heartbeat_makes_the_job_lost():
    def send() -> bool:
        raise JobLost(409, "attempt 1 is over")

    beats = Heartbeats(send, Lease(6, 10, 0.0), interval=0.01).start()
    assert wait_until(lambda: beats.verdict, timeout=10, what="the refusal") == "Lost"



def test_the_heartbeat_thread_starts_only_when_the_first_heartbeat_is_due():
    clock = Clock()
    sent = threading.Event()
    lease = Lease(start_window=300, run_lease=600, confirmed_at=clock(), clock=clock)
    beats = Heartbeats(lambda: sent.set() or False, lease, interval=60)
    assert beats.start_when_due() == pytest.approx(FIRST_WAIT)      # a second after the start
    clock.now += 0.4
    assert beats.start_when_due() == pytest.approx(FIRST_WAIT - 0.4)
    assert not beats.started
    clock.now += 0.6
    assert beats.start_when_due() is None and beats.started          # due: started, and it sends at once
    assert wait_until(sent.is_set, timeout=10, what="the first heartbeat")
    beats.stop()


def test_a_job_over_before_its_first_heartbeat_never_had_the_thread():
    beats = Heartbeats(lambda: False, Lease(300, 600, 0.0, clock=Clock()), interval=60)
    beats.stop()
    assert beats.start_when_due() is None
    beats.keep_going()
    assert not beats.started


def test_a_job_being_stopped_keeps_its_heartbeats_going_from_when_they_are_due():
    clock = Clock()
    sent = threading.Event()
    beats = Heartbeats(lambda: sent.set() or False, Lease(300, 600, clock(), clock=clock), interval=60)
    beats.keep_going()                                              # started, the first still a second off
    assert beats.started and beats.start_when_due() is None and not sent.wait(0.3)
    clock.now += FIRST_WAIT
    beats.stop()


# -- the runner ---------------------------------------------------------------

def test_a_cut_off_pilot_stops_its_copy_at_half_the_lease_and_reports_nothing_more(tmp_path):
    def cut(_n: int) -> None:
        raise NetworkError("timed out")

    spec = leased(31, "echo $$ > leader.pid; exec sleep 300", start_window=2, run_lease=4)
    t0 = time.monotonic()
    result, rec = run(spec, tmp_path, Recorder(on_heartbeat=cut), heartbeat_interval=0.2)
    took = time.monotonic() - t0
    assert (result.status, result.minor_status) == ("Expired", LEASE_MINOR)
    # Stopped once half the start window had passed, and dead before the whole of it.
    assert SHARE * 2 <= took < patience(2)
    assert rec.kinds[0] == "Running" and set(rec.kinds[1:]) == {"heartbeat"}
    assert not alive(int((tmp_path / "31" / "leader.pid").read_text()))


def test_a_heartbeat_hanging_on_the_network_does_not_delay_noticing_the_end(tmp_path):
    hanging = threading.Event()

    def hang(_n: int) -> None:
        hanging.set()
        time.sleep(30)                   # a heartbeat stuck on a cut link

    spec = leased(32, "while [ ! -e release ]; do sleep 0.05; done", start_window=300, run_lease=600)
    threading.Thread(target=lambda: (wait_until(hanging.is_set, timeout=60, what="a heartbeat under way"),
                                     (tmp_path / "32" / "release").touch()), daemon=True).start()
    t0 = time.monotonic()
    result, rec = run(spec, tmp_path, Recorder(on_heartbeat=hang), heartbeat_interval=0.1)
    assert result.status == "Done"
    assert time.monotonic() - t0 < patience(10)
    assert rec.kinds[-2:] == ["output", "Done"]


def test_a_heartbeat_hanging_on_the_network_does_not_delay_a_limit(tmp_path):
    def hang(_n: int) -> None:
        time.sleep(30)

    spec = leased(33, "exec sleep 300", start_window=300, run_lease=600, limits=Limits(h_rt=1))
    t0 = time.monotonic()
    result, _ = run(spec, tmp_path, Recorder(on_heartbeat=hang), heartbeat_interval=0.1)
    assert (result.status, result.minor_status) == ("Failed", "Exceeded h_rt (1 s)")
    assert time.monotonic() - t0 < patience(10)


def test_a_lost_answer_to_the_running_report_is_asked_again_and_the_job_starts(tmp_path):
    tries = []

    def answer_lost(status: str) -> None:
        if status == "Running":
            tries.append(time.monotonic())
            if len(tries) <= 2:
                raise NetworkError("connection reset")

    spec = leased(34, "touch started", start_window=30, run_lease=60)
    result, rec = run(spec, tmp_path, Recorder(on_status=answer_lost))
    assert result.status == "Done"
    assert len(tries) == 3 and (tmp_path / "34" / "started").exists()
    assert tries[-1] - tries[0] < patience(10)          # seconds, not the heartbeat timeout


def test_a_repeated_running_report_refused_starts_nothing(tmp_path):
    tries = []

    def lost_then_gone(status: str) -> None:
        tries.append(status)
        if len(tries) == 1:
            raise NetworkError("connection reset")
        raise JobLost(409, "job 35 was handed out again: attempt 1 is over")

    spec = leased(35, "touch started", start_window=30, run_lease=60)
    result, _ = run(spec, tmp_path, Recorder(on_status=lost_then_gone))
    assert (result.status, result.minor_status) == ("Lost", "No longer this pilot's job")
    assert tries == ["Running", "Running"] and not (tmp_path / "35" / "started").exists()


def test_no_answer_within_the_start_window_starts_nothing(tmp_path):
    def down(status: str) -> None:
        raise NetworkError("connection refused")

    spec = leased(36, "touch started", start_window=1.5, run_lease=60)
    t0 = time.monotonic()
    result, _ = run(spec, tmp_path, Recorder(on_status=down))
    assert (result.status, result.minor_status) == ("Lost", "Running not confirmed")
    assert time.monotonic() - t0 < patience(10)
    assert not (tmp_path / "36" / "started").exists()
