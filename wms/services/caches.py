"""What one process keeps between requests, each cache by name and type
(``Runtime.caches``).

Three lifetimes:

* **per configuration**: derived from the configuration files and the
  complex table (task-queue views, static verdicts, the global and queue
  levels, the reservation calendar's candidates, the rule sets of
  config/rqs/). A new configuration is a new Runtime; a new complex table
  (qconf -Mc) calls ``complex_table_changed``, which drops exactly these.
* **short-lived**: the waiting task queues and what is drawn from them
  (``waiting``), the active reservations (``reservations``): reread after
  a second, or at once when this process changes them (``forget``).
* **for the process's life**: the usage rows known to exist, the stored
  object versions this process adopted, the quota state it uses.

The server runs requests on a thread pool: each cache is safe to share.
Values are computed outside any lock (two threads may compute the same
one; both get a correct answer) and stored whole, so a reader never sees
half of a value.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from wms.core.complexes import ComplexTable
from wms.core.match.choice import WeightedDraw
from wms.core.match.context import TaskQueueView
from wms.core.match.reservations import ReservationView
from wms.core.offers import LevelValues
from wms.core.match.framework import StaticVerdicts
from wms.core.quotas.evaluate import QuotaRules
from wms.core.quotas.filters import Groups
from wms.core.quotas.model import RuleSet
from wms.core.reservations.grant import Candidate

T = TypeVar("T")
# (tq_id, priority, submit pool) of each task queue with waiting jobs
TaskQueueList = list[tuple[int, int, str | None]]

# Seconds a process reuses its list of task queues with waiting jobs. A task
# queue that empties meanwhile just yields no job; one that another server
# process creates is seen at most this late, plus one read of the list
# (Waiting; submissions in this process clear the list at once).
CANDIDATES_TTL = 1.0
# Seconds a process reuses its list of active reservations: a reservation
# granted or changed by another server process is seen at most this late.
RESERVATIONS_TTL = 1.0


class Timed(Generic[T]):
    """One value, reloaded when older than ``ttl`` seconds or forgotten."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._value: tuple[float, T] | None = None

    def get(self, load: Callable[[], T]) -> T:
        held = self._value
        now = time.monotonic()
        if held is None or now - held[0] > self.ttl:
            held = self._value = (now, load())
        return held[1]

    def forget(self) -> None:
        self._value = None


@dataclass(frozen=True)
class Candidates:
    """The task queues with waiting jobs one kind of pilot may take, ready to draw from."""

    draw: WeightedDraw
    views: dict[int, TaskQueueView]
    # The owners or VOs whose jobs wait in the pilot's pools but are not its
    # to take ("VO x", "user y"): what an idle pilot is told.
    others: tuple[str, ...]


# Whom the candidates are for: the queue, the pools its pilot serves (None:
# those of the queue), the pilot's VO and, for a pilot that cannot isolate
# its payloads, its owner.
CandidatesKey = tuple[str, tuple[str, ...] | None, str | None, str | None]


@dataclass
class WaitingGeneration:
    """One reading of the waiting task queues and what was drawn from it."""

    since: float
    task_queues: list[tuple[int, int, str | None]] | None = None
    # queue name -> the pools it serves (getSubmitPoolsForQueue)
    pools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    candidates: dict[CandidatesKey, Candidates] = field(default_factory=dict)


class Waiting:
    """The short-lived view of the waiting work: a new generation after
    ``ttl`` seconds or when jobs became waiting in this process.

    When a generation grows old, a thread of its own reads the next while
    the requests go on with the old one. Under load the read took 30-60 ms
    on MariaDB (its rows parsed in Python while other threads want the
    interpreter), and every request thread of the process used to wait for
    it at once, each reading the same list: a stall of the whole process
    every second. A generation is therefore used up to the length of one
    read past ``ttl``. After ``forget`` nobody uses the old one: the jobs
    just made waiting must be seen at once, so the request reads them.
    """

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._generation = WaitingGeneration(time.monotonic())
        self._reading = threading.Lock()
        self._forgotten = 0     # forget() calls so far: a list read across one is not kept

    def current(self, read: Callable[[], TaskQueueList], read_aside: Callable[[], TaskQueueList]) -> WaitingGeneration:
        """The generation to use. Its task queues are read with ``read`` when
        there are none; when they are old, with ``read_aside`` on a thread of
        its own (so it must not use the caller's connection), one at a time."""
        generation = self._generation
        if generation.task_queues is None:
            return self._read(read)
        if time.monotonic() - generation.since > self.ttl and self._reading.acquire(blocking=False):
            threading.Thread(target=self._read_aside, args=(read_aside,), name="wms-waiting-reader",
                             daemon=True).start()
        return generation

    def _read_aside(self, read: Callable[[], TaskQueueList]) -> None:
        try:
            self._read(read)
        except Exception:  # noqa: BLE001 - a thread of its own: say it, keep the last list another ttl
            logging.getLogger(__name__).warning("reading the waiting task queues failed; using the last list",
                                                exc_info=True)
            self._generation.since = time.monotonic()
        finally:
            self._reading.release()

    def _read(self, read: Callable[[], TaskQueueList]) -> WaitingGeneration:
        forgotten = self._forgotten
        fresh = WaitingGeneration(time.monotonic(), read())
        if self._forgotten == forgotten:        # else what was read may miss jobs made waiting meanwhile
            self._generation = fresh
        return fresh

    def forget(self) -> None:
        self._forgotten += 1
        self._generation = WaitingGeneration(time.monotonic())


class VerifiedTokens:
    """Token rows read from the database, by digest, reused for ``ttl``
    seconds so that a request needs no round trip to authenticate.

    Only rows of valid tokens are kept, and a kept row that no longer
    looks valid (its end has passed) is read again rather than trusted, so
    a renewed token is never refused for its old end. A token ended in
    another process (revoked, deleted) is forgotten when this process next
    looks at the note of ended tokens (services/tokens.py): the rows are
    trusted only while that look is recent (``trusted``). ``ttl`` 0 turns
    the cache off.

    ``generation`` moves whenever rows are forgotten: a row read before
    then may predate the end that made them go, so ``put`` drops it.
    """

    # Entries kept before the whole cache is dropped: one per live token,
    # so a bound that only a flood of distinct tokens reaches.
    LIMIT = 100_000

    def __init__(self, ttl: float = 0.0) -> None:
        self.ttl = ttl
        self._rows: dict[str, tuple[float, Any]] = {}
        self.generation = 0
        # The note of ended tokens as this process last read it: its version
        # (None: never read) and the monotonic time that read began.
        self.ended_version: int | None = None
        self.looked = float("-inf")
        # One look at a time, taken by the thread that makes it.
        self.looking = threading.Lock()
        self._lock = threading.Lock()

    def get(self, digest: str) -> Any | None:
        held = self._rows.get(digest)
        if held is None or time.monotonic() - held[0] > self.ttl:
            return None
        return held[1]

    def put(self, digest: str, row: Any, generation: int | None = None) -> None:
        """Keep ``row``, unless rows were forgotten since ``generation`` (read before it was read)."""
        if self.ttl <= 0:
            return
        with self._lock:
            if generation is not None and generation != self.generation:
                return
            if len(self._rows) >= self.LIMIT:
                self._rows = {}
            self._rows[digest] = (time.monotonic(), row)

    def forget(self, digest: str) -> None:
        with self._lock:
            self.generation += 1
            self._rows.pop(digest, None)

    def trusted(self, window: float) -> bool:
        """Whether the last look at the note of ended tokens began within ``window`` seconds."""
        return time.monotonic() - self.looked <= window

    def age(self) -> float:
        """Seconds since the last look at the note of ended tokens began."""
        return time.monotonic() - self.looked

    def looked_at(self, began: float, version: int, ended: list[str] | None) -> None:
        """The note read from ``began`` on: at ``version``, with the tokens ``ended``
        since the last look (None: unknown, so every row goes). A look that
        began before the last one recorded changes nothing: that one saw more."""
        with self._lock:
            if began <= self.looked:
                return
            if version != self.ended_version:       # rows kept before the first look are not vouched for either
                self.generation += 1
                if ended is None or self.ended_version is None:
                    self._rows = {}
                else:
                    for digest in ended:
                        self._rows.pop(digest, None)
            self.ended_version, self.looked = version, began


@dataclass(frozen=True)
class ReservationCandidates:
    """The queues and hosts an advance reservation may book (services/reservations.py),
    and the complex table their levels were read with: a grant decides with that table."""

    table: ComplexTable
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True)
class ConfiguredRuleSets:
    """The resource quota sets of config/rqs/, read against ``table``."""

    table: ComplexTable
    sets: tuple[RuleSet, ...]


@dataclass(frozen=True)
class QuotaState:
    """The resource quota sets this process applies, replaced whole.

    ``version`` is their stored version (0: never stored, the sets of
    config/rqs/ apply); ``table`` and ``groups`` are what they are compiled
    against. A newer version, a new complex table (complex_table_changed)
    or a new configuration (a new Runtime) each make a new state, so the
    compiled rules never need a key of their own.
    """

    version: int
    sets: tuple[RuleSet, ...]
    table: ComplexTable
    groups: Groups

    @functools.cached_property
    def rules(self) -> QuotaRules | None:
        """The enabled sets compiled for matching, at first use; None when none is enabled (the fast path).

        Compiled when first asked, not when adopted: showing the sets
        (qconf -srqs, qquota) must work even when a set no longer compiles
        against the complex table in force."""
        rules = QuotaRules(self.sets, self.groups, self.table)
        return rules if rules else None


@dataclass
class StoredVersion:
    """The version of a stored cluster object this process uses, and when it last looked."""

    version: int = 0
    checked: float = float("-inf")


@dataclass
class Caches:
    # ------------------------------------------------ per configuration
    task_queue_views: dict[int, TaskQueueView] = field(default_factory=dict)
    static_verdicts: StaticVerdicts = field(default_factory=StaticVerdicts)
    # queue name -> its global and queue levels
    levels: dict[str, tuple[LevelValues, LevelValues]] = field(default_factory=dict)
    reservation_candidates: ReservationCandidates | None = None
    initial_rule_sets: ConfiguredRuleSets | None = None
    # ------------------------------------------------ short-lived
    waiting: Waiting = field(default_factory=lambda: Waiting(CANDIDATES_TTL))
    # the active reservations, as the Matcher sees them
    reservations: Timed[tuple[ReservationView, ...]] = field(default_factory=lambda: Timed(RESERVATIONS_TTL))
    # ------------------------------------------------ for the process's life
    usage_rows: set[tuple[str, str]] = field(default_factory=set)
    stored: dict[str, StoredVersion] = field(default_factory=dict)
    quota_state: QuotaState | None = None
    # authenticated tokens (its ttl set from wms.yaml token_cache_seconds by the runtime)
    verified_tokens: VerifiedTokens = field(default_factory=VerifiedTokens)
    # the key job tokens are signed with (services/job_tokens.py); None until read or made
    job_token_key: bytes | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def stored_version(self, kind: str) -> StoredVersion:
        state = self.stored.get(kind)
        if state is None:
            with self._lock:
                state = self.stored.setdefault(kind, StoredVersion())
        return state

    def complex_table_changed(self) -> None:
        """Everything parsed against the old complex table goes. The record of
        adopted stored objects goes with it: the caller records the new
        table's version next, and the quota sets are read again, against
        the new table."""
        self.stored = {}
        self.task_queue_views = {}
        self.static_verdicts = StaticVerdicts()
        self.levels = {}
        self.reservation_candidates = None
        self.initial_rule_sets = None
        self.quota_state = None
        self.waiting.forget()
