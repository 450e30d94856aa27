"""The job's lease as the pilot honours it, and the heartbeats that renew it.

The match answer carries two leases (HTCondor's claim leases are the model):
``Lease``, the start window (``match_lease``), which runs from the Running
report until the first heartbeat, and ``RunLease`` (``heartbeat_timeout``),
which each heartbeat renews. The server hands the job out again only when
a lease has passed in full since it recorded the last renewal; the pilot
stops its copy when half of it has passed since it *sent* its last renewal
that was answered, by its own clock. The half left is the grace: the kill
(SIGTERM, at most an eighth of the lease, then SIGKILL), a poll of the
monitor, and any difference between the rates of the two clocks. Their
offset never matters: each side measures an interval on its own clock, and
the server records a renewal after the pilot sent it
(docs/architecture.md, "Leases the pilot honours").

The clock is CLOCK_BOOTTIME where the system has it: unlike CLOCK_MONOTONIC
it goes on while the node is suspended, so a node that wakes after its
lease has passed stops its copy at the next poll.

Heartbeats run on a thread of their own, the first a second after the job
starts, sooner when little of the start window is left (it ends the start
window; a job over by then reports its end instead, one call fewer, and
never had the thread): a call that hangs on a cut network
never delays the monitor's signals, limits, or its noticing the payload's
end. Each heartbeat is one try with a short timeout; a failed one is tried
again soon, and the lease decides when to give up, not a count of retries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from pilot.client import ClientError, JobLost

log = logging.getLogger("pilot.leases")

#: The share of a lease after which the pilot stops its copy, unrenewed.
SHARE = 0.5
#: The longest SIGTERM-to-SIGKILL grace of a copy stopped for its lease, as a share of the lease.
KILL_SHARE = 0.125
#: Renewals per honoured share of the lease: a heartbeat every SHARE / RENEWALS of it, at the most,
#: and no heartbeat waits longer than that for its answer.
RENEWALS = 4
#: The least wait between two heartbeat tries (seconds): a tiny lease must not become a busy loop.
MIN_WAIT = 0.2
#: The longest wait before a job's first heartbeat (seconds).
FIRST_WAIT = 1.0


def lease_clock() -> float:
    """Seconds on a clock that never goes back and counts a suspended node's sleep."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boottime) if boottime is not None else time.monotonic()


def call_timeout(http_timeout: float, start_window: float | None, run_lease: float | None) -> float:
    """How long one heartbeat waits for its answer: a try hanging on a cut
    network must leave time for the next ones within the honoured share."""
    spans = [span for span in (start_window, run_lease) if span is not None] if run_lease is not None else []
    return min([http_timeout, *(max(MIN_WAIT, SHARE * span / RENEWALS) for span in spans)])


class Lease:
    """One attempt's lease on the pilot's side.

    ``start_window`` and ``run_lease`` are the server's seconds (None: the
    server promises no lease, the pilot holds the job until told otherwise);
    ``confirmed_at`` is when the Running report that was answered was sent.
    """

    def __init__(self, start_window: float | None, run_lease: float | None, confirmed_at: float,
                 clock: Callable[[], float] = lease_clock) -> None:
        self.start_window = start_window if run_lease is not None else None
        self.run_lease = run_lease
        self.clock = clock
        self._lock = threading.Lock()
        self._base = confirmed_at
        self._renewed = False

    @property
    def span(self) -> float | None:
        """The server's lease now: the start window until a heartbeat was answered, then the running lease."""
        with self._lock:
            return self.run_lease if self._renewed else self.start_window

    def renew(self, sent_at: float) -> None:
        """A heartbeat sent at ``sent_at`` was answered: the job is ours from then on."""
        with self._lock:
            if not self._renewed or sent_at > self._base:
                self._base = sent_at
            self._renewed = True

    def deadline(self) -> float | None:
        """When the pilot must stop its copy (on ``clock``), or None when it need not."""
        with self._lock:
            span = self.run_lease if self._renewed else self.start_window
            return None if span is None else self._base + SHARE * span

    def expired(self) -> bool:
        deadline = self.deadline()
        return deadline is not None and self.clock() >= deadline

    def kill_grace(self, grace: float) -> float:
        """The grace of a copy stopped for its lease: short enough to end well within the server's grace."""
        span = self.span
        return grace if span is None else min(grace, KILL_SHARE * span)

    def renewal_interval(self, heartbeat_interval: float) -> float:
        """Seconds between heartbeats: the pilot's own interval, or more often when the lease needs it."""
        span = self.span
        return heartbeat_interval if span is None else max(MIN_WAIT, min(heartbeat_interval,
                                                                         SHARE * span / RENEWALS))


class Heartbeats:
    """The heartbeats of one running job, on a thread of their own.

    ``send()`` is one heartbeat: True when the server answers ``Kill``; it
    raises :class:`JobLost` (HTTP 409) or another :class:`ClientError`. The
    monitor reads :attr:`verdict`: None while the job is ours, ``"Killed"``
    or ``"Lost"`` once the server said otherwise.

    The thread starts with :meth:`start`, or when the first heartbeat is due
    (:meth:`start_when_due`, which the monitor calls as it watches): a job
    that ends before then, as most short jobs do, never has one.
    """

    def __init__(self, send: Callable[[], bool], lease: Lease, interval: float, name: str = "heartbeat") -> None:
        self.send = send
        self.lease = lease
        self.interval = interval
        self.verdict: str | None = None
        # An exception no server answer explains (a defect): the monitor raises it in its own thread.
        self.fault: Exception | None = None
        self.sent = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        # The first soon: until it is recorded the server counts the start
        # window, which an outage of the server longer than it would close on
        # a job that has started (and perhaps ended) here. Not at once: a job
        # that ends within FIRST_WAIT reports its end instead, one call fewer
        # for the short jobs that are most of many VOs' work; never later than
        # a quarter of what is left of the start window's honoured share. Without a lease, as before.
        # A start confirmed late (its first report's answer lost) has little of its
        # window left: then the first goes at once, as the later ones would.
        deadline = lease.deadline()
        first = interval if deadline is None else min(FIRST_WAIT, max(0.0, (deadline - lease.clock()) / RENEWALS))
        self._first_at = lease.clock() + first

    def start(self) -> Heartbeats:
        self._thread.start()
        return self

    @property
    def started(self) -> bool:
        """Whether the thread was started."""
        return self._thread.ident is not None

    def start_when_due(self) -> float | None:
        """Start the thread if the first heartbeat is due; else the seconds
        until it is (None once started or stopped): the monitor wakes by then."""
        if self.started or self._done.is_set():
            return None
        left = self._first_at - self.lease.clock()
        if left > 0:
            return left
        self.keep_going()
        return None

    def keep_going(self) -> None:
        """Start the thread now if it has not started (its first heartbeat
        still waits until due): a job being stopped keeps its lease while
        it takes its grace."""
        if not self.started and not self._done.is_set():
            self._thread.start()

    def stop(self) -> None:
        """No more heartbeats; does not wait for one under way (it may hang on a cut network)."""
        self._done.set()

    def _run(self) -> None:
        wait = max(0.0, self._first_at - self.lease.clock())
        while not self._done.wait(wait):
            sent_at = self.lease.clock()
            self.sent += 1
            try:
                kill = self.send()
            except JobLost as exc:
                log.warning("heartbeat: job is no longer ours (%s)", exc)
                self.verdict = "Lost"
                return
            except ClientError as exc:
                # Soon again: the lease, not a count of tries, says when to give up.
                wait = max(MIN_WAIT, self.lease.renewal_interval(self.interval) / RENEWALS)
                log.warning("heartbeat failed (%s); again in %.1f s", exc, wait)
                continue
            except Exception as exc:  # a defect of ours: the monitor raises it, as the runner's own
                self.fault = exc
                return
            if kill:
                self.verdict = "Killed"
                return
            self.lease.renew(sent_at)
            wait = self.lease.renewal_interval(self.interval)
