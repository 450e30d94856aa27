"""Granting an advance reservation (specs/003 5.2.2.1.3, qrsub(1)).

The queues are selected as for a job (the hard -l requests against the
global, host and queue levels by the job's own rule, -q, -pe, -ckpt,
-now), with four rules of their own:
* a request no level known at the grant offers (global, the queue, the
  configured host it is bound to) is refused there, "not offered on any
  level", as a job is, unless the pilots' hosts measure it
  (offers.PILOT_REPORTED: arch, mem_free, ...): that is judged when the
  reservation's jobs are matched;
* every user of the access list must be allowed in the queue (access.py);
* a queue, or a configured host, where a job without a runtime limit runs
  is never reserved: such a job may still hold its slots at the start;
* every consumable the reservation takes (slots included) must be free at
  every level that manages it for the whole window, counting running jobs
  until their h_rt ends and every other reservation (calendar.py).
A sequential request takes one queue; a parallel one (-pe, or -alloc with
$fill_up or $round_robin) may spread its slots over several, as few as
possible, largest free share first; -alloc N takes at most N per queue
(and host), -alloc $pe_slots all in one. A slot
range takes the most slots that fit, at least its minimum. Resource quotas
are not consulted (specs/003 "AR and Resource Quotas").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from wms.core import complexes as cx_rules
from wms.core.complexes import ComplexTable
from wms.core.errors import InvalidInput
from wms.core.offers import QUEUE, LevelValues, charged, host_may_offer, request_shortfall
from wms.core.patterns import match_pattern
from wms.core.reservations.access import acl_users, queue_denies
from wms.core.reservations.calendar import Calendar, Use
from wms.core.reservations.timespec import Window

NO_QUEUES = "no queue instances to reserve"
NOT_GRANTED = "Reservation can't be granted"

REASON_NOT_REQUESTED = "not in the -q list"
REASON_HOST_NOT_REQUESTED = "host {host} not requested"
REASON_NOT_INTERACTIVE = "the queue's qtype is not INTERACTIVE (-now)"
REASON_NO_CKPT = "checkpoint environment {ckpt} is not in the queue's ckpt_list"
REASON_NO_PE = "parallel environment {pe} is not in the queue's pe_list"
REASON_UNLIMITED_QUEUE = "jobs without a runtime limit (h_rt) run in this queue"
REASON_UNLIMITED_HOST = "jobs without a runtime limit (h_rt) run on host {host}"
REASON_FULL = "{level} {resource}: {amount} needed, {free} of {capacity} free during the window"
REASON_FEW_SLOTS = "only {got} slots free in the window, {need} needed"
REASON_NOT_MASTER = "not in the -masterq list: cannot hold the master task"


@dataclass(frozen=True)
class Candidate:
    """A queue, bound to one configured host when the request names hosts."""

    queue: str
    host: str | None
    params: Mapping[str, Any]
    levels: tuple[LevelValues, ...]

    @property
    def label(self) -> str:
        return f"{self.queue}@{self.host}" if self.host else self.queue


@dataclass(frozen=True)
class Request:
    window: Window
    acl: tuple[str, ...]
    hard: Mapping[str, Any] = field(default_factory=dict)
    queue_patterns: tuple[str, ...] = ()
    slots_min: int = 1
    slots_max: int = 1
    pe: str | None = None
    ckpt: str | None = None
    interactive: bool = False
    # -alloc: $fill_up, $round_robin, $pe_slots or slots per queue (IZ 285).
    allocation: str | None = None
    # -masterq: the queues (wc_queue_list) the first, master allocation must be in.
    master_queues: tuple[str, ...] = ()

    @property
    def spreads(self) -> bool:
        """Whether the slots may be spread over several queues (parallel, not $pe_slots)."""
        if self.allocation is not None:
            return self.allocation != "$pe_slots"
        return self.pe is not None

    @property
    def per_queue(self) -> int | None:
        return int(self.allocation) if self.allocation and self.allocation.isdigit() else None


@dataclass(frozen=True)
class Booking:
    scope: str
    resource: str
    amount: float
    queue: str
    host: str | None


@dataclass(frozen=True)
class Allocation:
    queue: str
    host: str | None
    slots: int


@dataclass
class Decision:
    granted: bool
    message: str
    allocations: list[Allocation] = field(default_factory=list)
    bookings: list[Booking] = field(default_factory=list)
    # Candidate label -> why it was not (fully) used.
    reasons: dict[str, str] = field(default_factory=dict)


def split_queue_pattern(entry: str) -> tuple[str, str | None]:
    """``-q`` entries: ``QUEUE``, ``QUEUE@HOST`` or ``*@HOST`` (wc_queue_list of sge_types(1))."""
    queue, at, host = entry.rpartition("@")
    if not at:
        return entry, None
    return (queue or "*"), (host or None)


def _queue_matches(pattern: str, name: str) -> bool:
    return match_pattern(pattern, name) or match_pattern(pattern, name.rsplit("/", 1)[-1])


def _listed(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else str(value).replace(",", " ").split()
    return [str(v) for v in items]


def requested_hosts(request: Request) -> tuple[list[str], bool]:
    """Host patterns the request names (-l h=..., -q ..@host); and whether it names any."""
    patterns = [host for _, host in map(split_queue_pattern, request.queue_patterns) if host]
    if "hostname" in request.hard:
        patterns.append(str(request.hard["hostname"]))
    return patterns, bool(patterns)


def static_reason(table: ComplexTable, request: Request, cand: Candidate,
                  usersets: Mapping[str, Sequence[str]]) -> str | None:
    """Why the configuration alone excludes a candidate, or None."""
    if request.queue_patterns:
        wanted = [split_queue_pattern(p) for p in request.queue_patterns]
        if not any(_queue_matches(q, cand.queue) and (h is None or (cand.host and match_pattern(h, cand.host)))
                   for q, h in wanted):
            return REASON_NOT_REQUESTED
    _, names_hosts = requested_hosts(request)
    if names_hosts and cand.host is None:
        return REASON_NOT_REQUESTED
    if not names_hosts and cand.host is not None:
        return REASON_NOT_REQUESTED
    if "hostname" in request.hard and not match_pattern(str(request.hard["hostname"]), cand.host or "",
                                                        ignore_case=True):
        return REASON_NOT_REQUESTED
    reason = queue_denies(cand.params, acl_users(request.acl, usersets), request.acl, usersets)
    if reason:
        return reason
    if request.interactive and "INTERACTIVE" not in (t.upper() for t in _listed(cand.params.get("qtype")) or
                                                     ["BATCH", "INTERACTIVE"]):
        return REASON_NOT_INTERACTIVE
    if request.ckpt and request.ckpt not in _listed(cand.params.get("ckpt_list")):
        return REASON_NO_CKPT.format(ckpt=request.ckpt)
    pes = _listed(cand.params.get("pe_list"))
    if request.pe and pes and request.pe not in pes:
        return REASON_NO_PE.format(pe=request.pe)
    for name, requested in request.hard.items():
        cx = table.resolve(name)
        if cx.is_consumable or cx.name == "hostname":
            continue
        # The job's own judgement (offers.request_shortfall), on the levels known at the grant.
        shortfall = request_shortfall(cx, requested, cand.levels, QUEUE)
        if shortfall is None:
            continue
        if shortfall.level is None and host_may_offer(cx):
            continue  # a value the pilots' hosts measure (arch, mem_free): judged when the jobs are matched
        return shortfall.reason()
    return None


def _amounts(table: ComplexTable, request: Request, cand: Candidate, slots: int,
             master: bool) -> list[tuple[str, LevelValues, Any, float]]:
    """(scope, level, complex, amount) of every accounted level that manages a consumable the request takes."""
    out = []
    for cx, requested in charged(table, request.hard):
        if not cx.is_consumable:
            continue
        amount = cx_rules.consumable_amount(cx, requested, slots, master=master)
        if amount <= 0:
            continue
        for level in cand.levels:
            if level.scope is not None and cx.name in level.fixed:
                out.append((level.scope, level, cx, amount))
    return out


def _shortfall(table: ComplexTable, request: Request, cand: Candidate, slots: int, master: bool,
               calendar: Calendar) -> str | None:
    start, end = request.window.start, request.window.end
    for scope, level, cx, amount in _amounts(table, request, cand, slots, master):
        capacity = float(level.fixed[cx.name])
        free = calendar.free((scope, cx.name), capacity, start, end)
        if amount > free:
            return REASON_FULL.format(level=level.level, resource=cx.name,
                                      amount=cx_rules.format_value(cx, amount),
                                      free=cx_rules.format_value(cx, max(free, 0)),
                                      capacity=cx_rules.format_value(cx, capacity))
    return None


def booked_scopes(table: ComplexTable, request: Request, candidates: Sequence[Candidate],
                  usersets: Mapping[str, Sequence[str]]) -> set[str]:
    """The scopes a grant of ``request`` could book: those to lock while deciding.

    Only candidates the configuration admits, and only levels that manage a
    consumable the request takes; so grants in different queues do not wait
    for each other.
    """
    out: set[str] = set()
    for cand in candidates:
        if static_reason(table, request, cand, usersets) is None:
            out |= {scope for scope, _, _, _ in _amounts(table, request, cand, 1, True)}
    return out


def decide(table: ComplexTable, request: Request, candidates: Sequence[Candidate], calendar: Calendar,
           usersets: Mapping[str, Sequence[str]], unlimited_queues: frozenset[str] = frozenset(),
           unlimited_hosts: frozenset[str] = frozenset()) -> Decision:
    """Grant or deny ``request`` against ``calendar``; the calendar is not changed."""
    if request.slots_min < 1 or request.slots_max < request.slots_min:
        raise InvalidInput(f"slot range {request.slots_min}-{request.slots_max} is empty")
    reasons: dict[str, str] = {}
    eligible: list[Candidate] = []
    for cand in candidates:
        reason = static_reason(table, request, cand, usersets)
        if reason == REASON_NOT_REQUESTED:
            continue
        if reason:
            reasons[cand.label] = reason
            continue
        eligible.append(cand)
    if not eligible:
        return Decision(False, NO_QUEUES, reasons=reasons)
    usable: list[Candidate] = []
    for cand in eligible:
        if cand.queue in unlimited_queues and cand.host is None:
            reasons[cand.label] = REASON_UNLIMITED_QUEUE
        elif cand.host is not None and cand.host in unlimited_hosts:
            reasons[cand.label] = REASON_UNLIMITED_HOST.format(host=cand.host)
        else:
            usable.append(cand)
    work = calendar.copy()
    allocations: list[Allocation] = []
    bookings: list[Booking] = []
    wanted = request.slots_max
    parallel = request.spreads
    # Largest free share first, so a parallel reservation spans few queues;
    # with -masterq the queues that may hold the master task come first.
    order = sorted(usable, key=lambda c: (not is_master_queue(request, c),
                                          -_max_slots(table, request, c, wanted, True, work), c.label))
    for cand in order:
        if wanted == 0:
            break
        first = not allocations
        if first and not is_master_queue(request, cand):
            reasons[cand.label] = REASON_NOT_MASTER
            continue
        cap = min(wanted, request.per_queue or wanted)
        take = _max_slots(table, request, cand, cap, first, work)
        if not parallel and take < request.slots_min:
            take = 0
        if take == 0:
            reasons[cand.label] = _shortfall(table, request, cand, 1, first, work) or "no slot free"
            continue
        for scope, _, cx, amount in _amounts(table, request, cand, take, first):
            work.add((scope, cx.name), Use(request.window.start, request.window.end, amount))
            bookings.append(Booking(scope, cx.name, amount, cand.queue, cand.host))
        allocations.append(Allocation(cand.queue, cand.host, take))
        wanted -= take
        if not parallel:
            break
    got = sum(a.slots for a in allocations)
    if got < request.slots_min:
        if allocations:
            reasons["slots"] = REASON_FEW_SLOTS.format(got=got, need=request.slots_min)
        return Decision(False, NOT_GRANTED, reasons=reasons)
    return Decision(True, "granted", allocations, _merged(bookings), reasons)


def is_master_queue(request: Request, cand: Candidate) -> bool:
    """Whether ``cand`` may hold the master task (always, without -masterq)."""
    if not request.master_queues:
        return True
    return any(_queue_matches(q, cand.queue) and (h is None or (cand.host and match_pattern(h, cand.host)))
               for q, h in map(split_queue_pattern, request.master_queues))


def _max_slots(table: ComplexTable, request: Request, cand: Candidate, wanted: int, master: bool,
               calendar: Calendar) -> int:
    """The most slots (up to ``wanted``) this candidate can give for the whole window."""
    low, high = 0, wanted
    while low < high:   # usage grows with the slot count: bisect
        mid = (low + high + 1) // 2
        if _shortfall(table, request, cand, mid, master, calendar) is None:
            low = mid
        else:
            high = mid - 1
    return low


def _merged(bookings: list[Booking]) -> list[Booking]:
    out: dict[tuple[str, str, str, str | None], float] = {}
    for b in bookings:
        key = (b.scope, b.resource, b.queue, b.host)
        out[key] = out.get(key, 0.0) + b.amount
    return [Booking(scope, resource, amount, queue, host) for (scope, resource, queue, host), amount in out.items()]
